"""A saved corpus index knows what built it: a changed corpus or encoder is reported (and the
in-process MemSearcher retriever rebuilds), and the server refuses an encoder that did not
make the index's vectors."""

import json
import os

import pytest
from ml_collections import ConfigDict

from memjax.agents.memsearcher import job_setup
from memjax.errors import StaleArtefactError
from memjax.memory.corpus import build_corpus_index, read_index_meta, stale_index
from memjax.memory.server import serve_job
from tests.memory.test_server_robustness import CountedWords

ENCODER = {"source": "counted-words", "layout": None}


def _corpus(path, words):
    path.write_text("".join(json.dumps({"id": w, "contents": w}) + "\n" for w in words))
    return path


def test_stale_index_names_what_changed(tmp_path):
    corpus = _corpus(tmp_path / "c.jsonl", ["word1", "word2"])
    root = tmp_path / "index"
    build_corpus_index(corpus, CountedWords(), root, kind="exact", encoder_meta=ENCODER)
    assert stale_index(root, corpus, ENCODER, "exact") is None
    os.utime(corpus, ns=(1, 1))  # touched, same content: still fresh (hashed again)
    assert stale_index(root, corpus, ENCODER, "exact") is None
    assert stale_index(root, None, ENCODER, "exact") is None  # corpus not at hand: not compared
    other = {"source": "packaged:minilm", "layout": None}
    assert stale_index(root, corpus, other, "exact") == [
        "encoder.source: 'counted-words' -> 'packaged:minilm'"
    ]
    assert stale_index(root, corpus, ENCODER, "scann") == ["index.kind: 'exact' -> 'scann'"]
    _corpus(corpus, ["word1", "word3"])
    (diff,) = stale_index(root, corpus, ENCODER, "exact")
    assert diff.startswith("corpus.sha256: ")
    assert stale_index(tmp_path / "nothing", corpus, ENCODER, "exact") == []


def _settings(config):
    return (
        job_setup.RetrieverSettings.from_section(config.retriever),
        job_setup.QAData.from_section(config.data),
    )


def test_memsearcher_rebuilds_an_index_of_another_corpus(tmp_path, monkeypatch, capsys):
    from memjax.memory import embedder

    monkeypatch.setattr(embedder.Embedder, "load", staticmethod(lambda *a, **k: CountedWords()))
    corpus = _corpus(tmp_path / "c.jsonl", ["word1", "word2"])
    config = ConfigDict(
        {
            "retriever": {
                "index_dir": str(tmp_path / "index"),
                "corpus": str(corpus),
                "index_kind": "exact",
                "encoder": {"source": "counted-words", "layout": ""},
            },
            "data": {"format": "flashrag"},
        }
    )
    job_setup.ensure_index(*_settings(config))
    assert read_index_meta(tmp_path / "index")["documents"] == 2
    job_setup.ensure_index(*_settings(config))
    assert "rebuilding" not in capsys.readouterr().out
    _corpus(corpus, ["word1", "word2", "word3"])
    job_setup.ensure_index(*_settings(config))
    assert "was built from other inputs (corpus.sha256: " in capsys.readouterr().out
    assert read_index_meta(tmp_path / "index")["documents"] == 3


def test_server_refuses_an_encoder_that_did_not_make_the_index(tmp_path):
    corpus = _corpus(tmp_path / "c.jsonl", ["word1"])
    build_corpus_index(
        corpus, CountedWords(), tmp_path / "index", kind="exact", encoder_meta=ENCODER
    )
    config = ConfigDict(
        {"index_dir": str(tmp_path / "index"), "encoder": {"source": "packaged:minilm"}}
    )
    with pytest.raises(StaleArtefactError, match="made by encoder 'counted-words', but config"):
        serve_job(config, None)
