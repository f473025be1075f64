"""Memory bank semantics: the four operations, rejections, provenance, snapshots, atomic saves."""

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from memjax.memory import ops as O
from memjax.memory.bank import MemoryBank
from memjax.memory.bank_io import load_bank, save_bank
from memjax.memory.ops import MemoryOp, Provenance

REPO = Path(__file__).resolve().parents[2]


class BagOfWords:
    """A deterministic test encoder: hashed word counts, L2-normalised (texts sharing words
    are close). It stands in for the JAX encoder, which has its own tests."""

    dim = 512

    def __init__(self):
        self.calls = []

    def encode(self, texts, kind="passage"):
        self.calls.append((list(texts), kind))
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().replace("?", "").split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def _state(bank):
    snap = bank.snapshot()
    return (
        snap.entries,
        snap.vectors.tobytes(),
        snap.step,
        snap.next_id,
        snap.rejected,
        [r.to_dict() for r in snap.log],
    )


def _bank():
    return MemoryBank(BagOfWords(), default_owner="Caroline", clock=lambda: 1000.0)


def test_add_update_delete_noop_and_provenance():
    bank = _bank()
    prov = Provenance(source_turn="D1:3", model_output='{"memory": [...]}')
    r1 = bank.apply(MemoryOp(O.ADD, text="Caroline has a dog", timestamp="7 May 2023"), prov)
    r2 = bank.apply(MemoryOp(O.ADD, text="Melanie paints sunsets", owner="Melanie"))
    assert (r1.accepted, r1.id, r2.id) == (True, "0", "1")
    e = bank.get("0")
    assert (e.owner, e.timestamp, e.created_step, e.updated_step) == (
        "Caroline",
        "7 May 2023",
        1,
        1,
    )
    r = bank.apply(
        MemoryOp(O.UPDATE, id="0", text="Caroline has two dogs", timestamp="9 June 2023"),
        Provenance(source_turn="D2:1", model_output="out2"),
    )
    assert r.accepted
    e = bank.get("0")
    assert e.text == "Caroline has two dogs" and (e.created_step, e.updated_step) == (1, 3)
    assert e.history == [{"text": "Caroline has a dog", "timestamp": "7 May 2023", "step": 1}]
    np.testing.assert_allclose(bank.embedding("0"), BagOfWords().encode([e.text])[0])
    assert bank.apply(MemoryOp(O.NOOP)).accepted and len(bank) == 2
    assert bank.apply(MemoryOp(O.DELETE, id="1")).accepted
    assert "1" not in bank and bank.owners() == ["Caroline"]
    r = bank.apply(MemoryOp(O.ADD, text="Caroline likes hiking"))
    assert r.id == "2"  # ids are never reused
    assert bank.step == 6 and not bank.rejected
    log = bank.log
    assert [x.op.kind for x in log] == [O.ADD, O.ADD, O.UPDATE, O.NOOP, O.DELETE, O.ADD]
    assert [x.seq for x in log] == list(range(6)) and [x.step for x in log] == list(range(1, 7))
    assert log[0].provenance == Provenance("D1:3", '{"memory": [...]}', 1000.0)
    assert log[2].provenance.source_turn == "D2:1" and log[2].before["text"] == "Caroline has a dog"
    assert log[4].before["text"] == "Melanie paints sunsets" and log[4].id == "1"


@pytest.mark.parametrize(
    "op, reason",
    [
        (MemoryOp(O.UPDATE, id="99", text="x"), O.UNKNOWN_ID),
        (MemoryOp(O.DELETE, id="99"), O.UNKNOWN_ID),
        (MemoryOp(O.DELETE), O.MISSING_ID),
        (MemoryOp(O.UPDATE, text="no id"), O.MISSING_ID),
        (MemoryOp(O.ADD, text="   "), O.EMPTY_TEXT),
        (MemoryOp(O.ADD, text=None), O.EMPTY_TEXT),
        (MemoryOp(O.UPDATE, id="0", text=""), O.EMPTY_TEXT),
        (MemoryOp(O.ADD, id="0", text="dup"), O.DUPLICATE_ID),
        (MemoryOp(O.ADD, text="x" * 5000), O.TEXT_TOO_LONG),
        (MemoryOp("MERGE", id="0", text="x"), O.UNKNOWN_KIND),
        (MemoryOp(O.ADD, text="x", owner=7), O.BAD_FIELD),
        ("not an op", O.UNKNOWN_KIND),
    ],
)
def test_invalid_ops_are_rejected_counted_and_leave_the_bank_unchanged(op, reason):
    bank = _bank()
    bank.apply(MemoryOp(O.ADD, text="Caroline has a dog"))
    before = _state(bank)
    result = bank.apply(op, Provenance(model_output="garbage"))
    assert not result.accepted and result.reason == reason
    assert bank.rejected == {reason: 1}
    entries, vectors, *_ = _state(bank)
    assert (entries, vectors) == before[:2]
    assert bank.log[-1].accepted is False and bank.log[-1].reason == reason
    assert bank.log[-1].provenance.model_output == "garbage"


