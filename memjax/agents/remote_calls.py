"""The agents' model calls (`ModelCall` -> `ModelOutput`) answered by an OpenAI-compatible
endpoint, in the shape of `sampler_adapter.SamplerPolicy`:

    policy = remote_call_policy(openai_model, max_tokens=256)
    outputs = policy(calls, rng)          # rng unused: the endpoint draws (or is greedy)

A call's assistant prefix (MemSearcher's "<think>", Search-R1's growing turn) is sent as a last
assistant message to continue (`continue_final_message`, which memjax's server and vLLM take);
its stop strings are sent and kept in the text (`include_stop_str_in_output`), as memjax's
sampler keeps them for the agents' parsers. A completion that ended on the token limit is
`eos=False`, as the sampler reports it; no token ids come back.
"""

from __future__ import annotations

from collections.abc import Sequence

from memjax.agents.episode import ModelCall, ModelOutput
from memjax.remote.openai_source import OpenAIModel


def call_body(call: ModelCall, sampling: dict) -> dict:
    messages = [dict(m) for m in call.messages]
    body = {"messages": messages, **sampling}
    if call.assistant_prefix:
        messages.append({"role": "assistant", "content": call.assistant_prefix})
        body |= {"continue_final_message": True, "add_generation_prompt": False}
    if call.stop:
        body |= {"stop": list(call.stop), "include_stop_str_in_output": True}
    return body


def remote_call_policy(
    model: OpenAIModel, max_tokens: int, temperature: float = 0.0, top_p: float = 1.0
):
    sampling = {"temperature": temperature, "top_p": top_p, "max_tokens": int(max_tokens)}

    def policy(calls: Sequence[ModelCall], rng=None) -> list[ModelOutput]:
        replies = model.chat([call_body(c, sampling) for c in calls])
        return [ModelOutput(r["texts"][0], r["finish_reasons"][0] == "stop") for r in replies]

    return policy
