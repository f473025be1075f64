"""Scripted policies and helpers shared by the agent tests."""

import json

from memjax.agents.episode import ModelOutput


def tool_call(query, top_n=None, thought="I should search."):
    arguments = {"query": query} if top_n is None else {"query": query, "top_n": top_n}
    call = json.dumps({"name": "wikipedia_search", "arguments": arguments})
    return f"{thought}</think>\n<tool_call>\n{call}\n</tool_call>"


def boxed(answer, thought="The memory has the answer."):
    return f"{thought}</think>\nThe answer is \\boxed{{{answer}}}."


def memory(text):
    return f"<memory>{text}</memory>"


def feed(episode, outputs, retriever):
    """Plays `outputs` (text, or (text, eos)) into one episode, answering its searches."""
    for item in outputs:
        text, eos = item if isinstance(item, tuple) else (item, True)
        assert not episode.done, f"episode ended before output {text!r}"
        episode.current_call()
        request = episode.observe(ModelOutput(text, eos))
        while request is not None:
            request = episode.receive(retriever.search([request.query], request.k)[0])
    assert episode.done
    return episode


def word_count(text):
    return len(text.split())