def test_model_output_parsing_and_batched_apply():
    bank = _bank()
    items = json.loads(
        '{"memory": [{"id": "0", "text": "Caroline has a dog", "event": "ADD"},'
        ' {"id": 0, "text": "Caroline has two dogs", "event": "UPDATE",'
        '  "old_memory": "Caroline has a dog"},'
        ' {"id": "5", "text": "x", "event": "DELETE"},'
        ' {"id": "0", "text": "Caroline has two dogs", "event": "NONE"}, "junk"]}'
    )["memory"]
    ops = [MemoryOp.from_model(x, owner="Caroline", timestamp="1 Jan 2024") for x in items]
    assert [o.kind for o in ops] == [O.ADD, O.UPDATE, O.DELETE, O.NOOP, "<str>"]
    results = bank.apply_many(ops, Provenance(source_turn="D4:2"))
    assert [r.accepted for r in results] == [True, True, False, True, False]
    assert bank.get("0").text == "Caroline has two dogs"
    assert bank.rejected == {O.UNKNOWN_ID: 1, O.UNKNOWN_KIND: 1}
    assert len(bank.embedder.calls) == 1  # one embedding batch for the whole list


def test_batched_apply_logs_each_op_with_its_own_provenance():
    bank = _bank()
    ops = [MemoryOp(O.ADD, text=t, owner="Ann") for t in ("lives in Paris", "has a cat")]
    bank.apply_many(ops, [Provenance(source_turn="D1:1"), Provenance(source_turn="D1:2")])
    assert [(r.op.text, r.provenance.source_turn) for r in bank.log] == [
        ("lives in Paris", "D1:1"),
        ("has a cat", "D1:2"),
    ]
    assert len(bank.embedder.calls) == 1
    with pytest.raises(ValueError, match="2 ops but 1 provenances"):
        bank.apply_many(ops, [Provenance(source_turn="D1:1")])


def test_search_per_owner_and_merged():
    bank = MemoryBank(BagOfWords())
    texts = {
        "Caroline": ["Caroline has a dog named Rex", "Caroline went hiking in May"],
        "Melanie": ["Melanie has a cat", "Melanie paints the lake at sunrise"],
    }
    for owner, ts in texts.items():
        bank.apply_many([MemoryOp(O.ADD, text=t, owner=owner) for t in ts])
    hits = bank.search("does Caroline have a dog", k=1, owner="Caroline")
    assert [h.entry.text for h in hits] == ["Caroline has a dog named Rex"]
    assert bank.embedder.calls[-1][1] == "query"
    hits = bank.search("who paints the lake", k=3)
    assert hits[0].entry.text == "Melanie paints the lake at sunrise" and len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    vec = bank.embedding(hits[0].entry.id)
    assert bank.search(vec, k=1)[0].entry.id == hits[0].entry.id
    assert bank.search("x", k=5, owner="Nobody") == []


