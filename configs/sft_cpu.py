"""SFT of the packaged SmolLM2-135M on teacher trajectories (the cold start before RL), on CPU.

    python -m memjax.launch --config=configs/sft_data_cpu.py --workdir=/tmp/sft_data   # teachers
    python -m memjax.launch --config=configs/sft_cpu.py --workdir=/tmp/sft \
        --config.data.train=/tmp/sft_data/trajectories.jsonl

Held out: `data.eval` if given, else 10% of the trajectories by id hash (never trained on).
The trained policy is written to <workdir>/policy; `--config.model.source=<workdir>` starts RL
from it.
"""

from ml_collections import ConfigDict

from memjax.recipes.sft import sft_section


def get_config() -> ConfigDict:
    c = ConfigDict()
    c.job = "sft.train"
    c.model = ConfigDict({"source": "packaged:smollm2", "param_dtype": "float32", "remat": "none"})
    # roles: "" trains one model on every role in the file (the CPU agents share one model);
    # e.g. "memsearcher" for one role. max_per_role keeps the mix balanced (0: all).
    c.data = ConfigDict(
        {"train": "", "eval": "", "eval_fraction": 0.1, "roles": "", "max_per_role": 0,
         # Training contexts whose trained text matches this regex, repeated oversample_times
         # times: e.g. '"event": "(UPDATE|DELETE)"' for the manager's rarer decisions.
         "oversample": "", "oversample_times": 1}
    )  # fmt: skip
    c.sft = sft_section(learning_rate=1e-5, batch_rows=8, max_seq_len=1024)
    c.sft.num_steps = 60
    c.sft.micro_batches = 2  # 4 rows per micro-step: bounded activation memory on 2 cores
    c.sft.eval_every = 20
    c.sft.checkpoint_every = 20
    # The agent's own greedy evaluation beside the held-out NLL ("search_agent": MemSearcher on
    # the eval questions of configs/memsearcher_cpu.py, which no teacher trajectory is drawn from).
    c.task_eval = ConfigDict(
        {"kind": "none", "config": "configs/memsearcher_cpu.py", "max_examples": 20}
    )
    c.export = True
    return c
