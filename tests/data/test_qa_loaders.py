"""FlashRAG QA and HotpotQA loaders: the real sample files, and malformed input."""

import json

import pytest

from memjax.data.hotpotqa import load_hotpotqa
from memjax.data.jsonl_io import DataFormatError
from memjax.data.qa import ensure_question_mark, load_flashrag_jsonl

NQ = "flashrag_nq_test_sample17.jsonl"
HOTPOT = "hotpotqa_dev_distractor_500.jsonl"


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_question_mark_is_appended_only_when_missing():
    assert ensure_question_mark("who wrote hamlet") == "who wrote hamlet?"
    assert ensure_question_mark("who wrote hamlet?  ") == "who wrote hamlet?"


def test_flashrag_nq_sample(shared_data):
    examples = load_flashrag_jsonl(shared_data / NQ, dataset="nq")
    assert len(examples) == 17
    first = examples[0]
    assert first.id == "test_0"
    assert first.question == "who got the first nobel prize in physics?"
    assert first.golden_answers == ("Wilhelm Conrad Röntgen",)
    assert examples[2].golden_answers == ("Olivia", "MFSK")
    assert all(e.question.endswith("?") and e.dataset == "nq" for e in examples)


def test_flashrag_dataset_defaults_to_folder_name(tmp_path):
    (tmp_path / "triviaqa").mkdir()
    path = write_lines(
        tmp_path / "triviaqa" / "test.jsonl",
        [json.dumps({"id": 7, "question": "q", "golden_answers": ["a", 1960]})],
    )
    (example,) = load_flashrag_jsonl(path)
    assert (example.id, example.dataset, example.golden_answers) == ("7", "triviaqa", ("a", "1960"))


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"id": "1", "question": "q"}', "missing field 'golden_answers'"),
        ('{"id": "1", "question": 3, "golden_answers": ["a"]}', "field 'question' should be str"),
        ('{"id": "1", "question": "q", "golden_answers": []}', "'golden_answers' is empty"),
        ('{"id": "1", "question": "q", "golden_answers": [null]}', "golden_answers[0]"),
        ('{"id": "1", "question": "q", ', "invalid JSON"),
        ('["not", "an", "object"]', "expected a JSON object"),
    ],
)
def test_flashrag_malformed_names_file_line_and_field(tmp_path, line, message):
    good = json.dumps({"id": "0", "question": "q", "golden_answers": ["a"]})
    path = write_lines(tmp_path / "bad.jsonl", [good, "", line])
    with pytest.raises(DataFormatError) as info:
        load_flashrag_jsonl(path)
    assert f"{path}:3" in str(info.value)
    assert message in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(DataFormatError, match="nope.jsonl: data file does not exist"):
        load_flashrag_jsonl(tmp_path / "nope.jsonl")


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", r"no records \(the file is empty\)"),
        (b"\n  \n", r"no records \(the file is empty\)"),
        (
            b'{"id": "1", "question": "a", "golden_answers": ["b"]}\n{"q": "\xff"}\n',
            ":2: not UTF-8",
        ),
        (b"[" * 5000 + b"\n", ":1: "),
    ],
)
def test_empty_undecodable_and_deep_files_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "data.jsonl"
    path.write_bytes(content)
    with pytest.raises(DataFormatError, match=message) as info:
        load_flashrag_jsonl(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_hotpotqa_sample(shared_data):
    examples = load_hotpotqa(shared_data / HOTPOT)
    assert len(examples) == 500
    assert sum(e.type == "bridge" for e in examples) == 394
    assert sum(e.answer.lower() in ("yes", "no") for e in examples) == 26
    assert sorted({len(e.paragraphs) for e in examples}) == [2, 10]
    first = examples[0]
    assert first.answer == "Denise Levertov"
    assert first.supporting_facts == (("Harvey Pekar", 0), ("Denise Levertov", 0))
    # Sentences keep their leading spaces, so joining them gives readable text.
    assert first.paragraphs[0].text.startswith(
        "Gerry Shamray is an American comic book artist. He illustrated"
    )
    qa = first.to_qa()
    assert qa.golden_answers == ("Denise Levertov",) and qa.dataset == "hotpotqa"
    assert qa.question.endswith("?")


def hotpot_row(**overrides):
    row = {
        "id": "h1",
        "question": "Which came first",
        "answer": "yes",
        "type": "comparison",
        "level": "hard",
        "supporting_facts": {"title": ["A"], "sent_id": [0]},
        "context": {"title": ["A", "B"], "sentences": [["A is.", " A was."], ["B is."]]},
    }
    row.update(overrides)
    return json.dumps(row)


def test_hotpotqa_row_and_question_mark(tmp_path):
    path = write_lines(tmp_path / "h.jsonl", [hotpot_row()])
    (example,) = load_hotpotqa(path)
    assert example.paragraphs[0].text == "A is. A was."
    assert example.to_qa().question == "Which came first?"


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"context": {"title": ["A"], "sentences": []}}, "1 titles but 0 sentence lists"),
        ({"context": {"title": ["A"], "sentences": [["x", 3]]}}, "context.sentences[0]"),
        ({"answer": None}, "field 'answer' should be str"),
        ({"supporting_facts": {"title": ["A"], "sent_id": []}}, "1 titles but 0 sent_ids"),
        ({"supporting_facts": {"title": ["A"], "sent_id": ["0"]}}, "supporting_facts.sent_id"),
    ],
)
def test_hotpotqa_malformed(tmp_path, overrides, message):
    path = write_lines(tmp_path / "h.jsonl", [hotpot_row(), hotpot_row(**overrides)])
    with pytest.raises(DataFormatError) as info:
        load_hotpotqa(path)
    assert f"{path}:2" in str(info.value) and message in str(info.value)
