"""The RL trainer's typed config: read once from a trainer section and validated with bounds.

    rc = RLRunConfig.from_section(config.rl, "config.rl")

The section's top level holds the loop fields (`memjax.training.schedule.LoopConfig`) and the
fields below; `sampling`, `loss`, `advantage`, `optimizer` and `critic_optimizer` are strict
sub-sections (an unknown field is an error that lists the valid ones). configs/toy_grpo.py lists
every field.
"""

from __future__ import annotations

import dataclasses
import math

from memjax.errors import ConfigError
from memjax.models.lora_config import LoraConfig, lora_from_section
from memjax.rl.advantages import SCALINGS, SINGLETON_GROUPS
from memjax.rl.losses import PolicyLossConfig
from memjax.rl.minibatches import MODES, MiniBatchConfig
from memjax.sampling.sampling_params import SamplingParams
from memjax.training.optimizer import OptimizerConfig
from memjax.training.schedule import LoopConfig
from memjax.training.sections import as_dict, pick, read_section, require
from memjax.training.states import optimizer_from

ALGOS = ("grpo", "ppo")
OLD_LOGPROBS = ("trainer", "sampler")
DEFAULT_ENGINE_SLOTS = 8
DEFAULT_VALUE_CLIP = 0.2  # PPO's critic: clip its values to this far from the old ones


@dataclasses.dataclass(frozen=True)
class AdvantageConfig:
    scaling: str = "group"  # GRPO: "group" | "batch" | "none" (Dr.GRPO)
    ddof: int = 1  # 1: unbiased group std (verl, TRL), 0: population std
    epsilon: float = 1e-6
    gamma: float = 1.0  # PPO's GAE
    lam: float = 0.95
    whiten: bool = True  # PPO: whiten advantages over the batch's trainable tokens
    # A group of one (group_size 1 under REINFORCE-style runs, or ragged groups): "zero"
    # advantages (memjax), or verl's mean 0 / std 1 convention ("verl").
    singleton_group: str = "zero"

    def __post_init__(self):
        if self.scaling not in SCALINGS:
            raise ValueError(f"scaling={self.scaling!r}: choose from {SCALINGS}")
        if self.singleton_group not in SINGLETON_GROUPS:
            raise ValueError(
                f"singleton_group={self.singleton_group!r}: choose from {SINGLETON_GROUPS}"
            )
        if self.ddof not in (0, 1):
            raise ValueError(f"ddof={self.ddof}: must be 0 or 1")
        if not self.epsilon >= 0:
            raise ValueError(f"epsilon={self.epsilon}: must be >= 0")
        for name in ("gamma", "lam"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)}: must be in [0, 1]")


