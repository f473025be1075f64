"""Reading JSON and JSON Lines data files with errors that name the file, line and field.

Every way a data file can be wrong (missing, empty, not UTF-8, not JSON, nested past any real
record's depth) is a `DataFormatError` (a `memjax.errors.DataError`) whose message starts with
`file:line`, so the launcher prints it as one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from memjax.errors import DataError


class DataFormatError(DataError):
    """A data file that does not have the expected layout; the message says where."""


def _decode(raw: bytes, path: Path, first_line: int, error: type[DataError]) -> str:
    """UTF-8 text of `raw` (which starts at line `first_line` of `path`)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = first_line + raw[: e.start].count(b"\n")
        bad = raw[e.start : e.start + 1]
        raise error(f"{path}:{line}: not UTF-8 (byte {e.start}: {bad!r})") from None


def _loads(text: str, path: Path, first_line: int, error: type[DataError]):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        where = f"{path}:{first_line + e.lineno - 1}"
        raise error(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise error(f"{path}:{first_line}: JSON nested too deeply") from None


def read_json_file(path: str | Path, error: type[DataError] = DataFormatError):
    """One JSON document (LoCoMo, LongMemEval); an error names the file and the line."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: file not found")
    raw = path.read_bytes()
    if not raw.strip():
        raise error(f"{path}: the file is empty")
    return _loads(_decode(raw, path, 1, error), path, 1, error)


def read_jsonl(path: str | Path, allow_empty: bool = False) -> Iterator[tuple[int, dict]]:
    """Yields (1-based line number, object) for each non-blank line of a .jsonl file; a file
    with no records is an error unless `allow_empty`."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"{path}: data file does not exist")
    records = 0
    with path.open("rb") as f:
        for line_no, raw in enumerate(f, start=1):
            where = f"{path}:{line_no}"
            line = _decode(raw, path, line_no, DataFormatError)
            if not line.strip():
                continue
            obj = _loads(line.rstrip("\r\n"), path, line_no, DataFormatError)
            if not isinstance(obj, dict):
                raise DataFormatError(f"{where}: expected a JSON object, got {type(obj).__name__}")
            records += 1
            yield line_no, obj
    if not records and not allow_empty:
        raise DataFormatError(f"{path}: no records (the file is empty)")


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
