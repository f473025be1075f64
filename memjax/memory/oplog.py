"""The operation log: every op a bank was asked to apply, accepted or not, with provenance.

Records are immutable and appended in order; `seq` numbers them from 0. A saved log is one JSON
object per line, so it can be read with `jq` and appended to by other tools.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path

from memjax.memory.ops import MemoryOp, Provenance


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
        return cls(
            seq=int(d["seq"]),
            step=int(d["step"]),
            op=MemoryOp(**d["op"]),
            provenance=Provenance(**d["provenance"]),
            accepted=bool(d["accepted"]),
            id=d["id"],
            reason=d["reason"],
            before=d["before"],
        )


def write_log(records: Iterable[OpRecord], path: Path) -> None:
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")


def read_log(path: Path) -> list[OpRecord]:
    out = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(OpRecord.from_dict(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{lineno}: malformed op record ({e!r})") from None
    return out
