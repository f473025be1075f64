"""QA files recognised by their content, whatever they are called: every layout the peers use,
and one line naming file, line and field for anything else."""

import json
from pathlib import Path

import pytest

from memjax.data.jsonl_io import DataFormatError
from memjax.data.qa_formats import FORMATS, describe, detect, load_qa_file

RECORDS = {
    "flashrag": {"id": "test_0", "question": "who wrote hamlet", "golden_answers": ["Shakespeare"]},
    "search_r1": {
        "id": "train_0",
        "question": "who wrote hamlet?",
        "reward_model": {"ground_truth": {"target": ["Shakespeare", "W. Shakespeare"]}},
    },
    "hotpotqa_hf": {
        "id": "h1",
        "question": "Who wrote Hamlet?",
        "answer": "Shakespeare",
        "context": {"title": ["Hamlet"], "sentences": [["Hamlet is a play.", " By Shakespeare."]]},
    },
    "hotpotqa": {
        "_id": "h2",
        "question": "Who wrote Hamlet?",
        "answer": "Shakespeare",
        "context": [["Hamlet", ["Hamlet is a play.", " By Shakespeare."]]],
        "supporting_facts": [["Hamlet", 1]],
    },
    "2wikimultihopqa": {
        "_id": "w1",
        "type": "compositional",
        "question": "Who wrote Hamlet?",
        "answer": "Shakespeare",
        "context": [["Hamlet", ["Hamlet is a play.", "By Shakespeare."]]],
        "evidences": [["Hamlet", "author", "Shakespeare"]],
    },
    "musique": {
        "id": "2hop_1",
        "question": "Who wrote Hamlet?",
        "answer": "Shakespeare",
        "answer_aliases": ["William Shakespeare"],
        "paragraphs": [{"idx": 0, "title": "Hamlet", "paragraph_text": "Hamlet is a play."}],
        "answerable": True,
    },
    "qa_pairs": {"Question": "Who wrote Hamlet?", "Answer": "Shakespeare"},
}


def _write(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("fmt", sorted(RECORDS))
def test_each_layout_is_read_under_any_name(tmp_path, fmt):
    file = _write(tmp_path / "whatever_i_like.data", [RECORDS[fmt]])
    qa = load_qa_file(file, "mine")
    assert qa.format == fmt and len(qa.examples) == 1
    (example,) = qa.examples
    assert example.question.endswith("?") and example.dataset == "mine"
    assert "Shakespeare" in example.golden_answers[0]
    has_paragraphs = fmt in ("hotpotqa_hf", "hotpotqa", "2wikimultihopqa", "musique")
    assert bool(qa.paragraphs) == has_paragraphs
    if fmt == "2wikimultihopqa":  # 2Wiki's sentences carry no leading space; joined with one
        assert qa.paragraphs == [("Hamlet", "Hamlet is a play. By Shakespeare.")]


def test_a_json_array_and_a_bamboogle_csv(tmp_path):
    array = tmp_path / "hotpot_train_v1.1.json"
    array.write_text(json.dumps([RECORDS["hotpotqa"], {**RECORDS["hotpotqa"], "_id": "h3"}]))
    assert [e.id for e in load_qa_file(array, "hp").examples] == ["h2", "h3"]
    csv_file = tmp_path / "Bamboogle Prerelease - Sheet1.csv"
    csv_file.write_text('Question,Answer\n"Who wrote Hamlet, the play?",Shakespeare\n')
    qa = load_qa_file(csv_file, "bamboogle")
    assert qa.format == "qa_pairs" and qa.examples[0].id == "line-2"
    assert qa.examples[0].golden_answers == ("Shakespeare",)


@pytest.mark.parametrize(
    "records, message",
    [
        ([{"text": "no question here"}], "not a QA record in any known layout (fields: text)"),
        ([RECORDS["flashrag"], {"id": "x", "question": "q"}], "x.jsonl:2: missing field 'golden"),
        ([{**RECORDS["flashrag"], "golden_answers": []}], "non-empty list of answers"),
        ([{**RECORDS["flashrag"], "question": "  "}], "field 'question' is empty"),
        ([RECORDS["flashrag"], RECORDS["flashrag"]], "question id 'test_0' appears twice"),
        (
            [{**RECORDS["musique"], "paragraphs": [{"title": "t"}]}],
            "missing field 'paragraph_text'",
        ),
    ],
)
def test_bad_files_are_one_line_naming_file_and_field(tmp_path, records, message):
    with pytest.raises(DataFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_qa_file(_write(tmp_path / "x.jsonl", records), "x")


def test_an_insisted_format_that_the_file_does_not_hold(tmp_path):
    file = _write(tmp_path / "nq.jsonl", [RECORDS["flashrag"]])
    with pytest.raises(DataFormatError, match="holds flashrag records, but config.data.format"):
        load_qa_file(file, "nq", expect="hotpotqa_hf")
    assert detect({"question": "q"}) is None and len(FORMATS) == 7


def test_the_shared_samples_by_content(shared_data):
    wiki = load_qa_file(shared_data / "2wikimultihopqa_200.jsonl", "wiki")
    assert (wiki.format, len(wiki.examples), wiki.without_paragraphs) == (
        "2wikimultihopqa",
        200,
        36,
    )
    assert len({title for title, _ in wiki.paragraphs}) == 1294
    nq = load_qa_file(shared_data / "flashrag_nq_test_sample17.jsonl", "nq")
    assert (nq.format, len(nq.examples), nq.paragraphs) == ("flashrag", 17, [])
    assert describe(nq) == "flashrag_nq_test_sample17.jsonl: flashrag, 17 questions, no paragraphs"
