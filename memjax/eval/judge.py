"""LLM-as-a-judge (Mem0's accuracy judge, reused by Memory-R1): prompt rendering and parsing.

The judge sees the question, the gold answer and the generated answer, is told to be generous
(same topic counts; the same date in another format or relative wording counts), and replies
with a one-sentence reason and {"label": "CORRECT" | "WRONG"}. The judge model call lives with
the evaluation job; this module renders the prompt and reads the reply. A reply that cannot be
read is scored WRONG and counted, never raised; a reply that memjax.bounded_input refuses
(too long, nested too deep) is one of those, with the reason in `refused`.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Literal

from memjax.text.json_extract import first_object, screened
from memjax.text.prompt_templates import PromptTemplate

Label = Literal["CORRECT", "WRONG"]
Status = Literal["json", "fallback", "invalid"]

# memjax's wording of the rules of Mem0's ACCURACY_PROMPT (MR1-v5 Fig. 12); a template
# (memjax.text.prompt_templates) with {{question}}, {{gold_answer}}, {{generated_answer}}.
JUDGE_PROMPT = """\
Your task is to label an answer to a question as "CORRECT" or "WRONG". You will be given:
(1) a question (posed by one user to another user),
(2) a "gold" (ground truth) answer,
(3) a generated answer, which you will score as CORRECT or WRONG.

The question asks about something one user should know about the other user from their
earlier conversations. The gold answer is usually short and names the topic the question
refers to. The generated answer may be longer; be generous with your grading: as long as it
touches on the same topic as the gold answer, count it as CORRECT.

For questions about time, the gold answer is a specific date, month or year. The generated
answer may be longer or use relative references (like "last Tuesday" or "next month"); be
generous: as long as it refers to the same date or time period as the gold answer, count it as
CORRECT. A different format of the same date (e.g. "May 7th" vs "7 May") is CORRECT.

Now the real question:
Question: {{question}}
Gold answer: {{gold_answer}}
Generated answer: {{generated_answer}}

First give a short (one sentence) explanation of your reasoning, then finish with CORRECT or
WRONG. Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation
script. Return the label in JSON format with the key "label", e.g. {"label": "CORRECT"}."""
JUDGE_TEMPLATE = PromptTemplate(
    "judge", ("question", "gold_answer", "generated_answer"), JUDGE_PROMPT
)


def render_judge_prompt(
    question: str,
    gold_answer: str,
    generated_answer: str,
    template: PromptTemplate = JUDGE_TEMPLATE,
) -> str:
    return template.render(
        question=question, gold_answer=gold_answer, generated_answer=generated_answer
    )


@dataclasses.dataclass(frozen=True)
class JudgeVerdict:
    label: Label | None  # None when the reply could not be read
    status: Status  # json: {"label": ...}; fallback: one bare label word; invalid: neither
    refused: str | None = None  # why memjax.bounded_input refused the reply, if it did

    @property
    def score(self) -> float:
        return float(self.label == "CORRECT")


_WORDS = re.compile(r"\b(CORRECT|INCORRECT|WRONG)\b", re.IGNORECASE)


def parse_judge_reply(reply: str) -> JudgeVerdict:
    """Read the judge's label; never raises."""
    problems: Counter = Counter()
    if screened(reply, problems) is None:
        return JudgeVerdict(None, "invalid", next(iter(problems)))
    obj = first_object(reply, required_key="label")
    if obj is not None and isinstance(obj["label"], str):
        label = obj["label"].strip().upper()
        if label in ("CORRECT", "WRONG"):
            return JudgeVerdict(label, "json")  # type: ignore[arg-type]
    # No usable JSON: accept the reply only if every label word in it agrees.
    words = {"WRONG" if w.upper() == "INCORRECT" else w.upper() for w in _WORDS.findall(reply)}
    if len(words) == 1:
        return JudgeVerdict(words.pop(), "fallback")  # type: ignore[arg-type]
    return JudgeVerdict(None, "invalid")


@dataclasses.dataclass
class JudgeTally:
    """Running counts over many verdicts, for the report (J and how often parsing failed)."""

    status: Counter = dataclasses.field(default_factory=Counter)
    correct: int = 0
    refused: Counter = dataclasses.field(default_factory=Counter)  # by bounded_input reason

    def add(self, verdict: JudgeVerdict) -> None:
        self.status[verdict.status] += 1
        self.correct += verdict.label == "CORRECT"
        if verdict.refused is not None:
            self.refused[verdict.refused] += 1

    @property
    def total(self) -> int:
        return sum(self.status.values())

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0
