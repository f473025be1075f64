"""A step's rollouts in waves of `decode_batch` rows: the sampler never sees more at once."""

import jax

from memjax.rl import rollout
from tests.rl.test_trainer import ToolEnv, scripted_generate


def test_waves_bound_the_batch_and_keep_the_order_and_groups():
    generate, seen = scripted_generate(), []

    def counting(prompts, rng):
        seen.append(len(prompts))
        return generate(prompts, rng)

    examples = [4, 5, 6, 7, 8]
    trajs = rollout.run_in_waves(ToolEnv(), examples, 2, counting, jax.random.key(0), (), 4)
    assert max(seen) == 4 and len(trajs) == 10  # 2 examples x G=2 rows per wave
    assert [t.group for t in trajs] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert [t.contexts[0].tokens[1] for t in trajs] == [e for e in examples for _ in range(2)]
    # One wave, or none asked for, is run_episodes itself (same keys, same tokens).
    whole = rollout.run_episodes(ToolEnv(), examples, 2, generate, jax.random.key(0))
    for wave_rows in (0, 10, 64):
        same = rollout.run_in_waves(
            ToolEnv(), examples, 2, generate, jax.random.key(0), (), wave_rows
        )
        assert [t.contexts[-1].tokens for t in same] == [t.contexts[-1].tokens for t in whole]
