"""The roles of an RL step: the rollout, the actor, the reference and the critic.

    rollout = Rollout(rc, cfg, eos_ids, pad_id, mesh=mesh, generate=None)   # episodes
    actor = Actor(weights.policy, cfg, ActorSettings.of(rc), mesh=mesh)     # policy updates
    reference = weights.reference()                                          # the KL reference
    critic = Critic(critic_trainable(weights, None, seed + 1), cfg, ...)  # rl.weights
    state = actor.init_state(); state, metrics = actor.update(state, batch)

A role holds how its model is laid out and run (its optimizer, the train state's shardings, the
jitted step or forward pass), not the train state itself: the trainer keeps the states in one
dict that the loop checkpoints, and memjax.aot compiles the same roles' steps over abstract
states. Which parameters train (all, or LoRA adapters) is the `Trainable` a role is given
(`memjax.training.trained_weights`); what the learner does with the roles is `memjax.rl.learners`.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from memjax import distributed
from memjax.engine import Engine
from memjax.models.config import DecoderConfig
from memjax.parallel import TRAIN_RULES
from memjax.rl import critic as critic_lib
from memjax.rl import losses, steps
from memjax.rl.engine_rollout import run_on_engine
from memjax.rl.rollout import Completion, run_in_waves
from memjax.rl.run_config import RLRunConfig
from memjax.sampling.sampling_params import SamplingParams
from memjax.training.logprobs import make_logprob_fn
from memjax.training.optimizer import OptimizerConfig
from memjax.training.states import state_layout
from memjax.training.train_step import init_train_state
from memjax.training.trained_weights import Trainable

# The batch each role's update reads, [B, T] each, with its dtype (the trainer packs them;
# memjax.aot lays them out abstractly). ref_logp only with the KL term.
ACTOR_FIELDS = {
    "tokens": np.int32,
    "token_mask": np.bool_,
    "loss_mask": np.bool_,
    "advantages": np.float32,
    "old_logp": np.float32,
    "sampler_logp": np.float32,
    "ref_logp": np.float32,
}
ACTOR_POSITIONS = ("loss_positions", "loss_valid")  # [B, K]: the trained tokens' positions
CRITIC_FIELDS = {
    "tokens": np.int32,
    "token_mask": np.bool_,
    "loss_mask": np.bool_,
    "old_values": np.float32,
    "returns": np.float32,
}


def make_generate(
    cfg: DecoderConfig,
    sampling: SamplingParams,
    eos_ids,
    pad_id: int,
    mesh=None,
    *,
    stop_strings=(),
    tokenizer=None,
):
    """memjax's on-device sampler as the rollout loop's `generate(prompts, rng)`; the
    parameters are read from `generate.params` at call time. `stop_strings`, spelt by
    `tokenizer`, end a completion as EOS does; `generate.stop_strings` and `generate.tokenizer`
    give the same stops to the engine when it rolls out instead (`rl.rollout_engine`). With a
    mesh, the sampler shards weights by SAMPLING_RULES and the batch over the data axes."""
    from memjax.parallel import SAMPLING_RULES
    from memjax.sampling.sampler import sample

    stop = tuple(stop_strings)
    rules = SAMPLING_RULES if mesh is not None else None

    def generate(prompts, rng):
        out = sample(
            generate.params,
            cfg,
            prompts,
            sampling,
            rng,
            eos_ids=tuple(eos_ids),
            stop_strings=stop,
            tokenizer=tokenizer if stop else None,
            pad_id=pad_id,
            mesh=mesh,
            rules=rules,
        )
        tokens, logps = np.asarray(out.tokens), np.asarray(out.logprobs)
        lengths = np.asarray(out.lengths)
        reasons = list(out.stop_reason) if out.stop_reason is not None else None
        return [
            Completion(
                tokens[i, : lengths[i]].tolist(),
                logps[i, : lengths[i]].tolist(),
                str(reasons[i]) if reasons is not None else "",
            )
            for i in range(len(prompts))
        ]

    generate.params = None
    generate.stop_strings, generate.tokenizer = stop, tokenizer
    return generate


class Rollout:
    """Episodes with the current policy: the sampler's lock-step waves of `decode_batch` rows,
    or the continuous-batching engine (`rl.rollout_engine`). Evaluation decodes greedily.

    A caller's `generate` (`make_rollout_generate`) samples both; the engine then takes the
    stop strings (and the tokenizer that spells them) it was built with."""

    def __init__(self, rc: RLRunConfig, cfg: DecoderConfig, eos_ids, pad_id, *, mesh, generate):
        self.cfg, self.eos_ids, self.sampling = cfg, tuple(eos_ids), rc.sampling
        self.engine_slots = rc.slots if rc.rollout_engine else 0
        self.max_len = rc.seq_len  # a context the trainer can hold, with its completion
        self.decode_batch = rc.decode_batch
        self.stop_strings = tuple(getattr(generate, "stop_strings", ()))
        self.tokenizer = getattr(generate, "tokenizer", None)
        self.generate = self.eval_generate = generate
        if generate is None:
            args = (cfg, rc.sampling, self.eos_ids, pad_id, mesh)
            self.generate = make_generate(*args)
            greedy = dataclasses.replace(rc.sampling, greedy=True)
            self.eval_generate = make_generate(cfg, greedy, *args[2:])

    def run(self, env, examples, group_size: int, key, params, *, evaluation: bool):
        """`group_size` episodes of each example with the sampler's `params`."""
        if self.engine_slots:
            sampling = self.sampling
            if evaluation:
                sampling = dataclasses.replace(sampling, greedy=True)
            engine = Engine(
                params,
                self.cfg,
                eos_ids=self.eos_ids,
                tokenizer=self.tokenizer,
                slots=self.engine_slots,
                max_len=self.max_len,
            )
            return run_on_engine(
                env, examples, group_size, engine, sampling, key, stop_strings=self.stop_strings
            )
        generate = self.eval_generate if evaluation else self.generate
        generate.params = params
        # This host's share of the rows the sampler decodes at once (the memory plan's KV cache).
        wave = distributed.host_batch_size(self.decode_batch) if self.decode_batch else 0
        return run_in_waves(env, examples, group_size, generate, key, self.eos_ids, wave)


