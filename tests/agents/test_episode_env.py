"""Text episodes as token-level RL environments, through the real rollout loop: MemSearcher
closes a context per turn (multi-context rows), Search-R1 appends `<information>` to one growing
row, and the rows are exactly the transcripts' token ids and loss masks (only the model's own
tokens are trainable; tool responses never are)."""

import jax
import pytest

from memjax.agents.episode_env import EpisodeEnv
from memjax.agents.memsearcher import MemSearcherEpisode, MemSearcherSettings
from memjax.agents.retrieval import ScriptedRetriever, passage
from memjax.agents.sampler_adapter import EOS, MAX_TOKENS, STOP_STRING
from memjax.agents.search_r1 import SearchR1Episode
from memjax.agents.transcript import chat_format, tokens_and_mask
from memjax.checkpoints.packaged import smollm2_gguf
from memjax.checkpoints.tokenizer import load_tokenizer
from memjax.rl.rollout import Completion, run_episodes
from tests.agents.scripted import boxed, feed, memory, tool_call

QUESTION = "Between Harvey Pekar and Denise Levertov who was born earlier?"
EXAMPLE = {"question": QUESTION, "golden_answers": ["Denise Levertov"]}
PASSAGES = [
    passage("0", "Denise Levertov", "Denise Levertov was a British-born American poet, born 1923."),
    passage("1", "Harvey Pekar", "Harvey Pekar was an American comic book writer, born 1939."),
]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(smollm2_gguf())


def scripted_generate(tokenizer, script):
    """Plays `script[t]` = (text, stop_reason) at model turn t to every prompt, as token ids
    (with the EOS id when the reason is EOS), recording the prompts it was given."""
    eos = chat_format(tokenizer).eos_id
    prompts_seen = []

    def generate(prompts, rng):
        del rng
        turn = len(prompts_seen)
        prompts_seen.append([list(p) for p in prompts])
        text, reason = script[turn]
        ids = tokenizer.encode(text) + ([eos] if reason == EOS else [])
        return [Completion(ids, [-0.5] * len(ids), reason) for _ in prompts]

    generate.prompts_seen = prompts_seen
    return generate


def memsearcher_env(tokenizer, retriever, max_turns=5, max_context_tokens=None):
    count = lambda s: len(tokenizer.encode(s))
    settings = MemSearcherSettings(max_turns=max_turns)
    return EpisodeEnv(
        lambda ex: MemSearcherEpisode(ex["question"], count, settings),
        tokenizer,
        retriever,
        max_calls=2 * max_turns + 1,
        max_context_tokens=max_context_tokens,
    )


def trained_text(context, tokenizer):
    return tokenizer.decode(
        [t for t, m in zip(context.tokens, context.trainable) if m], skip_special_tokens=False
    )


def test_memsearcher_contexts_are_rows_with_only_model_tokens_trainable(tokenizer):
    retriever = ScriptedRetriever(default=PASSAGES)
    script = [
        (tool_call("Denise Levertov born", top_n=2), EOS),
        (memory("Levertov born 1923."), EOS),
        (tool_call("Harvey Pekar born", top_n=2), EOS),
        (memory("Levertov born 1923. Pekar born 1939."), EOS),
        (boxed("Denise Levertov"), EOS),
    ]
    env = memsearcher_env(tokenizer, retriever)
    generate = scripted_generate(tokenizer, script)
    fmt = chat_format(tokenizer)
    (traj,) = run_episodes(env, [EXAMPLE], 1, generate, jax.random.key(0), (fmt.eos_id,))

    assert traj.reward == 1.0 and traj.turns == 5
    assert traj.info["searches"] == 2 and traj.info["stop/answer"] == 1
    assert traj.info["episode_contexts"] == 3
    assert len(traj.contexts) == 3  # two search turns, then the answer turn
    assert retriever.calls == [(["Denise Levertov born"], 2), (["Harvey Pekar born"], 2)]
    first, second, last = traj.contexts
    # Trainable: exactly the two completions (with their EOS); the tool response is context.
    eos = fmt.eos_text
    assert trained_text(first, tokenizer) == script[0][0] + eos + script[1][0] + eos
    assert "Harvey Pekar was an American" in tokenizer.decode(first.tokens)
    assert "Harvey Pekar was an American" not in trained_text(first, tokenizer)
    # The next context is rebuilt from question + memory: the memory is in its prompt.
    assert "<memory> Levertov born 1923. </memory>" in tokenizer.decode(second.tokens)
    assert trained_text(last, tokenizer) == script[4][0] + eos

    # The rows equal the transcript rendering of the episode's own context records (the
    # trainer and the text-level accounting see the same tokens and masks).
    episode = MemSearcherEpisode(QUESTION, lambda s: len(tokenizer.encode(s)))
    feed(episode, [text for text, _ in script], retriever)
    for row, record in zip(traj.contexts, episode.contexts):
        ids, mask = tokens_and_mask(record, fmt)
        assert row.tokens == ids
        assert [int(m) for m in row.trainable] == mask
    # The log-probs the sampler gave are kept on model tokens, 0 elsewhere.
    assert all((lp == -0.5) == m for lp, m in zip(first.logprobs, first.trainable))


def test_no_eos_ends_memsearcher_with_zero_reward(tokenizer):
    env = memsearcher_env(tokenizer, ScriptedRetriever(default=PASSAGES))
    generate = scripted_generate(tokenizer, [(boxed("Denise Levertov"), MAX_TOKENS)])
    (traj,) = run_episodes(env, [EXAMPLE], 1, generate, jax.random.key(0), (2,))
    assert traj.reward == 0.0 and traj.info["stop/no_eos"] == 1 and len(traj.contexts) == 1


def test_context_over_budget_ends_episode(tokenizer):
    env = memsearcher_env(tokenizer, ScriptedRetriever(default=PASSAGES), max_context_tokens=500)
    script = [(tool_call("Denise Levertov", top_n=2), EOS)]
    (traj,) = run_episodes(
        env, [EXAMPLE], 1, scripted_generate(tokenizer, script), jax.random.key(0), (2,)
    )
    assert traj.info["context_overflow"] == 1 and traj.reward == 0.0


def test_search_r1_grows_one_context_with_information_masked(tokenizer):
    retriever = ScriptedRetriever(default=PASSAGES)
    env = EpisodeEnv(lambda ex: SearchR1Episode(ex["question"]), tokenizer, retriever, max_calls=5)
    script = [
        ("<think>Look up both.</think>\n<search> Denise Levertov </search>", STOP_STRING),
        ("<think>1923 vs 1939.</think>\n<answer> Denise Levertov </answer>", STOP_STRING),
    ]
    (traj,) = run_episodes(
        env, [EXAMPLE], 1, scripted_generate(tokenizer, script), jax.random.key(0), (2,)
    )
    assert traj.reward == 1.0 and len(traj.contexts) == 1 and traj.turns == 2
    (row,) = traj.contexts
    assert trained_text(row, tokenizer) == script[0][0] + script[1][0]
    text = tokenizer.decode(row.tokens, skip_special_tokens=False)
    assert '<information>Doc 1(Title: "Denise Levertov")' in text
    assert text.index("</search>") < text.index("<information>") < text.index("<answer> Denise")
