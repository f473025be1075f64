"""QA files recognised by what they hold, whatever they are called.

    qa = load_qa_file("my_questions.jsonl", "mine")     # any of the layouts below
    qa.format, len(qa.examples), len(qa.paragraphs)       # 'flashrag', 17, 0

The layouts the peers read and publish, each told apart by its first record's fields:

| format            | record                                                                |
|-------------------|-----------------------------------------------------------------------|
| `flashrag`        | `{"id", "question", "golden_answers": [...]}` (FlashRAG, Search-R1,    |
|                   | MemSearcher: NQ, TriviaQA, PopQA, HotpotQA, 2Wiki, MuSiQue, Bamboogle) |
| `search_r1`       | Search-R1's processed rows: `question`, `reward_model.ground_truth.target` |
| `hotpotqa_hf`     | HotpotQA, Hugging Face layout: `context: {title: [...], sentences}`    |
| `hotpotqa`        | HotpotQA, original layout: `_id`, `context: [[title, [sentences]]]`    |
| `2wikimultihopqa` | 2WikiMultihopQA: HotpotQA's original layout plus `evidences`           |
| `musique`         | MuSiQue: `paragraphs: [{title, paragraph_text}]`, `answer_aliases`     |
| `qa_pairs`        | question and answer only (Bamboogle's CSV `Question,Answer`, ...)      |

A file is JSON Lines, one JSON array of records (HotpotQA's and 2Wiki's own downloads), or a
CSV with a header row. Paragraphs, where a layout carries them, come back as (title, text)
pairs for a closed retrieval corpus. Every record of a file must be in its first record's
layout; anything else is a `DataFormatError` naming the file, the line and the field.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from memjax.data.hotpotqa import parse_hotpot_row
from memjax.data.jsonl_io import DataFormatError, read_json_file, read_jsonl, require
from memjax.data.qa import QAExample, ensure_question_mark

Paragraphs = list[tuple[str, str]]


@dataclass(frozen=True)
class QAFile:
    path: Path
    format: str
    examples: list[QAExample]
    paragraphs: Paragraphs  # (title, text), pooled over the file, in order, not deduplicated
    without_paragraphs: int  # questions that carry none (a closed corpus cannot answer them)


def _answers(values, field: str, where: str) -> tuple[str, ...]:
    if isinstance(values, (str, int, float)) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, list) or not values:
        raise DataFormatError(f"{where}: field {field!r} should be a non-empty list of answers")
    for i, answer in enumerate(values):
        # A few sets store numbers as numbers; the metrics compare strings.
        if not isinstance(answer, (str, int, float)) or isinstance(answer, bool):
            raise DataFormatError(
                f"{where}: field '{field}[{i}]' should be str, got {type(answer).__name__}"
            )
    return tuple(str(a) for a in values)


def _question(obj: dict, key: str, where: str) -> str:
    question = require(obj, key, str, where)
    if not question.strip():
        raise DataFormatError(f"{where}: field {key!r} is empty")
    return question


def _id(obj: dict, keys: tuple[str, ...], where: str, line: int) -> str:
    for key in keys:
        if key in obj:
            value = require(obj, key, (str, int), where)
            return str(value)
    return f"line-{line}"  # files without ids (Bamboogle's CSV): the record's line


Parsed = tuple[QAExample, Paragraphs]


def _flashrag(obj: dict, where: str, line: int) -> Parsed:
    answers = _answers(require(obj, "golden_answers", list, where), "golden_answers", where)
    extra = {k: v for k, v in obj.items() if k not in ("id", "question", "golden_answers")}
    qid = _id(obj, ("id",), where, line)
    return QAExample(qid, _question(obj, "question", where), answers, "", extra), []


def _search_r1(obj: dict, where: str, line: int) -> Parsed:
    truth = require(require(obj, "reward_model", dict, where), "ground_truth", dict, where)
    answers = _answers(require(truth, "target", (list, str), where), "ground_truth.target", where)
    qid = _id(obj, ("id",), where, line)
    return QAExample(qid, _question(obj, "question", where), answers), []


def _hotpotqa_hf(obj: dict, where: str, line: int) -> Parsed:
    example = parse_hotpot_row(obj, where)
    meta = {"type": example.type, "level": example.level}
    qa = QAExample(example.id, example.question, (example.answer,), "", meta)
    return qa, [(p.title, p.text) for p in example.paragraphs]


def _title_sentences(context, where: str) -> Paragraphs:
    """HotpotQA's and 2Wiki's original `context: [[title, [sentence, ...]], ...]`."""
    if not isinstance(context, list):
        raise DataFormatError(f"{where}: field 'context' should be a list of [title, sentences]")
    out = []
    for i, item in enumerate(context):
        ok = isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
        if not ok or not isinstance(item[1], list) or not all(isinstance(s, str) for s in item[1]):
            raise DataFormatError(f"{where}: field 'context[{i}]' should be [title, [sentences]]")
        # 2Wiki's sentences carry no leading space, HotpotQA's after the first do.
        sentences = [s if s[:1].isspace() or not j else " " + s for j, s in enumerate(item[1])]
        out.append((item[0], "".join(sentences)))
    return out


def _original_layout(obj: dict, where: str, line: int) -> Parsed:
    answer = require(obj, "answer", (str, int, float), where)
    qid = _id(obj, ("_id", "id"), where, line)
    meta = {k: obj[k] for k in ("type", "level") if k in obj}
    qa = QAExample(qid, _question(obj, "question", where), (str(answer),), "", meta)
    # 2Wiki lines without `context` carry `qa_pairs` instead: no paragraphs.
    paragraphs = _title_sentences(obj["context"], where) if "context" in obj else []
    return qa, paragraphs


def _musique(obj: dict, where: str, line: int) -> Parsed:
    answer = require(obj, "answer", str, where)
    aliases = obj.get("answer_aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise DataFormatError(f"{where}: field 'answer_aliases' should be a list of strings")
    paragraphs = []
    for i, p in enumerate(require(obj, "paragraphs", list, where)):
        if not isinstance(p, dict):
            raise DataFormatError(f"{where}: field 'paragraphs[{i}]' should be an object")
        text = require(p, "paragraph_text", str, f"{where}: paragraphs[{i}]")
        paragraphs.append((str(p.get("title", "")), text))
    meta = {"answerable": obj["answerable"]} if "answerable" in obj else {}
    answers = (answer, *[a for a in aliases if a != answer])
    qid = _id(obj, ("id",), where, line)
    return QAExample(qid, _question(obj, "question", where), answers, "", meta), paragraphs


def _key(obj: dict, name: str) -> str | None:
    """The key spelt `name` in any case ("Question", "question")."""
    return next((k for k in obj if k.lower() == name), None)


def _qa_pairs(obj: dict, where: str, line: int) -> Parsed:
    q, a = _key(obj, "question"), _key(obj, "answer") or _key(obj, "answers")
    if q is None or a is None:
        raise DataFormatError(f"{where}: a record needs a question and an answer field")
    answers = obj[a]
    if isinstance(answers, str) and a.lower() == "answers":
        answers = [answers]
    qid = _id(obj, ("id", "_id", "qid"), where, line)
    return QAExample(qid, _question(obj, q, where), _answers(answers, a, where)), []


PARSERS: dict[str, Callable[[dict, str, int], Parsed]] = {
    "flashrag": _flashrag,
    "search_r1": _search_r1,
    "hotpotqa_hf": _hotpotqa_hf,
    "hotpotqa": _original_layout,
    "2wikimultihopqa": _original_layout,
    "musique": _musique,
    "qa_pairs": _qa_pairs,
}
FORMATS = tuple(PARSERS)


def detect(obj: dict) -> str | None:
    """The layout of one record, or None when it is none of FORMATS."""
    if "question" in obj and "golden_answers" in obj:
        return "flashrag"
    if "question" in obj and isinstance(obj.get("reward_model"), dict):
        return "search_r1"
    if "question" in obj and "paragraphs" in obj and "answer" in obj:
        return "musique"
    if "question" in obj and "answer" in obj:
        if isinstance(obj.get("context"), dict):
            return "hotpotqa_hf"
        if "evidences" in obj or "entity_ids" in obj or "qa_pairs" in obj:
            return "2wikimultihopqa"
        if isinstance(obj.get("context"), list):
            return "hotpotqa"
    if _key(obj, "question") and (_key(obj, "answer") or _key(obj, "answers")):
        return "qa_pairs"
    return None


def records(path: Path) -> Iterator[tuple[int, dict]]:
    """(line or record number, record) from JSON Lines, a JSON array, or a CSV file."""
    if path.suffix.lower() == ".csv":
        yield from _csv_records(path)
        return
    with path.open("rb") as f:
        first = f.read(4096).lstrip()
    if first.startswith(b"["):
        rows = read_json_file(path)
        for i, row in enumerate(rows, start=1):
            if not isinstance(row, dict):
                raise DataFormatError(
                    f"{path}: record {i} is a {type(row).__name__}, not an object"
                )
            yield i, row
        if not rows:
            raise DataFormatError(f"{path}: no records (the list is empty)")
        return
    yield from read_jsonl(path)


def _csv_records(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        with path.open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except (UnicodeDecodeError, csv.Error) as e:
        raise DataFormatError(f"{path}: not a readable UTF-8 CSV ({e})") from None
    if not rows:
        raise DataFormatError(f"{path}: no records (a header row and no data)")
    for i, row in enumerate(rows, start=2):  # line 1 is the header
        yield i, {k: v for k, v in row.items() if k is not None}


def load_qa_file(
    path: str | Path, name: str, add_question_mark: bool = True, expect: str = "auto"
) -> QAFile:
    """Every question of `path` in the layout its first record has (or `expect`)."""
    path = Path(path)
    examples, paragraphs, bare = [], [], 0
    fmt = None
    for line, obj in records(path):
        where = f"{path}:{line}"
        if fmt is None:
            fmt = detect(obj)
            if fmt is None:
                keys = ", ".join(sorted(obj)[:8]) or "none"
                raise DataFormatError(
                    f"{where}: not a QA record in any known layout (fields: {keys}); "
                    f"expected one of {', '.join(FORMATS)}"
                )
            if expect not in ("auto", "", fmt):
                raise DataFormatError(
                    f"{path}: holds {fmt} records, but config.data.format={expect!r} "
                    "(set data.format=auto to read any layout)"
                )
        qa, found = PARSERS[fmt](obj, where, line)
        question = ensure_question_mark(qa.question) if add_question_mark else qa.question
        examples.append(QAExample(qa.id, question, qa.golden_answers, name, qa.metadata))
        paragraphs += found
        bare += not found
    _unique_ids(examples, path)
    return QAFile(path, fmt, examples, paragraphs, bare if paragraphs else len(examples))


def _unique_ids(examples: list[QAExample], path: Path) -> None:
    seen: set[str] = set()
    for e in examples:
        if e.id in seen:
            raise DataFormatError(f"{path}: question id {e.id!r} appears twice")
        seen.add(e.id)


def describe(qa: QAFile) -> str:
    """One line for logs: 'flashrag, 17 questions, no paragraphs'."""
    corpus = (
        f"{len(qa.paragraphs)} paragraphs"
        + (f" ({qa.without_paragraphs} questions carry none)" if qa.without_paragraphs else "")
        if qa.paragraphs
        else "no paragraphs"
    )
    return f"{qa.path.name}: {qa.format}, {len(qa.examples)} questions, {corpus}"


__all__ = ["FORMATS", "QAFile", "describe", "detect", "load_qa_file", "records"]
