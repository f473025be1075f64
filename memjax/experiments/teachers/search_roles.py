"""MemSearcher and Search-R1 trajectories on HotpotQA: written by a teacher, replayed for the
verdict.

Episodes are memjax's own (`MemSearcherEpisode`, `SearchR1Episode`) over the real retriever.
A teacher is the scripted oracle (one per question, fed the passages its searches returned) or
any batched policy over `ModelCall`s (memjax's sampler through `SamplerPolicy`). Trajectory
layout:
  memsearcher  one context per turn, as the agent rebuilt it from (question, memory): system,
               user, the action (with its "<think>" start), and after a search the tool
               response and the memory update;
  search_r1    one context: the prompt, then the single growing assistant turn as consecutive
               assistant messages, the retrieved `<information>` ones marked `"train": false`.
The replay drives a fresh episode with the trajectory's assistant texts, checks every prompt
(and every retrieved passage) against what the episode shows, and scores the finished episode
with the agent's own reward: full reward is F1 = 1 (MemSearcher) or EM = 1 (Search-R1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax

from memjax.agents.episode import ContextRecord, Episode, ModelCall, ModelOutput
from memjax.agents.memsearcher.episode import MemSearcherEpisode
from memjax.agents.search_r1 import SearchR1Episode
from memjax.data.hotpotqa import HotpotExample
from memjax.experiments.teachers.memory_oracles import messages_key
from memjax.experiments.teachers.search_oracles import MemSearcherOracle, SearchR1Oracle
from memjax.experiments.teachers.search_world import SearchWorld
from memjax.experiments.teachers.trajectory import Trajectory, message, trained
from memjax.experiments.teachers.verdict import Verdict, verdict_from_reward

AGENTS = ("memsearcher", "search_r1")
BatchPolicy = Callable[[Sequence[ModelCall], jax.Array], list[ModelOutput]]
_ORACLES = {"memsearcher": MemSearcherOracle, "search_r1": SearchR1Oracle}


def new_episode(world: SearchWorld, agent: str, example: HotpotExample) -> Episode:
    question = world.question(example)
    if agent == "memsearcher":
        return MemSearcherEpisode(question, world.count_tokens, world.memsearcher)
    if agent == "search_r1":
        return SearchR1Episode(question, world.search_r1)
    raise ValueError(f"no search agent {agent!r}; valid: {AGENTS}")


def run_oracles(world: SearchWorld, episodes: Sequence[Episode], oracles, max_rounds=100):
    """Drives episodes with their oracles; one batched search per round and top-k."""
    for _ in range(max_rounds):
        live = [(e, o) for e, o in zip(episodes, oracles) if not e.done]
        if not live:
            return
        pending: dict[int, list] = {}
        for episode, oracle in live:
            request = episode.observe(oracle(episode.current_call()))
            if request is not None:
                pending.setdefault(request.k, []).append((episode, oracle, request.query))
        for k, items in pending.items():
            results = world.search([q for _, _, q in items], k)
            for (episode, oracle, _), passages in zip(items, results):
                oracle.saw(passages)
                episode.receive(passages)
    raise RuntimeError(f"episodes still running after {max_rounds} rounds")


def _memsearcher_contexts(records: Sequence[ContextRecord]) -> list[list[dict]]:
    return [[message(m["role"], m["content"]) for m in r.final_messages()] for r in records]


def _search_r1_context(record: ContextRecord) -> list[dict]:
    context = [message(m["role"], m["content"]) for m in record.calls[0].messages]
    for n, output in enumerate(record.outputs):
        context.append(message("assistant", output.text))
        if n + 1 < len(record.calls):
            written = record.calls[n].assistant_prefix + output.text
            env = record.calls[n + 1].assistant_prefix[len(written) :]
            if env:
                context.append(message("assistant", env, train=False))
    return context


def search_trajectories(
    world: SearchWorld,
    agent: str,
    examples: Sequence[HotpotExample],
    split: str,
    teacher: BatchPolicy | None = None,
    rng: jax.Array | None = None,
) -> list[Trajectory]:
    """One trajectory per question (the scripted oracle when `teacher` is None)."""
    episodes = [new_episode(world, agent, e) for e in examples]
    if teacher is None:
        run_oracles(world, episodes, [_ORACLES[agent](e) for e in examples])
    else:
        from memjax.agents.memsearcher.eval_job import drive

        drive(episodes, teacher, world, rng if rng is not None else jax.random.key(0))
    out = []
    for example, episode in zip(examples, episodes):
        result = episode.result(world.golden(example))
        if agent == "memsearcher":
            contexts = _memsearcher_contexts(result.contexts)
        else:
            contexts = [_search_r1_context(result.contexts[0])]
        source = {"data": "hotpotqa", "path": world.data_path, "question_id": example.id,
                  **world.settings_dict(agent)}  # fmt: skip
        out.append(Trajectory(f"{agent}/hotpotqa/{example.id}", agent, split, source, contexts))
    return out


# ------------------------------------------------------------------------------ replay


def _expected(world: SearchWorld, t: Trajectory):
    if t.source.get("data") != "hotpotqa" or t.source.get("path") != world.data_path:
        return None, "other_data"
    if {k: t.source.get(k) for k in world.settings_dict(t.role)} != world.settings_dict(t.role):
        return None, "settings_mismatch"
    try:
        return world.example(str(t.source.get("question_id"))), ""
    except KeyError:
        return None, "unknown_question"


def _search(world: SearchWorld, episode: Episode, output: ModelOutput) -> None:
    request = episode.observe(output)
    if request is not None:
        episode.receive(world.search([request.query], request.k)[0])


def _finish(world: SearchWorld, episode: Episode, example: HotpotExample) -> Verdict:
    result = episode.result(world.golden(example))
    if result.stop_reason != "answer":
        return Verdict(result.reward, f"stopped_{result.stop_reason}")
    if not result.format_valid:
        return Verdict(result.reward, "format_invalid")
    return verdict_from_reward(result.reward, "answer_not_exact")


def replay_memsearcher(world: SearchWorld, t: Trajectory, max_calls: int = 200) -> Verdict:
    example, why = _expected(world, t)
    if example is None:
        return Verdict(0.0, why)
    episode = new_episode(world, "memsearcher", example)
    for _ in range(max_calls):
        if episode.done:
            break
        c, a = len(episode.contexts) - 1, len(episode.contexts[-1].outputs)
        context = t.contexts[c] if c < len(t.contexts) else []
        replies = [i for i, m in enumerate(context) if m["role"] == "assistant"]
        if a >= len(replies):
            return Verdict(0.0, "trajectory_too_short")
        call = episode.current_call()
        if messages_key(context[: replies[a]]) != messages_key(call.messages):
            return Verdict(0.0, "prompt_mismatch")
        text = context[replies[a]]["content"]
        if not text.startswith(call.assistant_prefix):
            return Verdict(0.0, "assistant_prefix_missing")
        completion = text[len(call.assistant_prefix) :]
        if world.over_budget(completion):
            return Verdict(0.0, "call_over_budget")
        _search(world, episode, ModelOutput(completion, True))
    used = [len(r.outputs) for r in episode.contexts]
    written = [sum(m["role"] == "assistant" for m in c) for c in t.contexts]
    if used != written:
        return Verdict(0.0, "trajectory_too_long")
    return _finish(world, episode, example)


def replay_search_r1(world: SearchWorld, t: Trajectory) -> Verdict:
    example, why = _expected(world, t)
    if example is None:
        return Verdict(0.0, why)
    if len(t.contexts) != 1:
        return Verdict(0.0, "bad_shape")
    context = t.contexts[0]
    head = [m for m in context if m["role"] != "assistant"]
    turn = context[len(head) :]
    if not head or any(m["role"] != "assistant" for m in turn):
        return Verdict(0.0, "bad_shape")  # one prompt, then one growing assistant turn
    pieces = [i for i, m in enumerate(turn) if trained(m)]
    episode = new_episode(world, "search_r1", example)
    for i in pieces:
        if episode.done:
            return Verdict(0.0, "trajectory_too_long")
        call = episode.current_call()
        prefix = "".join(m["content"] for m in turn[:i])
        if messages_key(head) != messages_key(call.messages) or prefix != call.assistant_prefix:
            return Verdict(0.0, "prompt_mismatch")
        if world.over_budget(turn[i]["content"]):
            return Verdict(0.0, "call_over_budget")
        _search(world, episode, ModelOutput(turn[i]["content"], True))
    if not episode.done:
        return Verdict(0.0, "trajectory_too_short")
    if pieces and pieces[-1] != len(turn) - 1:
        return Verdict(0.0, "trajectory_too_long")  # environment text after the last reply
    return _finish(world, episode, example)
