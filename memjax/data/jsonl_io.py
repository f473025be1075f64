"""Reading JSON Lines data files with errors that name the file, line and field."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any


class DataFormatError(ValueError):
    """A data file that does not have the expected layout; the message says where."""


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yields (1-based line number, object) for each non-blank line of a .jsonl file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file {path} does not exist")
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFormatError(f"{path}:{line_no}: invalid JSON ({e.msg})") from None
            if not isinstance(obj, dict):
                raise DataFormatError(
                    f"{path}:{line_no}: expected a JSON object, got {type(obj).__name__}"
                )
            yield line_no, obj


def require(obj: Mapping, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """obj[key], checked for presence and type; `where` is "file:line" for the message."""
    if key not in obj:
        raise DataFormatError(f"{where}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DataFormatError(
            f"{where}: field {key!r} should be {names}, got {type(value).__name__}"
        )
    return value


def write_jsonl(path: str | Path, rows: list[dict] | Iterator[dict]) -> int:
    """Writes rows atomically (temp file + rename) so a killed run never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(path)
    return n
