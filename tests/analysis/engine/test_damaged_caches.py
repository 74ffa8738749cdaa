"""A damaged cache entry is detected by checksum, dropped with a warning and computed again; it is
never served and never makes a later command fail (a cut-short embedding shard used to fail every
``analyze`` with embeddings until deleted by hand; an edited whole-analysis entry was served)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.engine import outputs as output_cache
from analysis.engine.cache import KINDS, write_shard
from analysis.engine.shards import EmbeddingCache, ResultCache, text_key
from analysis.runs import block_cache
from pr1_eval.cli.main import main
from tests.support.analysis_fixtures import block, make_record, response, write_run

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
    out.mkdir(exist_ok=True)
    (out / "runs.csv").unlink(missing_ok=True)  # a fresh file, as an analysis writes one
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


def test_a_kept_output_is_linked_where_it_can_be_and_copied_where_not(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry shares the output's file (a hard link: no second write of a sweep's 380 MB); where
    the file system refuses a link it holds a copy, served alike."""
    key, folder = _stored_entry(tmp_path, monkeypatch)
    assert (folder / "runs.csv").stat().st_ino == (tmp_path / "out" / "runs.csv").stat().st_ino
    shutil.rmtree(tmp_path / "cache")

    def refuse(source: object, target: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(output_cache.os, "link", refuse)
    key, folder = _stored_entry(tmp_path, monkeypatch)
    assert (folder / "runs.csv").stat().st_ino != (tmp_path / "out" / "runs.csv").stat().st_ino
    assert (folder / "runs.csv").read_bytes() == (tmp_path / "out" / "runs.csv").read_bytes()


def test_an_output_edited_in_place_drops_its_entry_and_one_replaced_keeps_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """An output rewritten the way every analysis writes (aside, then renamed over) leaves the kept
    file as it was; one edited in place, which the entry shares, no longer matches its sum: the
    entry is dropped, never served."""
    key, folder = _stored_entry(tmp_path, monkeypatch)
    out = tmp_path / "out" / "runs.csv"
    aside = out.with_name(".runs.csv.tmp")
    aside.write_text("run,accuracy\nB,0.1\n")
    aside.replace(out)
    assert output_cache.lookup(key) is not None and (folder / "runs.csv").read_text() == "run,accuracy\nA,0.5\n"
    out.unlink()
    output_cache.restore(folder, output_cache.lookup(key)[1], out.parent)  # type: ignore[index]
    key, folder = _stored_entry(tmp_path, monkeypatch)
    with open(out, "r+") as handle:  # in place: the same file as the entry's
        handle.write("run,accuracy\nA,0.9\n")
    assert output_cache.lookup(key) is None
    assert "runs.csv was changed" in capsys.readouterr().err and not folder.exists()


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


def test_a_whole_analysis_entry_copied_over_another_is_dropped_not_served(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Every sum of a copied entry checks out: only the key it records tells it answers other inputs."""
    _, theirs = _stored_entry(tmp_path, monkeypatch)
    ours = theirs.parent / "other-key"
    shutil.copytree(theirs, ours)
    assert output_cache.lookup("other-key") is None
    assert "written for other inputs" in capsys.readouterr().err and not ours.exists()
    assert output_cache.lookup("key") is not None  # the entry where it belongs is still served


def test_analyze_with_a_foreign_entry_under_its_key_gives_the_cache_off_document(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The audit's case: the entry of ``analyze B`` copied over that of ``analyze A``; the next
    ``analyze A`` printed B's analysis with exit 0."""
    monkeypatch.setenv("PR1_ANALYSIS_WORKERS", "1")
    monkeypatch.setenv("PR1_CACHE", "off")
    one = write_run(tmp_path / "runs", "a", [make_record("t", "p0", 0, response(block(["x y", "z w"])), correct=True)])
    two = write_run(tmp_path / "runs", "b", [make_record("t", "p0", 0, response("q"), correct=False),
                                             make_record("t", "p1", 0, response("r"), correct=False)])

    def analyze(run: Path) -> dict[str, object]:
        capsys.readouterr()
        assert main(["analyze", str(run), "--json", "--no-embeddings", "--out", str(tmp_path / "out" / run.name)]) == 0
        return json.loads(capsys.readouterr().out)

    reference = analyze(one)
    monkeypatch.setenv("PR1_CACHE", str(tmp_path / "cache"))
    assert analyze(one) == reference
    other = analyze(two)
    assert other["runs"] != reference["runs"]
    entries = tmp_path / "cache" / "analysis" / "outputs"
    (mine,) = [d for d in entries.iterdir() if d.is_dir() and json.loads((d / "entry.json").read_text())
               ["body"]["document"] == reference]
    (theirs,) = [d for d in entries.iterdir() if d.is_dir() and d != mine]
    shutil.rmtree(mine)
    shutil.copytree(theirs, mine)
    assert main(["analyze", str(one), "--json", "--no-embeddings", "--out", str(tmp_path / "out" / "a")]) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out) == reference
    assert f"cache entry {mine} is damaged (it was written for other inputs" in printed.err


def test_a_block_cache_file_copied_over_another_runs_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(KINDS["loader"], str(tmp_path))
    frame = pd.DataFrame({name: pd.Series([], dtype=block_cache.DTYPES.get(name, object))
                          for name in block_cache.SCHEMA.names})
    block_cache.write(Path("/runs/a"), ["sig a"], frame, mismatched=0)
    (mine,) = tmp_path.glob("*.parquet")
    block_cache.write(Path("/runs/b"), ["sig b"], frame, mismatched=3)
    (theirs,) = set(tmp_path.glob("*.parquet")) - {mine}
    shutil.copyfile(theirs, mine)  # whole, its page checksums right: another run's table
    assert block_cache.read_counts(Path("/runs/a"), ["sig a"]) is None
    assert block_cache.read(Path("/runs/a"), ["sig a"]) is None
    assert f"cache entry {mine} is damaged (it was written for another run" in capsys.readouterr().err
    assert not mine.exists() and block_cache.read(Path("/runs/b"), ["sig b"]) is not None


def test_a_shard_copied_from_another_cache_folder_is_dropped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A shard names itself by its checksum, so a copy is whole wherever it lands; the folder it
    records tells that its values came from another model (or other code)."""
    keys = [text_key("a")]
    EmbeddingCache(tmp_path / "model-a").add(keys, np.ones((1, 4), dtype=np.float32))
    (shard,) = (tmp_path / "model-a").glob("shard-*.npz")
    (tmp_path / "model-b").mkdir()
    shutil.copy(shard, tmp_path / "model-b" / shard.name)
    assert EmbeddingCache(tmp_path / "model-b").lookup(keys) == {}
    assert "written for the cache 'model-a', not 'model-b'" in capsys.readouterr().err
    assert float(EmbeddingCache(tmp_path / "model-a").lookup(keys)[keys[0]][0]) == 1.0
    old, new = tmp_path / "bleu-0123456789abcdef", tmp_path / "bleu-fedcba9876543210"
    cache = ResultCache(old)
    cache.put("k", 0.25)
    cache.flush()
    new.mkdir()
    for each in old.glob("shard-*.json"):
        shutil.copy(each, new / each.name)
    assert ResultCache(new).get("k") is None and ResultCache(old).get("k") == 0.25
    assert "copied from another cache folder" in capsys.readouterr().err and not list(new.iterdir())


def test_a_shard_from_before_shards_named_their_folder_is_still_read(tmp_path: Path) -> None:
    """Hours of embeddings are not thrown away for lack of the record."""
    data = json.dumps({"keys": ["k"], "values": [0.5]}).encode()
    write_shard(tmp_path, data, "json")
    assert ResultCache(tmp_path).get("k") == 0.5
