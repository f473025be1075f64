"""MemSearcher multi-context GRPO on CPU, starting from an SFT policy instead of the base model.

    python -m memjax.launch --config=configs/sft_cpu.py --workdir=/tmp/memjax_sft \
        --config.data.train=/tmp/sft_data/trajectories.jsonl --config.data.roles=memsearcher
    python -m memjax.launch --config=configs/memsearcher_cpu_from_sft.py --workdir=/tmp/ms_rl

The base SmolLM2 never issues a search, so every GRPO group advantage is 0; after SFT on the
teachers' trajectories it searches and answers in format, and the reward can rise.
"""

import importlib.util
from pathlib import Path


def get_config():
    spec = importlib.util.spec_from_file_location(
        "memsearcher_cpu", Path(__file__).with_name("memsearcher_cpu.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.get_config()
    config.model.source = "/tmp/memjax_sft"  # an SFT workdir (its exported policy/)
    return config
