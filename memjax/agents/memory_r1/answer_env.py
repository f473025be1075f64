"""The answer agent's examples, prompts and RL environment.

    examples = answer_examples(conversation, bank, conversation.qa, k=30)  # retrieval done once
    env = AnswerEnvironment(tokenizer, AnswerSettings(distill=True, metric="em"))
    state, prompt_ids = env.reset(examples[0]); state, result = env.step(state, ids, "eos")

An example carries its retrieved memories (k per speaker, with timestamps; 30 in the paper,
so 60 in all), so an episode is one prompt and one completion: the selected memories, then
the answer after **Answer:**. Reward: exact match of that answer (F1 as an option); no marker
scores 0. `distill=False` is the paper's ablation without memory distillation.

`style="short"` is a compact prompt for CPU runs (a few memories, one instruction) with the
same answer marker and reward; the paper's prompt (`style="paper"`) is Mem0's answer prompt
with Memory-R1's two rules (memjax.agents.memory_r1.answer_prompt).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Literal

from memjax.agents.memory_r1.answer_parser import parse_answer
from memjax.agents.memory_r1.answer_prompt import (
    ANSWER_MARKER,
    ANSWER_NO_DISTILL_TEMPLATE,
    ANSWER_PLACEHOLDERS,
    ANSWER_TEMPLATE,
    format_memories,
    render_answer_prompt,
)
from memjax.agents.memory_r1.bank_ops import answer_memories_batch
from memjax.agents.memory_r1.rewards import RewardMetric, answer_score
from memjax.eval.mem0_metrics import token_f1
from memjax.eval.qa_metrics import exact_match
from memjax.memory.bank import MemoryBank
from memjax.rl.environment import Environment, StepResult
from memjax.text.prompt_templates import PromptTemplate

PromptStyle = Literal["paper", "short"]
Memories = tuple[tuple[str, str], ...]  # ((timestamp, text), ...), best first


@dataclasses.dataclass(frozen=True)
class AnswerExample:
    uid: str  # "<conversation id>/<qa index>"
    question: str
    gold: str
    category: int
    speaker_a: str
    memories_a: Memories
    speaker_b: str
    memories_b: Memories


@dataclasses.dataclass(frozen=True)
class AnswerSettings:
    distill: bool = True
    metric: RewardMetric = "em"
    style: PromptStyle = "paper"
    # Text the assistant turn starts with, e.g. "**Answer:**" to hand a small model the format
    # (the completion then is the answer itself); "" for the paper's setting.
    answer_prefix: str = ""
    # Prompt templates by name (answer, answer_no_distill, answer_short); absent: memjax's.
    templates: Mapping[str, PromptTemplate] = dataclasses.field(default_factory=dict)


def answer_examples(
    conversation_id: str,
    speakers: tuple[str, str],
    bank: MemoryBank,
    items: Sequence,
    k: int = 30,
) -> list[AnswerExample]:
    """QA items (anything with question, answer, category, index) over one conversation's
    bank -> examples with each speaker's top-k memories. Items without an answer get gold ""
    (category 5: only the official protocol scores them, by its phrase rule)."""
    retrieved = answer_memories_batch(bank, speakers, [q.question for q in items], k)
    return [
        AnswerExample(
            uid=f"{conversation_id}/{q.index}",
            question=q.question,
            gold=q.answer if q.answer is not None else "",
            category=q.category,
            speaker_a=speakers[0],
            memories_a=tuple(mems[0]),
            speaker_b=speakers[1],
            memories_b=tuple(mems[1]),
        )
        for q, mems in zip(items, retrieved)
    ]


SHORT_TEMPLATE = PromptTemplate(
    "answer_short",
    ANSWER_PLACEHOLDERS,
    "Memories of {{speaker_a}}:\n{{memories_a}}\n"
    "Memories of {{speaker_b}}:\n{{memories_b}}\n\n"
    "Question: {{question}}\n"
    f"Reply with a few words after {ANSWER_MARKER}",
)
ANSWER_TEMPLATES = {
    t.name: t for t in (ANSWER_TEMPLATE, ANSWER_NO_DISTILL_TEMPLATE, SHORT_TEMPLATE)
}


def render_short_prompt(example: AnswerExample, template: PromptTemplate = SHORT_TEMPLATE) -> str:
    return template.render(
        speaker_a=example.speaker_a,
        memories_a=format_memories(example.memories_a),
        speaker_b=example.speaker_b,
        memories_b=format_memories(example.memories_b),
        question=example.question,
    )


def answer_messages(example: AnswerExample, settings: AnswerSettings) -> list[dict]:
    templates = {**ANSWER_TEMPLATES, **settings.templates}
    if settings.style == "short":
        content = render_short_prompt(example, templates["answer_short"])
    elif settings.style == "paper":
        content = render_answer_prompt(
            example.speaker_a,
            example.memories_a,
            example.speaker_b,
            example.memories_b,
            example.question,
            distill=settings.distill,
            max_per_speaker=max(30, len(example.memories_a), len(example.memories_b)),
            template=templates["answer" if settings.distill else "answer_no_distill"],
        )
    else:
        raise ValueError(f"answer prompt style {settings.style!r}; valid: 'paper', 'short'")
    return [{"role": "user", "content": content}]


def score_completion(text: str, gold: str, metric: RewardMetric = "em") -> dict[str, float]:
    """reward (by `metric`), em, f1 and has_marker of one completion."""
    parsed = parse_answer(text)
    answer = parsed.answer
    return {
        "reward": answer_score(answer, gold, metric),
        "em": exact_match(answer, gold) if answer is not None else 0.0,
        "f1": token_f1(answer, gold) if answer is not None else 0.0,
        "has_marker": float(parsed.has_marker),
    }


class AnswerEnvironment(Environment):
    """One turn: the prompt over an example's memories; reward = EM (or F1) of the answer."""

    max_turns = 1

    def __init__(self, tokenizer, settings: AnswerSettings = AnswerSettings()):
        self.tokenizer = tokenizer
        self.settings = settings

    def prompt_ids(self, example: AnswerExample) -> list[int]:
        ids = self.tokenizer.chat(answer_messages(example, self.settings))
        prefix = self.settings.answer_prefix
        return ids + (self.tokenizer.encode(prefix) if prefix else [])

    def reset(self, example: AnswerExample):
        return example, self.prompt_ids(example)

    def step(self, state: AnswerExample, completion: list[int], stop_reason: str):
        text = self.settings.answer_prefix + self.tokenizer.decode(completion)
        scores = score_completion(text, state.gold, self.settings.metric)
        info = {k: v for k, v in scores.items() if k != "reward"}
        info["truncated_completion"] = float(stop_reason != "eos")
        return state, StepResult(done=True, reward=scores["reward"], info=info)
