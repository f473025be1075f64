"""Plain RAG: retrieve once with the question, answer in one call.

The answer is the `\\boxed{}` content when there is one, else the whole completion (FlashRAG's
standard pipeline scores the raw generation, and small models rarely box).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memjax.agents.episode import (
    ContextRecord,
    EpisodeResult,
    ModelCall,
    ModelOutput,
    SearchRequest,
)
from memjax.agents.retrieval import Passage, Retriever
from memjax.agents.tool_format import extract_boxed
from memjax.eval.qa_metrics import em_score

SYSTEM_PROMPT = (
    "Answer the question using the documents below. Answer with a short phrase, not a sentence, "
    "inside \\boxed{}, for example \\boxed{Beijing}.\n\nDocuments:\n{documents}"
)


def format_documents(passages: Sequence[Passage]) -> str:
    docs = []
    for i, p in enumerate(passages, start=1):
        title, _, text = p["contents"].partition("\n")
        docs.append(f"Doc {i}(Title: {title}) {text}")
    return "\n".join(docs)


def messages(question: str, passages: Sequence[Passage]) -> tuple[dict, ...]:
    system = SYSTEM_PROMPT.replace("{documents}", format_documents(passages))
    return (
        {"role": "system", "content": system},
        {"role": "user", "content": f"Question: {question}"},
    )


@dataclass(frozen=True)
class RagSettings:
    top_k: int = 5


class RagEpisode:
    """Built with its passages already retrieved; `make_rag_episodes` batches the retrieval."""

    def __init__(self, question: str, passages: Sequence[Passage]):
        self.question = question
        self.passages = list(passages)
        self.context = ContextRecord([ModelCall(messages(question, self.passages))])
        self.stop_reason = ""

    @property
    def done(self) -> bool:
        return bool(self.context.outputs)

    def current_call(self) -> ModelCall:
        if self.done:
            raise RuntimeError("no model call pending")
        return self.context.calls[0]

    def observe(self, output: ModelOutput) -> SearchRequest | None:
        if self.done:
            raise RuntimeError("observe() after the answer")
        self.context.outputs.append(output)
        self.stop_reason = "answer" if output.eos else "no_eos"
        return None

    def receive(self, passages: list[Passage]) -> None:
        raise RuntimeError("plain RAG makes no searches after the first")

    def result(self, golden_answers: Sequence[str]) -> EpisodeResult:
        if not self.done:
            raise RuntimeError("result() before the episode ended")
        text = self.context.outputs[0].text
        boxed = extract_boxed(text)
        answer = boxed if boxed is not None else (text.strip() or None)
        return EpisodeResult(
            question=self.question,
            answer=answer,
            reward=em_score(answer, golden_answers),
            stop_reason=self.stop_reason,
            contexts=[self.context],
            turn_contexts=[self.context],
            format_valid=boxed is not None,
            searches=[self.question],
        )


def make_rag_episodes(
    questions: Sequence[str], retriever: Retriever, settings: RagSettings = RagSettings()
) -> list[RagEpisode]:
    results = retriever.search(list(questions), settings.top_k)
    return [RagEpisode(q, passages) for q, passages in zip(questions, results)]
