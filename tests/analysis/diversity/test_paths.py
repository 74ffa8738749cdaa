"""Path diversity: symmetrised BLEU, embeddings embedded once, cached on disk, real model values."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sacrebleu

import analysis.pipeline.scheduled
from analysis.diversity import paths as div
from analysis.diversity.embedding import model_folder
from analysis.engine.cache import KINDS
from analysis.engine.shards import EmbeddingCache, text_key
from analysis.pipeline.scheduled import Embedder, embedding_cache_dir
from analysis.runs.loader import load_runs
from analysis.summary import analyze, to_json
from tests.support.analysis_fixtures import block, embedding_model, make_record, response, write_run


class FakeModel:
    """Deterministic 8-d vectors from the text's hash; records what it was asked to embed."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str], **_: Any) -> np.ndarray:
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            seed = int(hashlib.md5(text.encode()).hexdigest()[:8], 16)
            v = np.random.default_rng(seed).normal(size=8)
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32)


def test_bleu_is_the_symmetrised_sacrebleu_sentence_bleu() -> None:
    a, b = "the cat sat on the mat today", "the cat sat on a mat"
    expected = (sacrebleu.sentence_bleu(a, [b]).score + sacrebleu.sentence_bleu(b, [a]).score) / 200
    assert div.symmetric_bleu(a, b) == pytest.approx(expected)
    assert div.symmetric_bleu(b, a) == pytest.approx(expected)
    assert sacrebleu.sentence_bleu(a, [b]).score != pytest.approx(sacrebleu.sentence_bleu(b, [a]).score)
    assert div.symmetric_bleu(a, a) == pytest.approx(1.0)
    assert div.symmetric_bleu("alpha beta gamma", "one two three") == 0.0
    assert div.symmetric_bleu("", "x") is None and div.symmetric_bleu("  \n", "x") is None


def test_each_distinct_text_is_embedded_once_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = FakeModel()
    embedder = Embedder("fake", cache_dir=tmp_path, model=model)
    pairs = [("a", "b"), ("a", "c"), ("b", "a"), ("", "a")]
    cosines = div.pair_cosines(pairs, embedder)
    assert model.calls == [["a", "b", "c"]]
    va, vb, vc = model.encode(["a", "b", "c"])
    assert cosines[:3] == [pytest.approx(float(va @ vb)), pytest.approx(float(va @ vc)), pytest.approx(float(va @ vb))]
    assert cosines[3] is None
    # a fresh embedder on the same folder needs no model at all
    monkeypatch.setattr(analysis.pipeline.scheduled, "load_embedding_model", lambda *a, **k: pytest.fail("model loaded despite the cache"))
    again = Embedder("fake", cache_dir=tmp_path)
    assert div.pair_cosines(pairs, again) == cosines
    assert again.n_encoded == 0 and again.n_from_cache == 3 and not again.model_loaded


def test_missing_texts_are_encoded_longest_first_in_stored_chunks(tmp_path: Path) -> None:
    """Length-sorted chunks, each stored before the next; rows still in the caller's order."""
    model = FakeModel()
    embedder = Embedder("fake", cache_dir=tmp_path, model=model, chunk_texts=2)
    texts = ["bb", "a", "dddd", "ccc", "a", "eeeee"]
    EmbeddingCache(tmp_path).add([text_key("ccc")], model.encode(["ccc"]))  # already cached
    model.calls.clear()
    vectors = embedder.embed(texts)
    assert model.calls == [["eeeee", "dddd"], ["bb", "a"]]
    assert len(list(tmp_path.glob("shard-*.npz"))) == 3  # the seeded one and one per chunk
    assert embedder.n_encoded == 4 and embedder.n_from_cache == 1 and embedder.encode_seconds > 0
    expected = FakeModel().encode(texts)
    np.testing.assert_array_equal(vectors, expected)


