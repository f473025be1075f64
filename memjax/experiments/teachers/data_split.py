"""Which part of each data set the teachers draw from, and the name written into the output.

Training data only by default, so evaluation never overlaps it: LoCoMo's Memory-R1 train
conversation (conv-26), the synthetic conversations of one seed (1000 by default; held-out
synthetic data uses another seed), and the HotpotQA questions that MemSearcher's own
evaluation does not hold out: the same cut by question id (`memjax.data.splits.held_out_ids`
with the MemSearcher recipe's `shared_file_eval_fraction` and `split_seed`), so no teacher
trajectory is drawn from a question `memsearcher.eval` scores.
"""

from __future__ import annotations

from collections.abc import Sequence

from memjax.data.splits import MEMORY_R1_TRAIN_IDS, MEMORY_R1_VALIDATION_IDS, held_out_ids

SPLITS = ("train", "heldout")
HOTPOT_EVAL_FRACTION = 0.2  # configs/memsearcher_cpu.py's data.shared_file_eval_fraction
HOTPOT_SPLIT_SEED = 0  # and its data.split_seed
SYNTHETIC_TRAIN_SEED = 1000


def choose_split(
    dataset: str,
    items: Sequence,
    split: str = "train",
    seed: int | None = None,
    eval_fraction: float = HOTPOT_EVAL_FRACTION,
    split_seed: int = HOTPOT_SPLIT_SEED,
) -> tuple[list, str]:
    """(the split's items, its name). `items`: LoCoMo conversations, HotpotQA examples, or
    the conversations of synthetic `seed` (a seed is all train or all held out)."""
    if split not in SPLITS:
        raise ValueError(f"config.split={split!r}; choose from {SPLITS}")
    if dataset == "locomo":
        held_out = split == "heldout"
        chosen = [
            c for c in items
            if (c.sample_id in MEMORY_R1_TRAIN_IDS) != held_out
            and c.sample_id not in MEMORY_R1_VALIDATION_IDS
        ]  # fmt: skip
        ids = ",".join(c.sample_id for c in chosen) if not held_out else "test"
        return chosen, f"locomo:memory_r1_{'train' if not held_out else 'test'}({ids})"
    if dataset == "hotpotqa":
        held = held_out_ids([x.id for x in items], eval_fraction, split_seed)
        part = [x for x in items if (x.id in held) == (split == "heldout")]
        name = "eval" if split == "heldout" else "train"
        return part, f"hotpotqa:{name}_{len(part)}_of_{len(items)}_by_id(seed {split_seed})"
    if dataset == "synthetic":
        if seed is None:
            raise ValueError("a synthetic split is named by its seed; pass seed=")
        if split == "heldout" and seed == SYNTHETIC_TRAIN_SEED:
            raise ValueError(f"config.synthetic.seed={seed} is the training seed; held-out "
                             "synthetic data needs another one")  # fmt: skip
        return list(items), f"synthetic:{split}_seed{seed}"
    raise ValueError(f"no split rule for data set {dataset!r}")
