"""Rows as the SFT trainer renders them (trained tokens counted apart), and a model teacher
sampled through memjax's sampler whose trajectories go through the same rejection step."""

import pytest

from memjax.agents.sampler_adapter import SamplerPolicy
from memjax.agents.transcript import ChatFormat, chat_format
from memjax.experiments.teachers import memory_roles as MR
from memjax.experiments.teachers import search_roles as SR
from memjax.experiments.teachers.model_teacher import BatchTeacher, ChatTeacher
from memjax.experiments.teachers.token_stats import row_segments, row_tokens, token_counts
from memjax.experiments.teachers.trajectory import Trajectory, message
from memjax.experiments.teachers.verdict import RejectionTally, keep_full_reward
from memjax.sampling.sampling_params import SamplingParams
from tests.agents.conftest import tiny_decoder
from tests.agents.memory_r1.helpers import ByteTokenizer
from tests.experiments.teachers.fixtures import memory_world, search_world


@pytest.mark.heavy
def test_a_growing_turn_is_one_assistant_turn_with_its_passages_untrained(smollm2_tokenizer):
    fmt = chat_format(smollm2_tokenizer)
    context = [
        message("user", "Question: who?"),
        message("assistant", "<search> Ana </search>"),
        message("assistant", "\n<information>Ana is a writer.</information>\n", train=False),
        message("assistant", "<answer> Ana </answer>"),
    ]
    segments = row_segments(context, fmt)
    merged = [context[0], message("assistant", "".join(m["content"] for m in context[1:]))]
    rendered = smollm2_tokenizer.chat_text(merged, add_generation_prompt=False)
    assert rendered.startswith("".join(text for text, _ in segments))  # the template's own row
    assert [loss for _, loss in segments] == [False, True, False, True, True]
    total, trained = row_tokens(context, fmt)
    encode = smollm2_tokenizer.encode
    assert (
        trained == len(encode("<search> Ana </search>")) + len(encode("<answer> Ana </answer>")) + 1
    )
    assert total == trained + len(encode(segments[0][0])) + len(encode(segments[2][0]))


def _byte_format():
    """A chat format over bytes: "<role>content\n" per message, "\n" ends a turn."""
    tok = ByteTokenizer()
    return ChatFormat(render=tok.chat_text, encode=tok.encode, eos_text="\n", eos_id=2)


def test_token_counts_per_role():
    row = [message("system", "s"), message("user", "u"), message("assistant", "ab"),
           message("user", "tool"), message("assistant", "memory")]  # fmt: skip
    t = Trajectory("x", "memsearcher", "train", {}, [row, row[:3]])
    stats = token_counts([t], _byte_format())["memsearcher"]
    assert stats["trajectories"] == 1 and stats["rows"] == 2
    # Trained: "ab" + EOS and "memory" + EOS in the first row, "ab" + EOS in the second.
    assert stats["trained_tokens"] == (2 + 1) + (6 + 1) + (2 + 1)
    # All: "<system>s\n<user>u\n<assistant>" = 29 bytes, then ab, EOS, "<user>tool\n<assistant>"
    # (22 bytes), memory, EOS; the second row stops after its first turn.
    assert stats["tokens"] == (29 + 3 + 22 + 7) + (29 + 3)
    assert stats["max_row_tokens"] == 61


def test_an_untrained_assistant_message_carries_no_loss():
    context = [message("user", "q"), message("assistant", "a"),
               message("assistant", "INFO", train=False), message("assistant", "b")]  # fmt: skip
    segments = row_segments(context, _byte_format())
    assert segments == [("<user>q\n<assistant>", False), ("a", True), ("INFO", False),
                        ("b", True), ("\n", True)]  # fmt: skip


def _random_sampler(tokenizer, max_new_tokens=12):
    params, cfg = tiny_decoder(tokenizer.vocab_size)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens)
    return SamplerPolicy(params, cfg, tokenizer, sampling)


@pytest.mark.heavy
def test_a_model_teachers_trajectories_are_replayed_and_their_rejections_counted(
    smollm2_tokenizer, tmp_path
):
    """A random 2-layer model writes nothing the agents accept: every trajectory is rejected,
    each under a reason, and nothing raises."""
    sampler = _random_sampler(smollm2_tokenizer)
    world, examples = search_world(tmp_path)
    trajectories = SR.search_trajectories(
        world, "memsearcher", examples[:2], "train", BatchTeacher(sampler, batch_size=2)
    )
    tally = RejectionTally()
    kept = keep_full_reward(trajectories, lambda t: SR.replay_memsearcher(world, t), tally)
    summary = tally.as_dict()["memsearcher"]
    assert not kept and summary["offered"] == 2
    assert sum(summary["reject_reasons"].values()) == 2

    memory, source, convs = memory_world(conversations=1)
    facts = MR.fact_trajectories(memory, source, convs, "train", ChatTeacher(sampler, 8))
    kept = keep_full_reward(facts, lambda t: MR.replay_facts(memory, t), tally)
    assert tally.as_dict()["facts"]["offered"] == len(facts) > 0
    assert "facts_json_no_json" in tally.as_dict()["facts"]["reject_reasons"]
