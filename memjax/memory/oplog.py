"""The operation log: every op a bank was asked to apply, accepted or not, with provenance.

Records are immutable and appended in order; `seq` numbers them from 0. A saved log is one JSON
object per line, so it can be read with `jq` and appended to by other tools. Reading one checks
every record's fields and types and that `seq` counts 0, 1, 2, ... with no gap: anything else
is a DataFileError naming the file and line.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path

from memjax.errors import DataFileError
from memjax.memory.ops import MemoryOp, Provenance

_FIELDS = ("seq", "step", "op", "provenance", "accepted", "id", "reason", "before")
_OP_FIELDS = {f.name for f in dataclasses.fields(MemoryOp)}
_PROVENANCE_FIELDS = {f.name for f in dataclasses.fields(Provenance)}


@dataclasses.dataclass(frozen=True)
class OpRecord:
    seq: int
    step: int  # the bank's step after the op (the entry's created/updated step)
    op: MemoryOp
    provenance: Provenance
    accepted: bool
    id: str | None  # the entry touched
    reason: str | None  # why it was rejected
    before: dict | None  # the entry before the op (UPDATE/DELETE), for audits and undo

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> OpRecord:
        """A record from its saved form; ValueError saying which field is wrong."""
        if not isinstance(d, dict):
            raise ValueError(f"a record is a JSON object, got {type(d).__name__}")
        missing = [k for k in _FIELDS if k not in d]
        if missing:
            raise ValueError(f"missing field(s) {missing}")
        for key in ("seq", "step"):
            if not isinstance(d[key], int) or isinstance(d[key], bool) or d[key] < 0:
                raise ValueError(f'"{key}" must be a non-negative integer, got {d[key]!r}')
        for key, names in (("op", _OP_FIELDS), ("provenance", _PROVENANCE_FIELDS)):
            if not isinstance(d[key], dict) or not set(d[key]) <= names:
                raise ValueError(f'"{key}" must be an object with fields among {sorted(names)}')
        if not isinstance(d["accepted"], bool):
            raise ValueError(f'"accepted" must be true or false, got {d["accepted"]!r}')
        if d["before"] is not None and not isinstance(d["before"], dict):
            raise ValueError('"before" must be an object or null')
        return cls(
            seq=d["seq"],
            step=d["step"],
            op=MemoryOp(**d["op"]),
            provenance=Provenance(**d["provenance"]),
            accepted=d["accepted"],
            id=d["id"],
            reason=d["reason"],
            before=d["before"],
        )


def write_log(records: Iterable[OpRecord], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")


def read_log(path: Path) -> list[OpRecord]:
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = OpRecord.from_dict(json.loads(line))
                except (ValueError, TypeError, RecursionError) as e:
                    raise DataFileError(f"{path}:{lineno}: malformed op record ({e})") from None
                if record.seq != len(out):
                    raise DataFileError(
                        f"{path}:{lineno}: record seq {record.seq}, expected {len(out)} "
                        "(records are missing or out of order)"
                    )
                out.append(record)
    except FileNotFoundError:
        raise DataFileError(f"{path}: the operation log is missing") from None
    except UnicodeDecodeError as e:
        raise DataFileError(f"{path}: not valid UTF-8 ({e.reason})") from None
    except OSError as e:
        raise DataFileError(f"{path}: cannot be read ({e.strerror or e})") from None
    return out
