"""Tokenizers with chat templates, from an HF directory or from a GGUF file's metadata.

A thin wrapper over `transformers`' fast tokenizers (which need no torch) that gives the rest of
memjax plain lists of ints and the ids that end a generation.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from memjax.model_errors import WeightsNotFoundError
from memjax.text.valid import valid_text

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # memjax never downloads at run time
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


class Tokenizer:
    def __init__(self, hf_tokenizer, source: str):
        self.hf = hf_tokenizer
        self.source = source
        eos = set()
        if self.hf.eos_token_id is not None:
            eos.add(int(self.hf.eos_token_id))
        # Chat models end a turn with a special token that is often not the configured EOS
        # (<|im_end|> for SmolLM2/Qwen, <|eot_id|> for Llama 3).
        for token in ("<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>"):
            tid = self.hf.convert_tokens_to_ids(token)
            if isinstance(tid, int) and tid != self.hf.unk_token_id and tid is not None:
                eos.add(tid)
        self.eos_ids: tuple[int, ...] = tuple(sorted(eos))
        pad = self.hf.pad_token_id
        self.pad_id: int = int(pad if pad is not None else self.eos_ids[0])

    @property
    def vocab_size(self) -> int:
        return len(self.hf)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        # Model output can carry lone surrogates or NUL; the Rust tokenizer raises on them.
        return list(self.hf.encode(valid_text(text), add_special_tokens=add_special_tokens))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def chat(
        self, messages: Sequence[dict], add_generation_prompt: bool = True, **kwargs
    ) -> list[int]:
        """Token ids of `messages` rendered with the model's chat template."""
        text = self.chat_text(messages, add_generation_prompt, **kwargs)
        return self.encode(text)

    def chat_text(
        self, messages: Sequence[dict], add_generation_prompt: bool = True, **kwargs
    ) -> str:
        if not getattr(self.hf, "chat_template", None):
            raise ValueError(f"tokenizer from {self.source} has no chat template")
        return self.hf.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
        )


def load_tokenizer(source: str | Path) -> Tokenizer:
    """From an HF directory (tokenizer.json / tokenizer_config.json) or a .gguf file."""
    from transformers import AutoTokenizer

    path = Path(source)
    if not path.exists():
        raise WeightsNotFoundError(f"tokenizer source {path} does not exist")
    if path.suffix == ".gguf":
        hf = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    elif (path / "tokenizer.json").is_file() or (path / "tokenizer_config.json").is_file():
        hf = AutoTokenizer.from_pretrained(str(path))
    else:
        raise WeightsNotFoundError(f"no tokenizer.json or tokenizer_config.json in {path}")
    return Tokenizer(hf, str(path))
