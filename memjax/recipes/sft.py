"""The SFT section shared by the CPU and paper-scale SFT recipes (`memjax.sft.run_config`)."""

from ml_collections import ConfigDict

from memjax.recipes.sections import lora_section, optimizer_section


def sft_section(learning_rate: float, batch_rows: int, max_seq_len: int) -> ConfigDict:
    """AdamW at a constant rate after a short warmup, token-mean NLL on the assistant tokens,
    rows length-bucketed in multiples of 64 tokens."""
    optimizer = optimizer_section(learning_rate=learning_rate)
    optimizer.warmup_steps = 5
    return ConfigDict(
        {
            "num_steps": 100,
            "seed": 0,
            "eval_every": 25,
            "eval_before": False,  # True: also the starting weights, as step 0
            "checkpoint_every": 25,
            "plot_every": 5,
            "keep_last": 2,
            "keep_best": 1,
            "export_from": "last",  # "best": the step with the lowest held-out loss
            "stop_after": None,
            "batch_rows": batch_rows,
            "micro_batches": 1,
            "max_seq_len": max_seq_len,
            "bucket": 64,
            "agg_mode": "token-mean",
            "token_mean_over": "data",  # every trained token weighs the same across buckets
            "vocab_chunk": 4096,
            "eval_batch_rows": batch_rows,
            # > 0: a batch's common untrained prefix (e.g. a role's fixed instructions) runs
            # once, not once per row, when at least this many tokens (memjax.models.shared_prefix)
            "shared_prefix": 0,
            "optimizer": optimizer,
            "mesh": None,
            "lora": lora_section(),  # --config.sft.lora.rank=16: adapters over a frozen base
        }
    )
