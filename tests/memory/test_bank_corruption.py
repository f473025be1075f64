"""A damaged saved bank is one clear error naming the damaged file, never a bare
KeyError/TypeError/EOFError, and never a silent load with records missing."""

import json

import numpy as np
import pytest

from memjax.errors import DataFileError, UserError
from memjax.memory import ops as O
from memjax.memory.bank import MemoryBank
from memjax.memory.bank_io import load_bank, save_bank
from memjax.memory.ops import MemoryOp

DIM = 16


def _saved(tmp_path):
    bank = MemoryBank(dim=DIM, default_owner="Caroline", clock=lambda: 1.0)
    rng = np.random.default_rng(0)
    for text in ("Caroline has a dog", "Caroline paints", "Caroline runs"):
        bank.apply(MemoryOp(O.ADD, text=text), embedding=rng.normal(size=DIM))
    bank.apply(MemoryOp(O.DELETE, id="nope"))  # a rejected op is logged too
    root = tmp_path / "bank"
    snapshot = save_bank(bank, root)
    return root, snapshot


def _edit_meta(snapshot, edit):
    meta = json.loads((snapshot / "bank.json").read_text())
    edit(meta)
    (snapshot / "bank.json").write_text(json.dumps(meta))


def _cut_log(snapshot, keep):
    path = snapshot / "oplog.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:keep]))


def _edit_record(snapshot, index, **fields):
    path = snapshot / "oplog.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[index].update(fields)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _truncate(path, keep):
    path.write_bytes(path.read_bytes()[:keep])


CORRUPTIONS = {
    "bank.json missing": (lambda s: (s / "bank.json").unlink(), "bank.json: the bank descr"),
    "bank.json invalid UTF-8": (lambda s: (s / "bank.json").write_bytes(b"\xff{}"), "bank.json"),
    "bank.json not JSON": (lambda s: _truncate(s / "bank.json", 40), "bank.json: unreadable"),
    "bank.json a list": (lambda s: (s / "bank.json").write_text("[]"), "must hold a JSON object"),
    "dim a string": (lambda s: _edit_meta(s, lambda m: m.update(dim="16")), '"dim" must be'),
    "step missing": (lambda s: _edit_meta(s, lambda m: m.pop("step")), '"step" must be'),
    "entries missing": (lambda s: _edit_meta(s, lambda m: m.pop("entries")), '"entries" must'),
    "entry field missing": (
        lambda s: _edit_meta(s, lambda m: m["entries"][1].pop("owner")),
        "entries[1] must be an object",
    ),
    "entry text a number": (
        lambda s: _edit_meta(s, lambda m: m["entries"][0].update(text=3)),
        'entries[0]["text"]',
    ),
    "rejected a list": (lambda s: _edit_meta(s, lambda m: m.update(rejected=[])), '"rejected"'),
    "vectors missing": (lambda s: (s / "vectors.npy").unlink(), "vectors.npy: the embeddings"),
    "vectors truncated": (lambda s: _truncate(s / "vectors.npy", 100), "vectors.npy: unreadable"),
    "vectors empty file": (lambda s: _truncate(s / "vectors.npy", 0), "vectors.npy: unreadable"),
    "vectors wrong shape": (
        lambda s: np.save(s / "vectors.npy", np.zeros((2, DIM), np.float32)),
        "vectors.npy: shape (2, 16), but bank.json holds 3 entries",
    ),
    "vectors float64": (
        lambda s: np.save(s / "vectors.npy", np.zeros((3, DIM))),
        "must be float32",
    ),
    "oplog missing": (lambda s: (s / "oplog.jsonl").unlink(), "oplog.jsonl: the operation log"),
    "oplog cut mid-line": (lambda s: _truncate(s / "oplog.jsonl", 150), "oplog.jsonl:1: malformed"),
    "oplog cut at a line": (lambda s: _cut_log(s, 3), "3 records ending at step 3, but"),
    "oplog empty": (lambda s: _cut_log(s, 0), "0 records ending at step 0"),
    "oplog record not an object": (
        lambda s: (s / "oplog.jsonl").write_text("[1, 2]\n"),
        "oplog.jsonl:1: malformed op record (a record is a JSON object",
    ),
    "oplog op a list": (
        lambda s: _edit_record(s, 0, op=["ADD"]),
        'oplog.jsonl:1: malformed op record ("op"',
    ),
    "oplog step a string": (
        lambda s: _edit_record(s, 2, step="3"),
        'oplog.jsonl:3: malformed op record ("step"',
    ),
    "oplog record dropped inside": (
        lambda s: (s / "oplog.jsonl").write_text(
            "".join(
                line
                for i, line in enumerate((s / "oplog.jsonl").read_text().splitlines(True))
                if i != 1
            )
        ),
        "oplog.jsonl:2: record seq 2, expected 1",
    ),
    "oplog invalid UTF-8": (
        lambda s: (s / "oplog.jsonl").write_bytes(b"\xff\xfe" + (s / "oplog.jsonl").read_bytes()),
        "oplog.jsonl: not valid UTF-8",
    ),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_each_corruption_is_one_error_naming_the_file(tmp_path, name):
    root, snapshot = _saved(tmp_path)
    load_bank(root)  # intact, it loads
    damage, message = CORRUPTIONS[name]
    damage(snapshot)
    with pytest.raises(DataFileError) as caught:
        load_bank(root)
    assert message in str(caught.value) and str(snapshot) in str(caught.value)
    assert isinstance(caught.value, UserError) and isinstance(caught.value, ValueError)


def test_garbage_latest_pointer_names_the_pointer(tmp_path):
    root, _ = _saved(tmp_path)
    (root / "LATEST").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(FileNotFoundError, match="LATEST names"):
        load_bank(root)


def test_wrong_embedder_dim_names_the_bank(tmp_path):
    root, _ = _saved(tmp_path)

    class Wide:
        dim = 32

    with pytest.raises(DataFileError, match="holds 16-d vectors, the embedder makes 32"):
        load_bank(root, Wide())