def test_cache_location_and_bad_shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KINDS["embeddings"], str(tmp_path / "c"))
    assert embedding_cache_dir("all-MiniLM-L6-v2") == tmp_path / "c" / "all-MiniLM-L6-v2"
    assert embedding_cache_dir("sentence-transformers/all-MiniLM-L6-v2") == tmp_path / "c" / "all-MiniLM-L6-v2"
    assert model_folder("org/some model") == "org_some_model"
    monkeypatch.delenv(KINDS["embeddings"])
    monkeypatch.delenv("PR1_CACHE", raising=False)
    assert embedding_cache_dir("x") == Path.home() / ".cache" / "pr1-eval" / "embeddings" / "x"
    monkeypatch.setenv("PR1_CACHE", str(tmp_path / "root"))  # the one root: every kind in a folder under it
    assert embedding_cache_dir("x") == tmp_path / "root" / "embeddings" / "x"
    monkeypatch.setenv("PR1_CACHE", "off")
    assert embedding_cache_dir("x") is None and Embedder("x").cache.directory is None
    monkeypatch.delenv("PR1_CACHE")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "shard-bad.npz").write_bytes(b"not a zip")
    cache = EmbeddingCache(folder)
    assert len(cache) == 0
    cache.add([text_key("t")], np.ones((1, 4), dtype=np.float32))
    assert list(EmbeddingCache(folder).lookup([text_key("t")])) == [text_key("t")]


def test_shards_are_merged_when_they_pile_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = EmbeddingCache(tmp_path)
    cache.max_shards = 2
    for i in range(3):
        cache.add([text_key(str(i))], np.full((1, 2), i, dtype=np.float32))
    assert len(list(tmp_path.glob("shard-*.npz"))) == 1
    fresh = EmbeddingCache(tmp_path)
    assert len(fresh) == 3 and fresh.lookup([text_key("2")])[text_key("2")].tolist() == [2.0, 2.0]


def test_real_model_cosines_match_pairwise_encoding(tmp_path: Path) -> None:
    model = embedding_model()
    texts = ["Add 3 and 4 to get 7.", "Seven is three plus four.", "The capital of France is Paris."]
    embedder = Embedder("all-MiniLM-L6-v2", cache_dir=tmp_path, model=model)
    got = div.pair_cosines([(texts[0], texts[1]), (texts[0], texts[2]), (texts[0], texts[0])], embedder)
    for (a, b), value in zip([(0, 1), (0, 2)], got, strict=False):
        va, vb = model.encode([texts[a], texts[b]])
        assert value == pytest.approx(float(va @ vb / np.linalg.norm(va) / np.linalg.norm(vb)), abs=1e-5)
    assert got[2] == pytest.approx(1.0, abs=1e-5)
    assert got[0] > got[1]  # the two arithmetic paraphrases are closer than the unrelated sentence


def test_diversity_in_the_analysis(tmp_path: Path) -> None:
    paths = ["x = 2 + 2 = 4", "two plus two is four", "four"]
    records = [make_record("t", "p0", 0, response(block(paths))),
               make_record("t", "p1", 0, response(block(["same text", ""]))),
               make_record("t", "p2", 0, response("no block"))]
    write_run(tmp_path, "r", records)
    embedder = Embedder("fake", cache_dir=False, model=FakeModel())
    analysis = analyze(load_runs(tmp_path, tokenizer=None), embedder)
    pairs = analysis.pairs
    assert len(pairs) == 4  # 3 pairs in the first block, 1 in the second
    first = pairs[pairs["problem_id"] == "p0"]
    assert list(zip(first["path_i"], first["path_j"], strict=True)) == [(0, 1), (0, 2), (1, 2)]
    expected = [div.symmetric_bleu(paths[i], paths[j]) for i, j in [(0, 1), (0, 2), (1, 2)]]
    assert first["bleu"].tolist() == pytest.approx(expected)
    empty = pairs[pairs["problem_id"] == "p1"].iloc[0]
    assert np.isnan(empty["bleu"]) and np.isnan(empty["cosine"])
    row = to_json(analysis)["runs"][0]
    assert row["bleu_mean"] == pytest.approx(sum(expected) / 3)
    assert row["cosine_mean"] == pytest.approx(float(first["cosine"].mean()))
    assert analysis.blocks.set_index("problem_id").loc["p0", "bleu_mean"] == pytest.approx(sum(expected) / 3)
    assert "1 path pair(s) with an empty path" in analysis.runs.iloc[0]["notes"]
