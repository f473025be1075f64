"""Rows and tokens of trajectories as the SFT trainer sees them: each context rendered through
the tokenizer's chat template, consecutive assistant messages as one turn closed by the
template's end-of-turn token, and the trained tokens (assistant text whose `train` is not
false, plus the end-of-turn token of a trained turn) counted apart from the rest."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from memjax.agents.transcript import TemplateMismatchError
from memjax.experiments.teachers.trajectory import Trajectory, trained


def _turn_runs(context: Sequence[dict]) -> list[tuple[int, int]]:
    """[start, end) of each run of consecutive assistant messages."""
    runs, i = [], 0
    while i < len(context):
        if context[i]["role"] == "assistant":
            j = i
            while j < len(context) and context[j]["role"] == "assistant":
                j += 1
            runs.append((i, j))
            i = j
        else:
            i += 1
    return runs


def _merged(context: Sequence[dict]) -> list[dict]:
    out: list[dict] = []
    for m in context:
        if out and m["role"] == "assistant" == out[-1]["role"]:
            out[-1] = {"role": "assistant", "content": out[-1]["content"] + m["content"]}
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def row_segments(context: Sequence[dict], fmt) -> list[tuple[str, bool]]:
    """(text, carries loss) pieces of one rendered row, up to the last assistant turn."""
    segments: list[tuple[str, bool]] = []
    so_far = ""
    for start, end in _turn_runs(context):
        prompt = fmt.render(_merged(context[:start]))
        if not prompt.startswith(so_far):
            raise TemplateMismatchError("a turn's prompt does not extend the row so far")
        segments.append((prompt[len(so_far) :], False))
        for m in context[start:end]:
            segments.append((m["content"], trained(m)))
        segments.append((fmt.eos_text, trained(context[end - 1])))
        so_far = prompt + "".join(m["content"] for m in context[start:end]) + fmt.eos_text
    return segments


def row_tokens(context: Sequence[dict], fmt) -> tuple[int, int]:
    """(all tokens, trained tokens) of one row."""
    total = trained_tokens = 0
    for text, loss in row_segments(context, fmt):
        n = 1 if text == fmt.eos_text else len(fmt.encode(text))
        total += n
        trained_tokens += n if loss else 0
    return total, trained_tokens


def token_counts(trajectories: Iterable[Trajectory], fmt) -> dict[str, dict[str, int]]:
    """role -> trajectories, rows, tokens, trained tokens and the longest row, under a
    ChatFormat (`memjax.agents.transcript.chat_format(tokenizer)`)."""
    stats: dict[str, Counter] = {}
    for t in trajectories:
        s = stats.setdefault(t.role, Counter())
        s["trajectories"] += 1
        for context in t.contexts:
            total, loss = row_tokens(context, fmt)
            s["rows"] += 1
            s["tokens"] += total
            s["trained_tokens"] += loss
            s["max_row_tokens"] = max(s["max_row_tokens"], total)
    return {role: dict(s) for role, s in stats.items()}
