"""Completions of an OpenAI-compatible endpoint kept on disk, one file per request.

    cache = ResponseCache("/work/.cache/openai")
    key = cache.key({"model": "gpt-4o-mini", "messages": [...], "temperature": 0, ...})
    cache.load(key)              # the saved reply, or None
    cache.save(key, request, reply)

The key is the SHA-256 of everything that decides a reply (the model, the messages, the sampling
settings), never of where it was sent or with which key: a rerun against any of the
round-robin servers reads the same file, and a stopped evaluation resumes with the replies it
already has. Files are written atomically (a stop mid-write leaves the old state); a file that
does not hold what its name claims is ignored and replaced.
"""

from __future__ import annotations

import json
from pathlib import Path

from memjax.fingerprint import text_sha256
from memjax.memory.atomic import atomic_write_text


class ResponseCache:
    def __init__(self, directory: str | Path):
        self.directory = Path(directory).expanduser()

    @staticmethod
    def key(request: dict) -> str:
        return text_sha256(request)

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def load(self, key: str) -> dict | None:
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(saved, dict) or saved.get("key") != key:
            return None
        reply = saved.get("reply")
        return reply if isinstance(reply, dict) else None

    def save(self, key: str, request: dict, reply: dict) -> Path:
        record = {"key": key, "request": request, "reply": reply}
        self.path(key).parent.mkdir(parents=True, exist_ok=True)
        return atomic_write_text(self.path(key), json.dumps(record, ensure_ascii=False))
