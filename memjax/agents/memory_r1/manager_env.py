"""The memory manager's RL environment: ops on a temporal snapshot, rewarded by a frozen
answer agent's exact match.

    env = ManagerEnvironment(tokenizer, embedder, answer_policy, ManagerSettings())
    state, prompt_ids = env.reset(example)          # example: snapshots.ManagerExample
    state, result = env.step(state, completion_ids, "eos")

reset shows the manager the evidence turn's speaker's related memories (top 10, small prompt
ids) and the turn's facts. step parses its JSON ops (malformed output is counted, never
raised), applies them to a fresh copy of the snapshot, retrieves k memories per speaker for
the question, and asks the frozen answer agent; R = EM of its answer (MR1-v5 eq. 4). The
answer agent is any ChatPolicy (the base model through the sampler, greedy; a scripted one in
tests). Identical resulting banks are answered once: answers are cached by the retrieved
memories and the question, so a group whose members agree costs one answer call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from memjax.agents.memory_r1.answer_env import AnswerExample, AnswerSettings, answer_messages
from memjax.agents.memory_r1.answer_parser import parse_answer
from memjax.agents.memory_r1.bank_ops import answer_memories_batch, apply_manager_ops
from memjax.agents.memory_r1.construction import manager_messages
from memjax.agents.memory_r1.id_map import IdMap
from memjax.agents.memory_r1.manager_parser import parse_manager_output
from memjax.agents.memory_r1.policy import ChatPolicy
from memjax.agents.memory_r1.rewards import answer_score
from memjax.agents.memory_r1.snapshots import ManagerExample, read_cached
from memjax.memory.bank import BankSnapshot, MemoryBank
from memjax.memory.ops import Provenance
from memjax.rl.environment import Environment, StepResult
from memjax.text.prompt_templates import PromptTemplate


@dataclasses.dataclass(frozen=True)
class ManagerSettings:
    related_k: int = 10  # memories shown to the manager
    answer_k: int = 30  # memories per speaker shown to the frozen answer agent
    answer: AnswerSettings = AnswerSettings()  # its prompt, and the reward metric (EM)
    # The manager's prompt templates by name (manager, manager_memory, manager_empty_memory).
    templates: Mapping[str, PromptTemplate] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ManagerState:
    example: ManagerExample
    ids: IdMap


class ManagerEnvironment(Environment):
    max_turns = 1

    def __init__(
        self,
        tokenizer,
        embedder,
        answer_policy: ChatPolicy,
        settings: ManagerSettings = ManagerSettings(),
    ):
        self.tokenizer = tokenizer
        self.embedder = embedder
        self.answer_policy = answer_policy
        self.settings = settings
        self._snapshots: dict[str, BankSnapshot] = {}
        self._answers: dict[tuple, str] = {}

    # ---------------------------------------------------------------- banks

    def bank(self, example: ManagerExample) -> MemoryBank:
        """A fresh, mutable copy of the example's snapshot."""
        if example.snapshot not in self._snapshots:
            snap, dim, _ = read_cached(example.snapshot)
            if dim != self.embedder.dim:
                raise ValueError(
                    f"{example.snapshot}: {dim}-d vectors, the embedder makes {self.embedder.dim}"
                )
            self._snapshots[example.snapshot] = snap
        bank = MemoryBank(self.embedder)
        bank.restore(self._snapshots[example.snapshot])
        return bank

    def messages(self, example: ManagerExample) -> tuple[list[dict], IdMap]:
        owner = example.turn.speaker
        return manager_messages(
            self.bank(example),
            example.facts,
            owner,
            self.settings.related_k,
            self.settings.templates,
        )

    # ---------------------------------------------------------------- rewards

    def score_outputs(
        self, examples: Sequence[ManagerExample], texts: Sequence[str], id_maps=None
    ) -> list[dict[str, float]]:
        """Batched reward: each output's ops on its snapshot, then one answer-agent call for
        all (uncached) questions. Returns reward, answer_em, well_formed and op counts."""
        if id_maps is None:
            id_maps = [self.messages(e)[1] for e in examples]
        pending: dict[tuple, list[dict]] = {}
        results = []
        for example, text, ids in zip(examples, texts, id_maps):
            parsed = parse_manager_output(text, ids)
            bank = self.bank(example)
            apply_manager_ops(
                bank,
                parsed.ops,
                owner=example.turn.speaker,
                timestamp=example.turn.date,
                provenance=Provenance(source_turn=example.turn.dia_id, model_output=text),
            )
            mem_a, mem_b = answer_memories_batch(
                bank, (example.speaker_a, example.speaker_b), [example.question],
                self.settings.answer_k,
            )[0]  # fmt: skip
            answer_example = AnswerExample(
                example.uid, example.question, example.gold, example.category,
                example.speaker_a, tuple(mem_a), example.speaker_b, tuple(mem_b),
            )  # fmt: skip
            key = (example.question, answer_example.memories_a, answer_example.memories_b)
            counts = parsed.counts()
            result = {
                "well_formed": float(parsed.well_formed),
                "ops_accepted": float(len(parsed.ops)),
                "ops_rejected": float(len(parsed.rejections)),
                **{k: float(counts[f"op_{k}"]) for k in ("add", "update", "delete", "none")},
            }
            results.append(result)
            pending.setdefault(key, []).append(result)
            result["_gold"] = example.gold
            result["_answer_example"] = answer_example
        todo = [k for k in pending if k not in self._answers]
        if todo:
            prompts = [
                answer_messages(pending[k][0]["_answer_example"], self.settings.answer)
                for k in todo
            ]
            for key, answer in zip(todo, self.answer_policy(prompts)):
                self._answers[key] = answer
        for key, group in pending.items():
            for result in group:
                answer = parse_answer(self._answers[key]).answer
                gold = result.pop("_gold")
                result.pop("_answer_example")
                result["reward"] = answer_score(answer, gold, self.settings.answer.metric)
                result["answer_em"] = answer_score(answer, gold, "em")
        return results

    # ---------------------------------------------------------------- protocol

    def reset(self, example: ManagerExample):
        messages, ids = self.messages(example)
        return ManagerState(example, ids), self.tokenizer.chat(messages)

    def step(self, state: ManagerState, completion: list[int], stop_reason: str):
        text = self.tokenizer.decode(completion)
        result = self.score_outputs([state.example], [text], [state.ids])[0]
        reward = result.pop("reward")
        result["truncated_completion"] = float(stop_reason != "eos")
        return state, StepResult(done=True, reward=reward, info=result)
