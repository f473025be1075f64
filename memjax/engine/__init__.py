"""Continuous batching over a slot-based KV cache: requests in, completions out.

from memjax.engine import Engine, Request
engine = Engine(params, cfg, eos_ids=tok.eos_ids, tokenizer=tok, slots=8)
completions = engine.run([Request(prompt_ids, SamplingParams(max_new_tokens=64))])
"""

from memjax.engine.engine import Engine
from memjax.engine.requests import Completion, Request, RequestError

__all__ = ["Engine", "Request", "Completion", "RequestError"]
