"""Toy GRPO: a tiny random decoder learns to repeat the target token of its prompt (CPU, <3 min).

python -m memjax.launch --config=configs/toy_grpo.py --workdir=/tmp/toy_grpo

With LoRA (rank-8 adapters over a frozen base sharp enough to express the answer):
python -m memjax.launch --config=configs/toy_grpo.py --workdir=/tmp/toy_lora \
    --config.lora.rank=8 --config.model.init_stddev=0.1
"""

from ml_collections import ConfigDict
from ml_collections.config_dict import placeholder


def get_config() -> ConfigDict:
    c = ConfigDict()
    c.job = "rl.train"
    c.algo = "grpo"
    c.seed = 0
    c.model = ConfigDict(
        dict(
            # "": a random decoder of the shape below; a checkpoint (HF directory, .gguf,
            # packaged:smollm2, a training workdir) starts from its weights and shape instead.
            source="",
            vocab_size=16,
            embed_dim=64,
            mlp_dim=128,
            num_layers=2,
            num_heads=4,
            num_kv_heads=2,
            init_stddev=0.02,  # a LoRA run wants a sharper base: see memjax.rl.toy.toy_params
        )
    )
    c.task = ConfigDict(dict(num_targets=8, length=6))
    c.num_steps = 40
    c.prompts_per_step = 16
    c.group_size = 8
    c.epochs = 1
    c.mini_batch_mode = "shuffled"  # or "in_order": consecutive chunks of mini_batch_rows rows
    c.mini_batches = 2  # "shuffled": updates per epoch
    c.mini_batch_rows = 0  # "in_order": rows per update (MemSearcher: 128 questions x G)
    c.mini_batch_shards = 1  # "in_order": verl's data-parallel ranks, each cutting its slice
    c.micro_batches = 1
    c.shared_prefix = 0  # > 0: a micro-batch's rows run a prompt they share once (rl.shared_prefix)
    c.seq_len = 8  # 2 prompt + 6 completion tokens
    c.vocab_chunk = 16
    # True: rollouts on the continuous-batching engine (one device, no mesh), each trajectory's
    # next turn submitted as its last one ends; engine_slots rows decode at once (0: 8).
    c.rollout_engine = False
    c.engine_slots = 0
    c.old_logprobs = "trainer"  # recompute (the sampler's are logged as the gap metric)
    c.sampling = ConfigDict(dict(temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=6))
    c.loss = ConfigDict(
        dict(
            eps_low=0.2,
            eps_high=0.28,
            dual_clip=3.0,
            kl_coef=0.001,
            kl_kind="k3",
            entropy_coef=0.0,
            agg_mode="token-mean",
        )
    )
    c.advantage = ConfigDict(dict(scaling="group", ddof=1, epsilon=1e-6))
    c.optimizer = ConfigDict(
        dict(learning_rate=3e-3, warmup_steps=2, schedule="constant", weight_decay=0.0)
    )
    c.eval_every = 10
    c.eval_before = False  # True: also the starting weights, as step 0
    c.checkpoint_every = 10
    c.keep_last = 2
    c.keep_best = 1
    c.export_from = "last"  # "best": return the best-evaluated step's weights
    c.plot_every = 5
    c.mesh = None
    # LoRA: --config.lora.rank=8 trains adapters on the frozen random base instead of every weight.
    c.lora = ConfigDict(dict(rank=0, alpha=16.0, targets="q,k,v,o,gate,up,down", dtype="float32"))
    c.stop_after = placeholder(int)  # None; `--config.stop_after=N` simulates a crash at step N
    return c
