"""Finished generation calls kept on disk, so a stopped evaluation resumes at its last call.

    cache = CallCache(workdir / ".calls" / "answer", inputs=job_setup.call_inputs(config, ...))
    timed = TimedPolicy(policy, "answer", batch_size=16, cache=cache)

Answering LoCoMo's test split is hours of batched calls on a CPU; without this a stop in its
last call loses all of them. TimedPolicy cuts a request into the same calls every time (its
prompts sorted by length, then `batch_size` at a time), so each call is looked up by the
SHA-256 of its prompts and `inputs` (the model and its generation settings): a run started
again reads the calls it finished and generates the rest in the same batches, which greedy
decoding makes the completions an unstopped run writes. directory/<key>.json holds one call's
fingerprint, completions and wall time (the latency it reports is the one measured). A file
that does not match what it claims is named on one line and the call is made again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from memjax.fingerprint import text_sha256
from memjax.memory.atomic import atomic_write_text

Prompts = Sequence[Sequence[dict]]  # one call's chat prompts


@dataclasses.dataclass(frozen=True)
class CachedCall:
    texts: list[str]  # one completion per prompt of the call, in the call's order
    seconds: float  # the call's wall time when it was made


@dataclasses.dataclass(frozen=True)
class CallCache:
    directory: Path
    inputs: dict  # what decides a completion besides its prompt (job_setup.call_inputs)

    def fingerprint(self, chunk: Prompts) -> dict:
        return {"prompts.sha256": text_sha256([list(m) for m in chunk]), **self.inputs}

    def path(self, chunk: Prompts) -> Path:
        return Path(self.directory) / f"{text_sha256(self.fingerprint(chunk))[:24]}.json"

    def load(self, chunk: Prompts) -> CachedCall | None:
        path = self.path(chunk)
        if not path.is_file():
            return None
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            call = CachedCall(list(saved["texts"]), float(saved["seconds"]))
        except (OSError, ValueError, KeyError, TypeError) as err:
            print(f"calls: {path} is unreadable ({err}); calling again", flush=True)
            return None
        if saved.get("fingerprint") != self.fingerprint(chunk) or (
            len(call.texts) != len(chunk) or not all(isinstance(t, str) for t in call.texts)
        ):
            print(f"calls: {path} does not hold this call's completions; calling again", flush=True)
            return None
        return call

    def save(self, chunk: Prompts, texts: Sequence[str], seconds: float) -> Path:
        path = self.path(chunk)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "fingerprint": self.fingerprint(chunk),
            "texts": list(texts),
            "seconds": float(seconds),
        }
        return atomic_write_text(path, json.dumps(record, ensure_ascii=False))
