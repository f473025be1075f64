"""HotpotQA in the Hugging Face distractor layout (one JSON object per line).

Each line: `id`, `question`, `answer`, `type`, `level`, `supporting_facts: {title: [..],
sent_id: [..]}` and `context: {title: [..], sentences: [[..], ..]}`. Sentences after the first keep
their leading space, so a paragraph's text is the plain concatenation of its sentences.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memjax.data.jsonl_io import DataFormatError, read_jsonl, require
from memjax.data.qa import QAExample, ensure_question_mark


@dataclass(frozen=True)
class Paragraph:
    title: str
    sentences: tuple[str, ...]

    @property
    def text(self) -> str:
        return "".join(self.sentences)


@dataclass(frozen=True)
class HotpotExample:
    id: str
    question: str
    answer: str
    type: str
    level: str
    supporting_facts: tuple[tuple[str, int], ...]  # (title, sentence index)
    paragraphs: tuple[Paragraph, ...]

    def to_qa(self, add_question_mark: bool = True) -> QAExample:
        question = ensure_question_mark(self.question) if add_question_mark else self.question
        return QAExample(
            id=self.id,
            question=question,
            golden_answers=(self.answer,),
            dataset="hotpotqa",
            metadata={"type": self.type, "level": self.level},
        )


def _str_list(value, field: str, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataFormatError(f"{where}: field {field!r} should be a list of strings")
    return value


def parse_hotpot_row(obj: dict, where: str) -> HotpotExample:
    example_id = require(obj, "id", str, where)
    question = require(obj, "question", str, where)
    answer = require(obj, "answer", str, where)
    context = require(obj, "context", dict, where)
    titles = _str_list(require(context, "title", list, where), "context.title", where)
    sentences = require(context, "sentences", list, where)
    if len(titles) != len(sentences):
        raise DataFormatError(
            f"{where}: field 'context' has {len(titles)} titles but {len(sentences)} sentence lists"
        )
    paragraphs = tuple(
        Paragraph(title, tuple(_str_list(sents, f"context.sentences[{i}]", where)))
        for i, (title, sents) in enumerate(zip(titles, sentences))
    )
    facts = obj.get("supporting_facts", {"title": [], "sent_id": []})
    if not isinstance(facts, dict):
        raise DataFormatError(f"{where}: field 'supporting_facts' should be dict")
    fact_titles = _str_list(facts.get("title", []), "supporting_facts.title", where)
    fact_ids = facts.get("sent_id", [])
    if not isinstance(fact_ids, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in fact_ids
    ):
        raise DataFormatError(f"{where}: field 'supporting_facts.sent_id' should be a list of ints")
    if len(fact_titles) != len(fact_ids):
        raise DataFormatError(
            f"{where}: field 'supporting_facts' has {len(fact_titles)} titles but "
            f"{len(fact_ids)} sent_ids"
        )
    return HotpotExample(
        id=example_id,
        question=question,
        answer=answer,
        type=str(obj.get("type", "")),
        level=str(obj.get("level", "")),
        supporting_facts=tuple(zip(fact_titles, fact_ids)),
        paragraphs=paragraphs,
    )


def load_hotpotqa(path: str | Path) -> list[HotpotExample]:
    path = Path(path)
    return [parse_hotpot_row(obj, f"{path}:{line_no}") for line_no, obj in read_jsonl(path)]
