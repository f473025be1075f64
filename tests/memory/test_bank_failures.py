"""Model output is data for the memory bank: a lone surrogate in a fact, a manager ADD or a
search query is stored and searched as valid text (counted), through the real MiniLM tokenizer;
an op that raises leaves the bank exactly as it was, and the bank still saves and loads."""

import json

import numpy as np
import pytest
from tokenizers import Tokenizer

from memjax.agents.memory_r1.construction import build_banks, conversation_stream
from memjax.checkpoints import packaged
from memjax.experiments.synthetic import SyntheticConfig, generate_conversations
from memjax.memory.bank import MemoryBank
from memjax.memory.bank_io import load_bank, save_bank
from memjax.memory.ops import ADD, UPDATE, MemoryOp
from tests.agents.memory_r1 import helpers

HALF_EMOJI = json.loads('"\\ud83d"')


class MiniLMTokenized(helpers.BagOfWords):
    """Bag-of-words vectors after the real MiniLM tokenizer has taken the texts, so a text it
    refuses raises here exactly as memjax.memory.embedder would."""

    def __init__(self):
        path = packaged.resolve(packaged.MINILM)
        self.tokenizer = Tokenizer.from_file(f"{path}/tokenizer.json")
        self.calls = 0

    def encode(self, texts, kind="passage"):
        self.tokenizer.encode_batch(list(texts))  # TypeError on a lone surrogate
        self.calls += 1
        return super().encode(texts, kind)


class Broken(helpers.BagOfWords):
    def encode(self, texts, kind="passage"):
        raise RuntimeError("encoder failed")


def test_lone_surrogate_facts_and_adds_leave_the_bank_build_running():
    conversation = generate_conversations(SyntheticConfig(num_conversations=1, seed=3))[0]

    def facts(batch):  # every fact ends with half an emoji, escaped as a model writes JSON
        return [
            json.dumps({"facts": [f + " \ud83d" for f in json.loads(out)["facts"]]})
            for out in helpers.fact_policy(batch)
        ]

    def manager(batch):  # and every ADD carries a NUL and another half emoji
        return [
            out.replace('"event": "ADD"', '"event": "ADD", "x": "\\u0000"').replace(
                '"new", "text": "', '"new", "text": "\\udc00 '
            )
            for out in helpers.add_all_manager(batch)
        ]

    result = build_banks([conversation_stream(conversation)], facts, manager, MiniLMTokenized())
    (bank,) = result.banks
    assert len(bank) > 0 and bank.repaired_texts > 0
    assert all("\ufffd" in e.text for e in bank.entries())
    assert all(r.accepted for r in bank.log if r.op.kind == ADD)
    hits = bank.search("adopted \ud83d", k=3)  # a query with a lone surrogate is searched
    assert len(hits) == 3


def test_a_failed_op_leaves_the_bank_exactly_as_it_was_and_it_saves_and_loads(tmp_path):
    bank = MemoryBank(helpers.BagOfWords())
    first = bank.apply(MemoryOp(ADD, text="Caroline has a dog", owner="Caroline"))
    before = bank.snapshot()
    bank.embedder = Broken()
    for op in (
        MemoryOp(ADD, text="Melanie paints", owner="Melanie"),
        MemoryOp(UPDATE, id=first.id, text="Caroline has two dogs"),
    ):
        with pytest.raises(RuntimeError, match="encoder failed"):
            bank.apply(op)
    with pytest.raises(RuntimeError, match="encoder failed"):
        bank.apply_many([MemoryOp("DELETE", id=first.id), MemoryOp(ADD, text="new fact")])
    with pytest.raises(ValueError, match="finite"):
        bank.apply(MemoryOp(ADD, text="x"), embedding=np.full(bank.dim, np.nan))
    after = bank.snapshot()
    assert (after.step, after.log, after.entries, after.next_id) == (
        before.step,
        before.log,
        before.entries,
        before.next_id,
    )
    assert first.id in bank and bank.get(first.id).text == "Caroline has a dog"
    save_bank(bank, tmp_path / "bank")
    loaded = load_bank(tmp_path / "bank", helpers.BagOfWords())
    assert loaded.step == 1 and len(loaded.log) == 1 and len(loaded) == 1
