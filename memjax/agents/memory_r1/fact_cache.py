"""Extracted facts kept on disk, keyed by what produced them.

    cache = FactCache(directory, inputs=job_setup.fact_inputs(config))
    hit = cache.load(conversation, settings)        # CachedFacts, or None
    cache.save(conversation, settings, outputs, seconds, batch)

directory/<conversation>/<key>.json holds the fact extractor's raw output for every turn of the
conversation, the latencies of the batched calls that wrote them, and the fingerprint whose
SHA-256 is <key>: the conversation's turns, the fact prompts and context, and `inputs` (the
extractor model and its generation settings). Facts do not depend on the bank or the manager,
so banks built by different managers over one extractor (Memory-SFT's and the RL manager's,
which keeps the SFT extractor) extract them once; on LoCoMo that is a tenth of the build. A
file that does not match what it claims (damaged, cut, another conversation) is named on one
line and extracted again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from memjax.agents.memory_r1.construction import (
    ConstructionSettings,
    conversation_sha256,
    conversation_stream,
)
from memjax.data.locomo_types import Conversation
from memjax.fingerprint import text_sha256
from memjax.memory.atomic import atomic_write_text


@dataclasses.dataclass(frozen=True)
class CachedFacts:
    outputs: list[str]  # the extractor's raw output, one per turn of the conversation
    seconds: list[float]  # latency per item of the batched calls that wrote them
    batch: list[str]  # the conversations extracted in the same calls (they share `seconds`)


@dataclasses.dataclass(frozen=True)
class FactCache:
    directory: Path
    inputs: dict  # the extractor's identity and generation settings (job_setup.fact_inputs)

    def fingerprint(self, conversation: Conversation, settings: ConstructionSettings) -> dict:
        return {
            "conversation.sha256": conversation_sha256(conversation),
            **{f"construction.{k}": v for k, v in settings.fact_fingerprint().items()},
            **self.inputs,
        }

    def path(self, conversation: Conversation, settings: ConstructionSettings) -> Path:
        key = text_sha256(self.fingerprint(conversation, settings))[:16]
        return Path(self.directory) / conversation.sample_id / f"{key}.json"

    def load(
        self, conversation: Conversation, settings: ConstructionSettings
    ) -> CachedFacts | None:
        path = self.path(conversation, settings)
        if not path.is_file():
            return None
        turns = len(conversation_stream(conversation))
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            facts = CachedFacts(list(saved["outputs"]), list(saved["seconds"]), saved["batch"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            print(f"facts: {path} is unreadable ({err}); extracting again", flush=True)
            return None
        if saved.get("fingerprint") != self.fingerprint(conversation, settings) or (
            len(facts.outputs) != turns or not all(isinstance(o, str) for o in facts.outputs)
        ):
            print(f"facts: {path} does not hold this conversation's facts; extracting again")
            return None
        return facts

    def save(
        self,
        conversation: Conversation,
        settings: ConstructionSettings,
        outputs: Sequence[str],
        seconds: Sequence[float],
        batch: Sequence[str],
    ) -> Path:
        path = self.path(conversation, settings)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "fingerprint": self.fingerprint(conversation, settings),
            "outputs": list(outputs),
            "seconds": list(seconds),
            "batch": list(batch),
        }
        return atomic_write_text(path, json.dumps(record, ensure_ascii=False))
