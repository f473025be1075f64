"""Config sections both papers' recipes share: the optimizer, the policy loss, LoRA.

Field names match `memjax.training.optimizer.OptimizerConfig` and
`memjax.rl.losses.PolicyLossConfig`, so a section unpacks into them directly.
"""

from ml_collections import ConfigDict


def optimizer_section(learning_rate: float = 1e-6) -> ConfigDict:
    """AdamW at a constant rate, no warmup, weight decay 0.01, gradients clipped at norm 1."""
    return ConfigDict(
        {
            "learning_rate": learning_rate,
            "schedule": "constant",
            "warmup_steps": 0,
            "weight_decay": 0.01,
            "max_grad_norm": 1.0,
        }
    )


def policy_loss_section(kl_coef: float, entropy_coef: float) -> ConfigDict:
    """Clip 0.2 on both sides with dual clip 3.0, k3 KL (verl's low_var_kl), token-mean."""
    return ConfigDict(
        {
            "eps_low": 0.2,
            "eps_high": 0.2,
            "dual_clip": 3.0,
            "kl_coef": kl_coef,
            "kl_kind": "k3",
            "entropy_coef": entropy_coef,
            "agg_mode": "token-mean",
        }
    )


def lora_section(rank: int = 0, alpha: float = 32.0) -> ConfigDict:
    """Low-rank adapters (memjax.models.lora_config.LoraConfig); rank 0 trains every weight.
    `--config.lora.rank=16` switches LoRA on, on all seven projections unless `targets` names
    fewer ("q,v"); with it the frozen base may be held in bf16 (`model.param_dtype`)."""
    return ConfigDict(
        {"rank": rank, "alpha": alpha, "targets": "q,k,v,o,gate,up,down", "dtype": "float32"}
    )
