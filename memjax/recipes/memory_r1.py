"""Memory-R1's training settings (the paper's Appendix D) as an ml_collections ConfigDict.

    config = paper_config("grpo", "qwen2.5-7b-instruct", accelerator="H100-80GB",
                          num_devices=4, mesh={"data": 1, "fsdp": 2, "tensor": 2},
                          micro_batch_per_device=2, decode_batch=128)

From the paper (App. D): actor lr 1e-6, critic lr 1e-5 (PPO), constant schedule, total batch
128, micro-batch 2 per GPU, prompt 4096 + response 2048 tokens, temperature 1.0 in training and
greedy at validation and test, 4 x H100-80GB (8 for Qwen2.5-14B), trained with verl; reward =
exact match; retrieval of 60 memories (30 per speaker).

Not stated by the paper, so memjax's choices (named here as memjax's, not as verl's
defaults): GRPO group size 8 (verl's `rollout.n` defaults to 1), KL coefficient 0.001 with the
k3 ("low_var_kl") estimator for GRPO (PPO's eq. 2 has no KL term, so no reference model), clip
0.2 with dual clip 3.0, token-mean aggregation, one PPO epoch, weight decay 0.01, gradient clip
1.0, GAE gamma = lambda = 1.0, value clip 0.5, a mini-batch equal to the batch (one update per
step; verl's defaults are a 256-prompt mini-batch of a 1024-prompt batch), and 30 training steps
(`train.num_steps`: verl's 30 epochs over conv-26's 152 questions, one 128-question step each).
Both learning rates are constant with no warmup (App. D; verl's `warmup_style: constant`).

The job trains the answer agent; `--config.job=memory_r1.train_manager` trains the memory
manager with the same settings (the paper trains the two separately, same hyperparameters).
"""

from __future__ import annotations

from collections.abc import Mapping

from ml_collections import ConfigDict

from memjax.agents.memory_r1.recipe import TRAINING_STEPS
from memjax.recipes.rl_sections import lora_section, optimizer_section, policy_loss_section
from memjax.recipes.scale import add_scale_sections

ALGORITHMS = ("grpo", "ppo")


def paper_config(
    algorithm: str,
    preset: str,
    *,
    accelerator: str,
    num_devices: int,
    mesh: Mapping[str, int],
    micro_batch_per_device: int = 2,
    decode_batch: int = 128,
    remat: str = "full",
    model_source: str = "",
    locomo: str = "/data/locomo10.json",
) -> ConfigDict:
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm={algorithm!r}; choose from {ALGORITHMS}")
    config = ConfigDict()
    config.job = "memory_r1.train_answer"
    config.seed = 0
    config.model = ConfigDict({"source": model_source or f"/models/{_hf_dir(preset)}"})

    config.data = ConfigDict()
    config.data.locomo = locomo  # split by conversation: conv-26 train, conv-30 val, 8 test
    config.data.include_adversarial = False  # category 5 excluded, as the paper
    config.data.shuffle = True

    config.agent = ConfigDict()
    config.agent.memories_per_speaker = 30  # 60 retrieved memories per question
    config.agent.manager_top_k = 10  # related memories shown to the manager (Mem0's s=10)
    config.agent.snapshot_window = 24  # App. B.2's text (Algorithm 1 says 50)
    config.agent.distillation = True
    config.agent.reward = "em"

    config.rollout = ConfigDict()
    config.rollout.group_size = 8 if algorithm == "grpo" else 1
    config.rollout.temperature = 1.0
    config.rollout.top_p = 1.0
    config.rollout.top_k = 0
    config.rollout.max_prompt_length = 4096
    config.rollout.max_response_length = 2048

    config.eval_sampling = ConfigDict({"temperature": 0.0, "max_tokens": 2048})  # greedy

    config.optimizer = optimizer_section(learning_rate=1e-6)
    config.lora = lora_section()
    config.loss = policy_loss_section(
        kl_coef=0.001 if algorithm == "grpo" else 0.0, entropy_coef=0.0
    )

    config.train = ConfigDict()
    config.train.algorithm = algorithm
    config.train.batch_size = 128  # questions per step
    config.train.mini_batch_size = 128
    config.train.ppo_epochs = 1
    config.train.advantage_eps = 1e-6
    config.train.save_every_steps = 20
    config.train.num_steps = TRAINING_STEPS  # see memjax.agents.memory_r1.recipe

    if algorithm == "ppo":
        # Field names of memjax.training.optimizer.OptimizerConfig, as the RL trainer reads them.
        config.critic_optimizer = ConfigDict(
            {
                "learning_rate": 1e-5,
                "schedule": "constant",
                "warmup_steps": 0,
                "weight_decay": 0.01,
                "max_grad_norm": 1.0,
            }
        )
        config.gae = ConfigDict({"gamma": 1.0, "lam": 1.0})
        config.value_clip = 0.5

    return add_scale_sections(
        config,
        preset=preset,
        accelerator=accelerator,
        num_devices=num_devices,
        mesh=mesh,
        micro_batch_per_device=micro_batch_per_device,
        decode_batch=decode_batch,
        remat=remat,
    )


def _hf_dir(preset: str) -> str:
    """The Hugging Face directory name of a preset (where users usually keep the weights)."""
    names = {
        "qwen2.5-3b-instruct": "Qwen2.5-3B-Instruct",
        "qwen2.5-7b-instruct": "Qwen2.5-7B-Instruct",
        "qwen2.5-14b-instruct": "Qwen2.5-14B-Instruct",
        "llama-3.1-8b-instruct": "Llama-3.1-8B-Instruct",
    }
    return names.get(preset.lower(), preset)


__all__ = ["ALGORITHMS", "paper_config"]