@dataclasses.dataclass(frozen=True)
class RLRunConfig:
    loop: LoopConfig
    algo: str
    group_size: int  # G rollouts per prompt
    prompts_per_step: int
    seq_len: int  # tokens per training row (prompt + completions + observations)
    epochs: int  # passes over a step's rows
    mini_batches: int  # optimizer updates per epoch ("shuffled" mini-batches)
    micro_batches: int  # gradient-accumulation slices per update
    vocab_chunk: int  # log-probs over the vocabulary in chunks of this many ids
    old_logprobs: str  # "trainer" recomputes them; "sampler" takes the sampler's
    value_clip: float | None  # PPO's critic
    sampling: SamplingParams
    loss: PolicyLossConfig
    advantage: AdvantageConfig
    optimizer: OptimizerConfig
    critic_optimizer: OptimizerConfig | None  # PPO only
    mesh: dict | None
    lora: LoraConfig | None = None  # `lora.rank` > 0: train adapters over a frozen base
    # How a step's rows become updates (memjax.rl.minibatches): "shuffled" (`mini_batches` per
    # epoch) or "in_order" (chunks of `mini_batch_rows`, MemSearcher's trainer).
    mini_batch: MiniBatchConfig = MiniBatchConfig()
    # > 0: a micro-batch's rows that open with at least this many equal untrained tokens (a
    # GRPO group's prompt) run them once (memjax.rl.shared_prefix); 0 runs every row whole.
    shared_prefix: int = 0
    decode_batch: int = 0  # rows decoded at once over the mesh; 0: all of a step's rows
    # Rollouts on the continuous-batching engine (memjax.rl.engine_rollout) instead of the
    # lock-step sampler: each trajectory's next turn starts as soon as its last one ends.
    rollout_engine: bool = False
    engine_slots: int = 0  # rows the engine decodes at once; 0: decode_batch, else 8

    @property
    def slots(self) -> int:
        """The engine's slots: engine_slots, else decode_batch, else DEFAULT_ENGINE_SLOTS."""
        return self.engine_slots or self.decode_batch or DEFAULT_ENGINE_SLOTS

    @property
    def total_updates(self) -> int:
        """Updates over the run; for "in_order" a lower bound (one context per trajectory)."""
        per_epoch = _updates_per_epoch(self.mini_batch, self.prompts_per_step * self.group_size)
        return self.loop.num_steps * self.epochs * per_epoch

    @classmethod
    def from_section(cls, section, path: str = "config") -> RLRunConfig:
        values = as_dict(section)
        loop = read_section(LoopConfig, pick(values, LoopConfig.FIELDS), path).validate(path)
        algo = values.get("algo", "grpo")
        require(algo in ALGOS, f"{path}.algo", algo, f"choose from {ALGOS}")
        ints = {k: _int(values, k, path, default) for k, default in _INT_FIELDS.items()}
        for name, low in (("group_size", 1), ("prompts_per_step", 1), ("seq_len", 2)):
            require(ints[name] >= low, f"{path}.{name}", ints[name], f"must be >= {low}")
        for name in ("epochs", "mini_batches", "micro_batches", "vocab_chunk"):
            require(ints[name] >= 1, f"{path}.{name}", ints[name], "must be >= 1")
        decode = ints["decode_batch"]
        require(decode >= 0, f"{path}.decode_batch", decode, "must be >= 0 (0: a step's rows)")
        shared = ints["shared_prefix"]
        require(shared >= 0, f"{path}.shared_prefix", shared, "must be >= 0 (0: off)")
        engine = _rollout_engine(values, ints, path)
        advantage = read_section(AdvantageConfig, values.get("advantage"), f"{path}.advantage")
        if algo == "grpo" and advantage.singleton_group == "zero":
            require(
                ints["group_size"] >= 2,
                f"{path}.group_size",
                ints["group_size"],
                "GRPO needs >= 2 rollouts per prompt (with 1, every group advantage is 0; "
                "advantage.singleton_group='verl' keeps the reward instead)",
            )
        old = values.get("old_logprobs", "trainer")
        require(old in OLD_LOGPROBS, f"{path}.old_logprobs", old, f"choose from {OLD_LOGPROBS}")
        value_clip = values.get("value_clip", DEFAULT_VALUE_CLIP)
        if value_clip is not None:
            require(value_clip > 0, f"{path}.value_clip", value_clip, "must be > 0 (or None)")
        if "sampling" not in values:
            raise ConfigError(f"{path}.sampling: missing (at least max_new_tokens)")
        mini_batch = _mini_batch(values, ints, path)
        trajectories = ints["prompts_per_step"] * ints["group_size"]
        total = loop.num_steps * ints["epochs"] * _updates_per_epoch(mini_batch, trajectories)
        has_critic = algo == "ppo"
        rc = cls(
            loop=loop,
            algo=algo,
            old_logprobs=old,
            value_clip=value_clip,
            sampling=read_section(SamplingParams, values["sampling"], f"{path}.sampling"),
            loss=read_section(PolicyLossConfig, values.get("loss"), f"{path}.loss"),
            advantage=advantage,
            optimizer=optimizer_from(values.get("optimizer"), f"{path}.optimizer", total),
            critic_optimizer=optimizer_from(
                values.get("critic_optimizer"), f"{path}.critic_optimizer", total
            )
            if has_critic
            else None,
            mesh=as_dict(values.get("mesh")) or None,
            lora=lora_from_section(values.get("lora"), path),
            mini_batch=mini_batch,
            rollout_engine=engine,
            **{k: v for k, v in ints.items() if k in _RUN_INTS},
        )
        if mini_batch.mode == "in_order":
            for name in ("optimizer", "critic_optimizer"):
                opt = getattr(rc, name)
                require(
                    opt is None or opt.schedule == "constant",
                    f"{path}.{name}.schedule",
                    None if opt is None else opt.schedule,
                    "mini_batch_mode 'in_order' makes a varying number of updates per step; "
                    "use a constant schedule",
                )
        return rc


