"""A damaged cache entry is detected by checksum, dropped with a warning and computed again; it is
never served and never makes a later command fail (a cut-short embedding shard used to fail every
``analyze`` with embeddings until deleted by hand; an edited whole-analysis entry was served)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.engine import outputs as output_cache
from analysis.engine.cache import KINDS
from analysis.engine.shards import EmbeddingCache, ResultCache, text_key
from analysis.runs import block_cache

CACHE_ENV = KINDS["analysis"]


def _cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_cut_short_embedding_shard_is_dropped_and_embedded_again(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    keys = [text_key("a"), text_key("b")]
    EmbeddingCache(tmp_path).add(keys, np.ones((2, 4), dtype=np.float32))
    (shard,) = tmp_path.glob("shard-*.npz")
    _cut(shard)
    cache = EmbeddingCache(tmp_path)
    assert cache.lookup(keys) == {}  # nothing served from it: the texts are embedded again
    assert f"cache entry {shard} is damaged" in capsys.readouterr().err and not shard.exists()
    cache.add(keys, np.full((2, 4), 2, dtype=np.float32))
    assert float(EmbeddingCache(tmp_path).lookup(keys)[keys[0]][0]) == 2.0


def test_an_edited_result_shard_is_not_served(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = ResultCache(tmp_path)
    cache.put("k", "right")
    cache.flush()
    (shard,) = tmp_path.glob("shard-*.json")
    shard.write_text(shard.read_text().replace("right", "wrong"))  # still valid JSON, not what was written
    assert ResultCache(tmp_path).get("k") is None
    assert "checksum mismatch" in capsys.readouterr().err and not shard.exists()


def _stored_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "runs.csv").write_text("run,accuracy\nA,0.5\n")
    entry = output_cache.Entry(files=["runs.csv"], document={"accuracy": 0.5}, tables_text="A 0.5", warnings=[],
                               summary="1 run", status=0)
    output_cache.store("key", out, [out / "runs.csv"], entry)
    found = output_cache.lookup("key")
    assert found is not None and found[1].document == {"accuracy": 0.5}
    return "key", found[0]


def test_an_edited_whole_analysis_entry_is_dropped_not_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    key, folder = _stored_entry(tmp_path, monkeypatch)
    meta = json.loads((folder / "entry.json").read_text())
    meta["body"]["document"]["accuracy"] = 0.9  # the document edited after it was kept
    (folder / "entry.json").write_text(json.dumps(meta))
    assert output_cache.lookup(key) is None
    assert "its record was changed" in capsys.readouterr().err and not folder.exists()


def test_a_changed_file_of_a_whole_analysis_entry_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    key, folder = _stored_entry(tmp_path, monkeypatch)
    (folder / "runs.csv").write_text("run,accuracy\nA,0.9\n")  # the same size: only a checksum sees it
    assert output_cache.lookup(key) is None
    assert "runs.csv was changed" in capsys.readouterr().err and not folder.exists()


def test_a_damaged_block_cache_entry_is_dropped_and_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(KINDS["loader"], str(tmp_path))
    frame = pd.DataFrame({name: pd.Series([], dtype=block_cache.DTYPES.get(name, object))
                          for name in block_cache.SCHEMA.names})
    block_cache.write(Path("/runs/r"), ["sig"], frame, mismatched=0)
    assert block_cache.read(Path("/runs/r"), ["sig"]) is not None
    (entry,) = tmp_path.glob("*.parquet")
    _cut(entry)
    assert block_cache.read(Path("/runs/r"), ["sig"]) is None
    assert f"cache entry {entry} is damaged" in capsys.readouterr().err and not entry.exists()
