"""Open-domain QA examples and the FlashRAG jsonl loader (`{"id","question","golden_answers"}`).

NQ, TriviaQA, PopQA, HotpotQA, 2Wiki, MuSiQue and Bamboogle all come in this layout from
`RUC-NLPIR/FlashRAG_datasets`, which is what MemSearcher and Search-R1 train and evaluate on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from memjax.data.jsonl_io import DataFormatError, read_jsonl, require


@dataclass(frozen=True)
class QAExample:
    id: str
    question: str
    golden_answers: tuple[str, ...]
    dataset: str = ""
    # Anything else the source file carries (HotpotQA's type/level, ...), kept for analysis.
    metadata: dict = field(default_factory=dict, compare=False, hash=False)

    def to_row(self) -> dict:
        return {
            "id": self.id,
            "question": self.question,
            "golden_answers": list(self.golden_answers),
            "dataset": self.dataset,
        }


def ensure_question_mark(question: str) -> str:
    """MemSearcher's data preparation appends `?` to questions that lack one."""
    question = question.strip()
    return question if question.endswith("?") else question + "?"


def load_flashrag_jsonl(
    path: str | Path, dataset: str | None = None, add_question_mark: bool = True
) -> list[QAExample]:
    """Reads a FlashRAG QA file; `dataset` defaults to the file's parent folder name."""
    path = Path(path)
    dataset = dataset if dataset is not None else path.parent.name
    examples = []
    for line_no, obj in read_jsonl(path):
        where = f"{path}:{line_no}"
        example_id = require(obj, "id", (str, int), where)
        question = require(obj, "question", str, where)
        answers = require(obj, "golden_answers", list, where)
        if not answers:
            raise DataFormatError(f"{where}: field 'golden_answers' is empty")
        for i, answer in enumerate(answers):
            # A few FlashRAG sets store numbers as numbers; the metrics compare strings.
            if not isinstance(answer, (str, int, float)) or isinstance(answer, bool):
                raise DataFormatError(
                    f"{where}: field 'golden_answers[{i}]' should be str, "
                    f"got {type(answer).__name__}"
                )
        if not question.strip():
            raise DataFormatError(f"{where}: field 'question' is empty")
        extra = {k: v for k, v in obj.items() if k not in ("id", "question", "golden_answers")}
        examples.append(
            QAExample(
                id=str(example_id),
                question=ensure_question_mark(question) if add_question_mark else question,
                golden_answers=tuple(str(a) for a in answers),
                dataset=dataset,
                metadata=extra,
            )
        )
    return examples
