"""Pooling paragraphs into a deduplicated `{"id","contents"}` corpus, and reading it back."""

import json

import pytest

from memjax.data.corpus import (
    Document,
    build_corpus,
    format_contents,
    hotpot_paragraphs,
    read_corpus,
    split_contents,
    write_corpus,
)
from memjax.data.hotpotqa import load_hotpotqa
from memjax.data.jsonl_io import DataFormatError


def test_contents_layout_round_trips():
    contents = format_contents("Paris", "Paris is a city.\nSecond line.")
    assert contents == '"Paris"\nParis is a city.\nSecond line.'
    assert split_contents(contents) == ("Paris", "Paris is a city.\nSecond line.")
    assert split_contents("no title here") == ("", "no title here")


def test_dedup_and_ids_follow_first_sighting():
    docs = build_corpus(
        [("A", "a text"), ("B", "b text"), ("A", "a text "), ("A", "other a"), ("B", "b text")]
    )
    assert [(d.id, d.title, d.text) for d in docs] == [
        ("0", "A", "a text"),
        ("1", "B", "b text"),
        ("2", "A", "other a"),
    ]


def test_write_read_round_trip(tmp_path):
    docs = build_corpus([("A", "x"), ("B", "y")])
    path = tmp_path / "sub" / "corpus.jsonl"
    assert write_corpus(path, docs) == 2
    assert json.loads(path.read_text().splitlines()[1]) == {"id": "1", "contents": '"B"\ny'}
    assert read_corpus(path) == docs
    assert not (tmp_path / "sub" / "corpus.jsonl.tmp").exists()


def test_duplicate_ids_are_rejected(tmp_path):
    path = tmp_path / "c.jsonl"
    write_corpus(path, [Document("1", '"A"\nx'), Document("1", '"B"\ny')])
    with pytest.raises(DataFormatError, match="duplicate document id '1'"):
        read_corpus(path)


def test_missing_contents_names_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "0", "contents": "x"}\n{"id": "1"}\n')
    with pytest.raises(DataFormatError, match=r"c\.jsonl:2: missing field 'contents'"):
        read_corpus(path)


def test_hotpotqa_sample_corpus(shared_data, tmp_path):
    examples = load_hotpotqa(shared_data / "hotpotqa_dev_distractor_500.jsonl")
    docs = build_corpus(hotpot_paragraphs(examples))
    assert len(docs) == 4948  # the distinct paragraph titles the data README counts
    assert [d.id for d in docs] == [str(i) for i in range(len(docs))]
    assert docs[0].contents.startswith('"Gerry Shamray"\nGerry Shamray is an American')
    # Deterministic: a second build gives the same ids and contents.
    assert build_corpus(hotpot_paragraphs(examples)) == docs
    # Every supporting-fact paragraph is in the corpus (the closed corpus can answer).
    titles = {d.title for d in docs}
    assert all(t in titles for e in examples for t, _ in e.supporting_facts)
