"""Fingerprints of what produced a cached artefact, so a cache is reused only for the same inputs.

A fingerprint is a flat JSON object, saved beside the artefact it describes:

    {"conversation.sha256": "9f2c...", "manager.source": "packaged:smollm2", ...}

`differences(saved, current)` lists the fields that changed, for a one-line message ("rebuilt:
manager.source 'a' -> 'b'") or a refusal. Files are identified by their content's SHA-256;
`file_identity` re-reads a file only when its size or modification time changed since the
identity it is compared with (so a 14 GB corpus is hashed once, when it is first indexed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_CHUNK = 1 << 22


def text_sha256(value: Any) -> str:
    """SHA-256 of a JSON-able value, written canonically (sorted keys)."""
    data = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(data).hexdigest()


def settings_fields(prefix: str, settings: Any) -> dict[str, Any]:
    """A settings dataclass as fingerprint fields: scalars as they are, anything larger (a
    template table, a list) by the SHA-256 of its JSON form."""
    out: dict[str, Any] = {}
    for key, value in dataclasses.asdict(settings).items():
        if value is None or isinstance(value, (bool, int, float, str)):
            out[f"{prefix}.{key}"] = value
        else:
            out[f"{prefix}.{key}.sha256"] = text_sha256(value)
    return out


def file_identity(path: str | Path, known: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """{"sha256", "size", "mtime_ns"} of a file. When `known` (an earlier identity of the same
    file) has the same size and mtime, its sha256 is trusted instead of reading the file."""
    stat = os.stat(path)
    identity = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if known and all(known.get(k) == v for k, v in identity.items()) and known.get("sha256"):
        return {"sha256": known["sha256"], **identity}
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return {"sha256": digest.hexdigest(), **identity}


def path_stamp(path: str) -> str:
    """A cheap identity of a local weights file or directory: total size and newest mtime of
    its files ("" when `path` is not a local path, e.g. "packaged:smollm2")."""
    p = Path(path).expanduser() if path else None
    if p is None or not p.exists():
        return ""
    files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
    stats = [f.stat() for f in files]
    size = sum(s.st_size for s in stats)
    newest = max((s.st_mtime_ns for s in stats), default=0)
    return f"{size}B@{newest}"


def _shown(value: Any) -> str:
    text = repr(value)
    if isinstance(value, str) and len(value) == 64:  # a digest: its first 12 hex digits do
        text = repr(value[:12] + "...")
    return text if len(text) <= 60 else text[:57] + "..."


def differences(saved: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[str]:
    """'field: saved -> current' for every field whose value differs (or is missing)."""
    if not saved:
        return ["no fingerprint saved (built by an older memjax)"]
    # Compared as saved: a JSON round trip (tuples become lists, keys strings).
    saved, current = (json.loads(json.dumps(d, default=str)) for d in (saved, current))
    keys = sorted(set(saved) | set(current))
    return [
        f"{k}: {_shown(saved.get(k))} -> {_shown(current.get(k))}"
        for k in keys
        if saved.get(k) != current.get(k)
    ]


def describe(diffs: list[str], limit: int = 3) -> str:
    """The first few differences on one line."""
    more = f" (+{len(diffs) - limit} more)" if len(diffs) > limit else ""
    return "; ".join(diffs[:limit]) + more