def test_large_bank_switches_to_scann_and_stays_correct():
    rng = np.random.default_rng(0)
    bank = MemoryBank(dim=16, index_threshold=500)
    vecs = rng.standard_normal((800, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    bank.apply_many([MemoryOp(O.ADD, text=f"m{i}") for i in range(800)], embeddings=vecs)
    assert bank._indexes[""].kind == "scann"
    bank.apply(MemoryOp(O.DELETE, id="3"))
    bank.apply(MemoryOp(O.UPDATE, id="4", text="moved"), embedding=-vecs[4])
    assert bank.search(vecs[3], k=1)[0].entry.id != "3"
    assert bank.search(-vecs[4], k=1)[0].entry.id == "4"
    assert bank.search(vecs[10], k=1)[0].entry.id == "10"


def test_snapshot_restore_in_memory():
    bank = _bank()
    bank.apply(MemoryOp(O.ADD, text="Caroline has a dog"))
    snap = bank.snapshot()
    before = _state(bank)
    bank.apply(MemoryOp(O.UPDATE, id="0", text="Caroline has a cat"))
    bank.apply(MemoryOp(O.ADD, text="Caroline moved to Paris"))
    bank.apply(MemoryOp(O.DELETE, id="404"))
    bank.restore(snap)
    assert _state(bank) == before
    assert bank.get("0").history == []  # restored entries are copies, not shared
    assert bank.search("dog", k=1)[0].entry.text == "Caroline has a dog"


def test_save_load_round_trip_is_exact(tmp_path):
    bank = _bank()
    bank.apply(MemoryOp(O.ADD, text="Caroline has a dog", timestamp="7 May 2023"))
    bank.apply(MemoryOp(O.ADD, text="Mélanie — 油画", owner="Melanie"))
    bank.apply(MemoryOp(O.UPDATE, id="0", text="Caroline has two dogs"), Provenance("D2:1", "o"))
    bank.apply(MemoryOp(O.DELETE, id="7"))
    save_bank(bank, tmp_path / "bank")
    loaded = load_bank(tmp_path / "bank", BagOfWords(), default_owner="Caroline")
    assert _state(loaded) == _state(bank)
    loaded.apply(MemoryOp(O.ADD, text="next"))
    assert loaded.log[-1].id == "2"  # the id counter survived the round trip
    save_bank(loaded, tmp_path / "bank")  # a second save replaces the first
    assert _state(load_bank(tmp_path / "bank", BagOfWords())) == _state(loaded)
    assert sorted(p.name for p in (tmp_path / "bank").iterdir()) == ["LATEST", "snapshot-000002"]


def test_exception_during_save_leaves_previous_bank(tmp_path, monkeypatch):
    bank = _bank()
    bank.apply(MemoryOp(O.ADD, text="first"))
    save_bank(bank, tmp_path / "bank")
    saved = _state(bank)
    bank.apply(MemoryOp(O.ADD, text="second"))
    import memjax.memory.bank_io as bank_io

    def broken(records, path):
        path.write_text("half a reco")
        raise OSError("disk full")

    monkeypatch.setattr(bank_io, "write_log", broken)
    with pytest.raises(OSError, match="disk full"):
        save_bank(bank, tmp_path / "bank")
    assert _state(load_bank(tmp_path / "bank", BagOfWords())) == saved
    assert not list((tmp_path / "bank").glob(".tmp-*"))


@pytest.mark.parametrize("crash_at", ["vectors", "rename", "pointer"])
def test_process_killed_mid_save_leaves_previous_bank_loadable(tmp_path, crash_at):
    """A child process saves once, then dies (os._exit, no cleanup) inside its second save:
    after writing half of vectors.npy, just before publishing the snapshot directory, or just
    before switching LATEST. The parent must load the first save exactly."""
    script = textwrap.dedent(
        f"""
        import os, sys, numpy as np
        sys.path.insert(0, {str(REPO)!r})
        from memjax.memory import atomic, bank_io
        from memjax.memory.bank import MemoryBank
        from memjax.memory.ops import MemoryOp
        bank = MemoryBank(dim=4, clock=lambda: 5.0)
        bank.apply(MemoryOp("ADD", text="first"), embedding=np.ones(4))
        bank_io.save_bank(bank, {str(tmp_path / "bank")!r})
        bank.apply(MemoryOp("ADD", text="second"), embedding=np.arange(4))
        crash = {crash_at!r}
        if crash == "vectors":
            def die(path, array):
                open(path, "wb").write(b"\\x93NUMPY half")
                os._exit(1)
            bank_io.np.save = die
        elif crash == "rename":
            atomic.os.rename = lambda *a: os._exit(1)
        else:
            real = atomic.os.replace
            atomic.os.replace = lambda a, b: os._exit(1) if str(b).endswith("LATEST") else real(a, b)
        bank_io.save_bank(bank, {str(tmp_path / "bank")!r})
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    loaded = load_bank(tmp_path / "bank")
    assert [e.text for e in loaded.entries()] == ["first"] and loaded.step == 1
    np.testing.assert_array_equal(loaded.embedding("0"), np.ones(4, np.float32))
    loaded.apply(MemoryOp(O.ADD, text="again"), embedding=np.zeros(4))
    save_bank(loaded, tmp_path / "bank")  # the next save succeeds and clears the debris
    assert [e.text for e in load_bank(tmp_path / "bank").entries()] == ["first", "again"]
    assert not list((tmp_path / "bank").glob(".tmp-*"))
