"""The Memory-R1 roles' ChatPolicy on the engine answers as the lock-step one does (greedy)."""

from pathlib import Path

from memjax.agents.memory_r1.models import sampler_policy
from memjax.checkpoints import LoadedModel
from tests.agents.conftest import tiny_decoder
from tests.sampling.tiny import tiny_model

CHATS = [
    [{"role": "user", "content": "Who did Melanie meet on Friday?"}],
    [
        {"role": "system", "content": "Answer from the memories."},
        {
            "role": "user",
            "content": "Memories: Caroline moved to Ohio in 2022. Where does she live?",
        },
    ],
    [{"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "Summarise: " + "the picnic was on a sunny day. " * 12}],
    [{"role": "user", "content": "When is the concert?"}],
]


def test_engine_policy_answers_as_the_lock_step_policy(smollm2_tokenizer):
    _, cfg = tiny_decoder(smollm2_tokenizer.vocab_size)
    params, cfg = tiny_model(seed=3, cfg=cfg)  # peaked logits: answers differ by prompt
    model = LoadedModel(params, cfg, smollm2_tokenizer, Path("tiny"))
    sampling = {"greedy": True, "temperature": 1.0, "max_new_tokens": 10}
    lock = sampler_policy(model, sampling, batch_size=2, max_prompt_tokens=64)
    engine = sampler_policy(model, sampling, max_prompt_tokens=64, engine_slots=2)
    expected = lock(CHATS)
    assert engine(CHATS) == expected
    assert engine(CHATS[::-1]) == expected[::-1]  # the engine is reused across calls
    assert len(set(expected)) > 1  # different prompts, different answers: the check has teeth
