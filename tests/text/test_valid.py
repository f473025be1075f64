"""memjax.text.valid_text: the one boundary that makes model and request strings valid text."""

import json

import pytest
from tokenizers import Tokenizer

from memjax.checkpoints import packaged
from memjax.text.valid import REPLACEMENT, valid_text, valid_texts

LONE = json.loads('"fact \\ud83d"')  # half of an escaped emoji, as a model's JSON carries it


def test_invalid_code_points_become_replacement_characters():
    assert valid_text(LONE) == "fact " + REPLACEMENT
    assert valid_text("a\udc00b\ud800") == f"a{REPLACEMENT}b{REPLACEMENT}"
    assert valid_text("x\x00y") == "xy"
    assert valid_text("é\ufffe\U0010ffff") == "é" + REPLACEMENT * 2
    assert valid_text(b"caf\xc3\xa9 \xff") == "café " + REPLACEMENT


def test_a_surrogate_pair_written_as_two_code_points_is_joined():
    assert valid_text("\ud83d\ude00 ok") == "\U0001f600 ok"


def test_valid_text_is_returned_as_it_is():
    for text in ("plain", "tabs\tand\nnewlines", "Röntgen 😀", ""):
        assert valid_text(text) is text
    assert valid_texts(["a", LONE]) == ["a", "fact " + REPLACEMENT]
    with pytest.raises(TypeError, match="expected text, got NoneType"):
        valid_text(None)


def test_the_real_minilm_tokenizer_takes_what_valid_text_returns():
    tokenizer = Tokenizer.from_file(f"{packaged.resolve(packaged.MINILM)}/tokenizer.json")
    with pytest.raises(TypeError):
        tokenizer.encode_batch([LONE])  # the failure the boundary exists for
    assert tokenizer.encode_batch([valid_text(LONE)])[0].ids