def wave_problem(decode_batch: int, group_size: int, mesh: dict | None) -> str | None:
    """Why `decode_batch` rows cannot be a wave of whole groups split evenly over the mesh's
    batch shards (data x fsdp), or None. A wave that does not divide is laid out whole on every
    device: its KV cache is replicated, not sharded, which no memory plan counts."""
    if decode_batch <= 0:
        return None
    sizes = [int((mesh or {}).get(axis, 1)) for axis in ("data", "fsdp")]
    shards = math.prod(sizes) if min(sizes) > 0 else 1  # a -1 axis is sized at run time
    unit = math.lcm(group_size, shards)
    if decode_batch % unit == 0:
        return None
    return (
        f"must be a multiple of {unit} (whole groups of {group_size} rows, split evenly over "
        f"the mesh's data x fsdp = {shards}), e.g. {max(unit, decode_batch // unit * unit)}"
    )


_INT_FIELDS = {
    "group_size": None,
    "prompts_per_step": None,
    "seq_len": None,
    "epochs": 1,
    "mini_batches": 1,
    "micro_batches": 1,
    "vocab_chunk": 4096,
    "shared_prefix": 0,
    "decode_batch": 0,  # rows the sampler decodes at once over the mesh (0: a step's all)
    "engine_slots": 0,  # with rollout_engine: its slots (0: decode_batch, else 8)
    "mini_batch_rows": 0,
    "mini_batch_shards": 1,
}
_RUN_INTS = tuple(k for k in _INT_FIELDS if not k.startswith("mini_batch_"))


def _updates_per_epoch(mini_batch: MiniBatchConfig, trajectories: int) -> int:
    """Updates per epoch: "shuffled" makes its fixed count; "in_order" is counted as if every
    trajectory had one context (the fewest a step can make; "in_order" needs a constant
    schedule, which ignores the total)."""
    if mini_batch.mode == "in_order":
        return -(-trajectories // mini_batch.rows_per_mini_batch)
    return mini_batch.num_mini_batches


def _mini_batch(values: dict, ints: dict, path: str) -> MiniBatchConfig:
    mode = values.get("mini_batch_mode", "shuffled")
    require(mode in MODES, f"{path}.mini_batch_mode", mode, f"choose from {MODES}")
    rows, shards = ints["mini_batch_rows"], ints["mini_batch_shards"]
    if mode == "in_order":
        require(rows >= 1, f"{path}.mini_batch_rows", rows, "must be >= 1 for 'in_order'")
        require(
            shards >= 1 and rows % shards == 0,
            f"{path}.mini_batch_shards",
            shards,
            f"must be >= 1 and divide mini_batch_rows={rows}",
        )
    return MiniBatchConfig(mode, ints["mini_batches"], rows, shards)


def _rollout_engine(values: dict, ints: dict, path: str) -> bool:
    """rollout_engine, checked: a bool, and off wherever a mesh spreads the run over devices
    (the engine decodes on one device, unsharded)."""
    on = values.get("rollout_engine", False)
    require(isinstance(on, bool), f"{path}.rollout_engine", on, "expected True or False")
    slots = ints["engine_slots"]
    require(slots >= 0, f"{path}.engine_slots", slots, "must be >= 0 (0: decode_batch, else 8)")
    mesh = as_dict(values.get("mesh")) or {}
    if on and any(size != 1 for size in mesh.values()):
        raise ConfigError(
            f"{path}.rollout_engine=True: the rollout engine runs on one device, unsharded, and "
            f"{path}.mesh={mesh} is set; unset the mesh or set rollout_engine=False"
        )
    return on


def _int(values: dict, name: str, path: str, default) -> int:
    if name not in values or values[name] is None:
        if default is None:
            raise ConfigError(f"{path}.{name}: missing")
        return default
    v = values[name]
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    require(ok and float(v) == int(v), f"{path}.{name}", v, "expected an integer")
    return int(v)


__all__ = ["RLRunConfig", "AdvantageConfig", "ALGOS", "wave_problem"]