class _TrainedRole:
    """A role whose weights train: the optimizer and the train state's layout over its
    `Trainable`, and its fresh state."""

    def __init__(self, trainable: Trainable, optimizer: OptimizerConfig, mesh, rules):
        self.trainable = trainable
        self.optimizer, self.shardings = state_layout(trainable.abstract, optimizer, mesh, rules)

    def init_state(self):
        return init_train_state(self.trainable.initial, self.optimizer, self.shardings)


@dataclasses.dataclass(frozen=True)
class ActorSettings:
    loss: losses.PolicyLossConfig
    optimizer: OptimizerConfig
    temperature: float  # the sampler's: log-probs and the ratio are taken at it
    vocab_chunk: int
    micro_batches: int

    @classmethod
    def of(cls, rc: RLRunConfig) -> ActorSettings:
        return cls(rc.loss, rc.optimizer, rc.sampling.temperature, rc.vocab_chunk, rc.micro_batches)


class Actor(_TrainedRole):
    """The policy that trains: its train step (GRPO's and PPO's clipped objective) and the
    log-prob pass that scores rows with it (old log-probs, and the reference's with its
    weights)."""

    name = "policy"  # its train state's key in the checkpoints

    def __init__(
        self,
        trainable: Trainable,
        cfg: DecoderConfig,
        settings: ActorSettings,
        *,
        mesh=None,
        rules=TRAIN_RULES,
        donate: bool | None = None,
    ):
        super().__init__(trainable, settings.optimizer, mesh, rules)
        self.train_step = steps.policy_train_step(
            cfg,
            settings.loss,
            self.optimizer,
            temperature=settings.temperature,
            vocab_chunk=settings.vocab_chunk,
            num_micro_batches=settings.micro_batches,
            mesh=mesh,
            rules=rules,
            state_shardings=self.shardings,
            donate=donate,
            **trainable.step_kwargs,
        )
        self.update = trainable.bind(self.train_step)  # (state, batch) -> (state, metrics)
        self.logprob_fn = make_logprob_fn(
            cfg,
            temperature=settings.temperature,
            chunk=settings.vocab_chunk,
            mesh=mesh,
            rules=rules if mesh is not None else None,
        )
        kl = settings.loss.kl_coef
        self.fields = {k: v for k, v in ACTOR_FIELDS.items() if k != "ref_logp" or kl}


@dataclasses.dataclass(frozen=True)
class CriticSettings:
    optimizer: OptimizerConfig
    value_clip: float | None
    micro_batches: int

    @classmethod
    def of(cls, rc: RLRunConfig) -> CriticSettings:
        return cls(rc.critic_optimizer, rc.value_clip, rc.micro_batches)


class Critic(_TrainedRole):
    """PPO's value model: its train step (the clipped value loss) and its values of a batch."""

    name = "critic"

    def __init__(
        self,
        trainable: Trainable,
        cfg: DecoderConfig,
        settings: CriticSettings,
        *,
        mesh=None,
        rules=TRAIN_RULES,
        donate: bool | None = None,
    ):
        super().__init__(trainable, settings.optimizer, mesh, rules)
        self.train_step = steps.critic_train_step(
            cfg,
            self.optimizer,
            value_clip=settings.value_clip,
            num_micro_batches=settings.micro_batches,
            mesh=mesh,
            rules=rules,
            state_shardings=self.shardings,
            donate=donate,
            **trainable.step_kwargs,
        )
        self.update = trainable.bind(self.train_step)
        forward_rules = rules if mesh is not None else None
        compose = trainable.compose
        self._values = jax.jit(
            lambda f, p, t, m: critic_lib.critic_values(
                compose(f, p), cfg, t, m, mesh=mesh, rules=forward_rules
            )
        )
        self.fields = dict(CRITIC_FIELDS)

    def values(self, params, tokens, token_mask) -> jax.Array:
        """[B, T] values of the rows, V of the state before each token."""
        return self._values(self.trainable.frozen, params, tokens, token_mask)


__all__ = [
    "ACTOR_FIELDS",
    "CRITIC_FIELDS",
    "Actor",
    "ActorSettings",
    "Critic",
    "CriticSettings",
    "Rollout",
    "make_generate",
]
