"""The `wikipedia_search` tool shared by MemSearcher and the ReAct baseline: its JSON schema,
the Qwen-style tool section of a system prompt, and how a call becomes a search and a response.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from memjax.agents.retrieval import Passage
from memjax.agents.tool_format import ParsedToolCall
from memjax.bounded_input import ascii_int

TOOL_NAME = "wikipedia_search"

# As MemSearcher's system prompt gives it: `query` (string) and `top_n` (integer, "default value
# is 5"). The retrieval server's own default applies when top_n is omitted; see SearchSettings.
WIKIPEDIA_SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Search Wikipedia and return the passages most relevant to the query.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The search query."},
                "top_n": {
                    "type": "integer",
                    "description": "How many passages to return. The default value is 5.",
                },
            },
            "required": ["query"],
        },
    },
}

# The tool protocol Qwen2.5-Instruct models are trained on (their chat template's tool section).
TOOLS_SECTION = (
    "# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n" + json.dumps(WIKIPEDIA_SEARCH_TOOL) + "\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call>"
)


@dataclass(frozen=True)
class SearchSettings:
    # MemSearcher forwards the model's arguments unchanged to a server whose default top_n is
    # 10 (not the 5 the schema promises); we keep that behaviour as the default.
    default_top_n: int = 10
    # Not in the paper's code: a cap so one pathological top_n cannot flood the context.
    max_top_n: int = 10
    # MemSearcher's server joins passages with a literal backslash-n pair, not newlines; the
    # released models were trained on that, so it is the default.
    passage_separator: str = "\\n\\n"


@dataclass(frozen=True)
class SearchPlan:
    query: str | None  # None when the call cannot be run
    k: int
    error: str | None


def plan_search(parsed: ParsedToolCall, settings: SearchSettings) -> SearchPlan:
    """What to search for a parsed tool call, or the error the tool response should report."""
    if parsed.call is None:
        return SearchPlan(None, 0, parsed.error)
    if parsed.call.name != TOOL_NAME:
        return SearchPlan(None, 0, f"unknown function {parsed.call.name!r}")
    query = parsed.call.arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        return SearchPlan(None, 0, 'argument "query" must be a non-empty string')
    # "5" is accepted as 5, as MemSearcher's server (pydantic) does; "²", 2.5, true, 0 or an
    # integer of more than 18 digits fall back to the default.
    top_n = ascii_int(parsed.call.arguments.get("top_n", settings.default_top_n))
    if top_n is None or top_n < 1:
        top_n = settings.default_top_n
    return SearchPlan(query.strip(), min(top_n, settings.max_top_n), None)


def format_results(passages: list[Passage], settings: SearchSettings) -> str:
    return settings.passage_separator.join(p["contents"] for p in passages)


def tool_response_body(parsed: ParsedToolCall, result: str) -> str:
    """`<tool_response>{call}\\n{result}\\n</tool_response>`: the call echoed, then its result."""
    return f"<tool_response>{parsed.raw}\n{result}\n</tool_response>"


def error_result(error: str) -> str:
    return f"Error: {error}. No search was run."
