"""The memory planner against a hand calculation, and its suggestions."""

import dataclasses
import runpy
from pathlib import Path

import pytest

from memjax import hardware, planning
from memjax.models.config import DecoderConfig
from memjax.parallel import SAMPLING_RULES, TRAIN_RULES, normalize_rules

REPO = Path(__file__).resolve().parents[2]

# L=2 layers, D=8, N=4 heads, K=2 kv heads, Hd=2, F=16, V=32; f32 weights, bf16 compute.
TINY = DecoderConfig(
    "llama",
    vocab_size=32,
    embed_dim=8,
    mlp_dim=16,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=2,
    param_dtype="float32",
    compute_dtype="bfloat16",
    remat="full",
    attention="xla",
)


def tiny_workload(**kw):
    w = planning.Workload(
        cfg=TINY,
        mesh={"data": 1, "fsdp": 2, "tensor": 2},
        train_rules=normalize_rules(TRAIN_RULES),
        sampling_rules=normalize_rules(SAMPLING_RULES),
        hardware=hardware.Hardware(hardware.accelerator("H100-80GB"), 4),
        seq_len=4,
        micro_batch_per_device=2,
        decode_batch=4,
        reference=True,
        critic=False,
        vocab_chunk=8,
    )
    return dataclasses.replace(w, **kw)


def test_hand_calculation():
    p = planning.plan(tiny_workload())
    # Train layout (embed->fsdp, heads/kv_heads/mlp/vocab->tensor), f32, bytes per device:
    # embed 32*8*4/4 = 256, lm_head 256, final_norm 8*4 = 32, attn_norm and mlp_norm 2*8*4 = 64
    # each, q 2*8*4*2*4/4 = 128, k and v 2*8*2*2*4/4 = 64 each, o 128, gate/up/down 2*8*16*4/4
    # = 256 each.
    policy = 256 + 256 + 32 + 64 + 64 + 128 + 64 + 64 + 128 + 3 * 256
    assert policy == 1824 and p.parts["policy weights"] == policy
    assert p.parts["optimizer (AdamW m, v)"] == 2 * policy
    # The reference: the same layout, matrices in bf16 (as the forward reads them), the norm
    # scales (final 32, attn 64, mlp 64) in f32.
    norms = 32 + 64 + 64
    assert p.parts["reference model"] == (policy - norms) // 2 + norms == 992
    # Sampling layout (embed replicated), bf16: embed 32*8*2/2 = 256, lm_head 256, final_norm
    # 16, norms 32 each, q 2*8*4*2*2/2 = 128, k, v 64 each, o 128, gate/up/down 256 each.
    sampler = 256 + 256 + 16 + 32 + 32 + 128 + 64 + 64 + 128 + 3 * 256
    assert p.parts["sampler weights"] == sampler == 1744
    assert p.persistent == policy * 3 + 992 + sampler == 8208
    # KV cache: 2 (k, v) * L2 * B4 * S4 * K2 * Hd2 * 2 bytes = 512, cut by batch over fsdp (2)
    # and kv heads over tensor (2); decode logits: 4 rows / 2 shards * V32 * 4 bytes.
    assert p.parts["KV cache"] == 512 // 4 == 128
    assert p.parts["decode logits"] == 2 * 32 * 4
    # A decode step: two layers' sampler weights (608 bytes each) and 4 copies of the logits.
    assert p.parts["rollout: decode step"] == 2 * 608 + 4 * 2 * 32 * 4
    assert p.rollout == 128 + 256 + 2240
    # Activations, b=1, T=4, bf16, tensor 2 (N/t=2, K/t=1, F/t=8):
    # saved (remat full): L * b*T*D*2 = 2 * 64; one layer: dots 4*(2*2 + 2*1*2 + 2*8 + 2*8)*2
    # = 320, others 4*(3*8 + 2*2*2 + 1*2 + 2*8)*2 = 400, scores 1*2*4*4*6 = 192;
    # layer weights: 2 * (592 params / 2) * 2 bytes; logits 3*1*4*8*4/2 = 192 + gathered
    # unembedding tables (16*8*2 bytes each: two on a GPU, three on a TPU).
    # A micro-batch holds micro_batch_per_device = 2 rows on each batch shard (the tensor
    # axis splits their heads, not the rows): the activation terms above are for b=1, so
    # twice them.
    assert p.parts["activations: saved"] == 2 * 128
    assert p.parts["activations: one layer"] == 2 * (320 + 400 + 192)  # scores: 6 bytes each
    assert p.parts["activations: layer weights"] == 2 * 296 * 2
    # Two gathered vocabulary tables on a GPU (three on a TPU): 2 * 16*8*2 = 512.
    assert p.parts["activations: logits"] == 2 * 192 + 512
    assert p.parts["gradients"] == policy
    # The update on a GPU: one state-sized buffer (the new moments overwrite the donated ones).
    assert p.parts["optimizer update"] == policy
    assert p.train == policy + 256 + 1824 + 1184 + 896 + policy == 7808
    assert p.logprobs == 0  # no log-prob pass in this workload
    assert p.peak == 8208 + 7808 and p.fits
    # Donating on a TPU: new weights, m and v (f32, train layout) before the finite-gradient
    # select.
    tpu = hardware.Hardware(hardware.accelerator("TPU-v5p"), 4)
    on_tpu = planning.plan(tiny_workload(hardware=tpu, donate_state=True))
    assert on_tpu.parts["optimizer update"] == 3 * policy
    assert on_tpu.parts["activations: logits"] == 2 * 192 + 768


def test_fused_attention_and_logprob_pass_terms():
    # A fused kernel keeps 16 bytes of statistics per query instead of 6 bytes per score:
    # b2 * N/t 2 * T4 * 16 = 256 in place of 2 * 2 * 4 * 4 * 6 = 384.
    xla = planning.plan(tiny_workload())
    splash = planning.plan(tiny_workload(cfg=TINY.replace(attention="splash")))
    assert splash.parts["activations: one layer"] == xla.parts["activations: one layer"] - 384 + 256
    default = tiny_workload(cfg=TINY.replace(attention=""))
    assert default.attention == "cudnn"  # an H100's default
    tpu = dataclasses.replace(
        default, hardware=hardware.Hardware(hardware.accelerator("TPU-v5p"), 4)
    )
    assert tpu.attention == "splash"
    # Log-prob pass over chunks of 8 rows (4 per data x fsdp shard), XLA: the layer slab
    # 4*4*(8 + 8)*2 = 512, f32 scores 4*2*4*4*4 = 512, the log-prob slab 4*4*8*4/2 = 256, and
    # the gathered tables 16*8*(2*2 + 4) = 1024.
    lp = planning.plan(tiny_workload(logprob_rows=8))
    assert lp.parts["log-prob pass (a chunk)"] == lp.logprobs == 512 + 512 + 256 + 1024
    assert lp.peak == lp.persistent + max(lp.rollout, lp.logprobs, lp.train)


def test_xla_attention_is_planned_at_one_query_block():
    # Blocks of 2 queries over T=4: one layer holds b1 * N/t 2 * 2 * 4 scores at 6 bytes (96)
    # in place of the whole square's 192, per row of the 2 a batch shard holds.
    square = planning.plan(tiny_workload(logprob_rows=8))
    blocks = planning.plan(tiny_workload(cfg=TINY.replace(attention_query_block=2), logprob_rows=8))
    layer = "activations: one layer"
    assert blocks.parts[layer] == square.parts[layer] - 2 * (192 - 96)
    # The log-prob pass: 4 rows per shard * N/t 2 * 2 queries * 4 keys * 4 bytes (f32).
    lp = "log-prob pass (a chunk)"
    assert blocks.parts[lp] == square.parts[lp] - 4 * 2 * (4 - 2) * 4 * 4
    # A block as long as the row, or longer, is the square.
    whole = planning.plan(tiny_workload(cfg=TINY.replace(attention_query_block=4)))
    assert whole.parts[layer] == planning.plan(tiny_workload()).parts[layer]
    # Nothing recomputed: a layer keeps 16 bytes of statistics per query and no scores, as
    # the backward rebuilds them (b2 * N/t 2 * T4 * 16 = 256 per layer, L=2), whatever the
    # block; the matmul outputs and the rest as saved with remat dots and below.
    none = planning.plan(tiny_workload(cfg=TINY.replace(remat="none")))
    none_blocks = planning.plan(
        tiny_workload(cfg=TINY.replace(remat="none", attention_query_block=2))
    )
    dots = planning.plan(tiny_workload(cfg=TINY.replace(remat="dots")))
    saved = "activations: saved"
    assert none.parts[saved] == dots.parts[saved] + 2 * (2 * 400 + 256)
    assert none_blocks.parts[saved] == none.parts[saved]


def test_a_chunked_prefill_is_planned_at_one_chunk_of_columns():
    # The prefill's working set holds one chunk's activations, scores and new keys at a time,
    # against every cache slot: a 16-token prompt in chunks of 4 costs what a 4-token one does,
    # its scores (2 prompts per shard: 4 / group 1 / 2 shards, x N/t 2 x 4 x 20 slots) at the
    # chunk's fitted bytes.
    scores = 2 * 2 * 4 * 20
    one_piece = planning.plan(tiny_workload(prompt_len=16, seq_len=20))
    chunked = planning.plan(tiny_workload(prompt_len=16, seq_len=20, prefill_chunk=4))
    short = planning.plan(tiny_workload(prompt_len=4, seq_len=20))
    per_score = planning.ATTN_BYTES_PER_SCORE - planning.CHUNK_BYTES_PER_SCORE
    assert chunked.parts["rollout: prefill"] == short.parts["rollout: prefill"] - scores * per_score
    assert chunked.parts["rollout: prefill"] < one_piece.parts["rollout: prefill"]
    assert chunked.parts["KV cache"] == one_piece.parts["KV cache"]
    wide = planning.plan(tiny_workload(prompt_len=16, seq_len=20, prefill_chunk=64))
    assert wide.parts["rollout: prefill"] == one_piece.parts["rollout: prefill"]
    # A fused kernel serves a first prefill only: the chunks after it pay the cached path's
    # scores, which a fused one-piece prefill does not.
    fused = dict(cfg=TINY.replace(attention="splash"), seq_len=20)
    fused_chunked = planning.plan(tiny_workload(prompt_len=16, prefill_chunk=4, **fused))
    fused_short = planning.plan(tiny_workload(prompt_len=4, **fused))
    chunk_scores = scores * planning.CHUNK_BYTES_PER_SCORE
    assert (
        fused_chunked.parts["rollout: prefill"]
        == fused_short.parts["rollout: prefill"] + chunk_scores
    )
    config = runpy.run_path(str(REPO / "configs" / "grpo_qwen7b.py"))["get_config"]()
    assert planning.workload_from_config(config).prefill_chunk == 0
    config.rl.sampling.prefill_chunk = 512
    assert planning.workload_from_config(config).prefill_chunk == 512


def test_a_table_larger_than_every_new_state_buffer_is_counted_apart():
    v5p = hardware.accelerator("TPU-v5p")
    # A TPU step keeps its state (no donation). fsdp 2: the largest trained leaves per device
    # (embed, lm_head, gate, up, down: 256 bytes in f32) are as large as a gathered [V/t, D]
    # bf16 table (16 * 8 * 2 = 256), which the new state's buffers can hold.
    w2 = tiny_workload(hardware=hardware.Hardware(v5p, 4))
    assert not w2.donates and planning.buffers_apart(w2) == 0
    # fsdp 4 halves every leaf (128 bytes) but not the table: its three copies count apart.
    w4 = tiny_workload(hardware=hardware.Hardware(v5p, 8), mesh={"data": 1, "fsdp": 4, "tensor": 2})
    assert planning.buffers_apart(w4) == planning.VOCAB_TABLE_COPIES * 256 == 768
    p = planning.plan(w4)
    acts = {k: v for k, v in p.parts.items() if k.startswith("activations")}
    saved, state = acts["activations: saved"], p.parts["new train state"]
    rest = sum(acts.values()) - saved - 768
    assert p.train == p.parts["gradients"] + saved + state + 768 + max(0, rest - state)
    # Where the new state could hold every working set, what is apart still counts in full.
    small = {"activations: saved": 10, "activations: one layer": 20, "activations: logits": 30}
    assert planning.undonated_step_bytes(small, 100) == 10 + 100
    assert planning.undonated_step_bytes(small, 100, apart=30) == 10 + 100 + 30


def test_remat_and_critic_terms():
    dots = planning.plan(tiny_workload(cfg=TINY.replace(remat="dots")))
    assert dots.parts["activations: saved"] == 2 * (128 + 640)  # b=2 rows per batch shard
    ppo = planning.plan(tiny_workload(critic=True, reference=False))
    assert "reference model" not in ppo.parts
    # The critic: the backbone without lm_head (1824 - 256) plus an f32 head [8] and a bias.
    critic = 1824 - 256 + 8 * 4 // 2 + 4
    assert ppo.parts["critic weights + AdamW"] == 3 * critic


def test_mesh_resolution_errors():
    assert planning.resolve_mesh({"data": 1, "fsdp": -1, "tensor": 2}, 8)["fsdp"] == 4
    with pytest.raises(planning.PlanError, match="needs 4 devices"):
        planning.resolve_mesh({"fsdp": 2, "tensor": 2}, 8)
    with pytest.raises(planning.PlanError, match="unknown"):
        planning.resolve_mesh({"pipeline": 2}, 2)


def test_command_line_overrides_change_only_what_they_name():
    w = tiny_workload(logprob_rows=planning.LOGPROB_ROWS_PER_DEVICE * 2)
    assert planning.workload_overrides(w, mesh="", remat="", attention=None) == {}
    # Eight devices: fsdp takes them, tensor stays; the log-prob chunk follows data x fsdp.
    eight = hardware.Hardware(hardware.accelerator("H100-80GB"), 8)
    out = planning.workload_overrides(w, hardware=eight)
    assert out["mesh"] == {"data": 1, "fsdp": 4, "tensor": 2}
    assert out["logprob_rows"] == planning.LOGPROB_ROWS_PER_DEVICE * 4
    out = planning.workload_overrides(w, mesh="2,1,2", decode_batch=16, remat="dots")
    assert out["mesh"] == {"data": 2, "fsdp": 1, "tensor": 2}
    assert out["logprob_rows"] == planning.LOGPROB_ROWS_PER_DEVICE * 2
    assert out["decode_batch"] == 16 and out["cfg"].remat == "dots"
    assert "hardware" not in out and "micro_batch_per_device" not in out


def test_suggestions_make_a_config_fit():
    config = runpy.run_path(str(REPO / "configs" / "grpo_qwen14b.py"))["get_config"]()
    w = planning.workload_from_config(config)
    small = dataclasses.replace(w, hardware=hardware.Hardware(hardware.accelerator("A100-40GB"), 8))
    assert not planning.plan(small).fits
    steps, after = planning.suggest(small)
    assert steps and after.fits and after.peak <= small.hardware.usable_bytes
    assert all(o.startswith("--config.") for _, o in steps)


def test_cli_exit_status_and_table(capsys):
    tool = runpy.run_path(str(REPO / "tools" / "plan_memory.py"))
    assert tool["main"]([str(REPO / "configs" / "ppo_qwen3b.py")]) == 0
    out = capsys.readouterr().out
    assert "fits: yes" in out and "KV cache" in out
    args = [str(REPO / "configs" / "grpo_qwen14b.py"), "--hardware=A100-40GB:8"]
    assert tool["main"](args) == 1
    assert "to fit, change" in capsys.readouterr().out


def test_lora_terms_by_hand():
    from memjax.models.lora_config import LoraConfig

    cfg = TINY.replace(lora=LoraConfig(rank=2, alpha=4.0, targets=("q", "down")))
    p = planning.plan(tiny_workload(cfg=cfg))
    # f32 adapters, train layout, bytes per device: q A [2, 8, 2] (embed on fsdp) 64 + B
    # [2, 2, 4, 2] (heads on tensor) 64; down A [2, 16, 2] (mlp on tensor) 128 + B [2, 2, 8]
    # (embed on fsdp) 64.
    assert p.parts["LoRA adapters"] == 64 + 64 + 128 + 64 == 320
    assert p.parts["policy weights"] == 1824  # the frozen base, as before
    assert p.parts["optimizer (AdamW m, v)"] == 2 * 320 and p.parts["gradients"] == 320
    assert "reference model" not in p.parts  # the base with adapters off
    # One layer's matmul outputs gain [b, T, r] and [b, T, out] per target, bf16, with
    # b = micro_batch_per_device x tensor = 2 rows per shard and T = 4:
    # 2 * 4 * ((2 + 4 heads/t * 2) + (2 + 8)) * 2 = 256 over the same plan without LoRA.
    base = planning.plan(tiny_workload(cfg=TINY))
    assert p.parts["activations: one layer"] == base.parts["activations: one layer"] + 256
    # Gathered layer weights without their gradient, plus the adapters' (80 params / t) twice.
    assert p.parts["activations: layer weights"] == (296 + 2 * 40) * 2
    ppo = planning.plan(tiny_workload(cfg=cfg, critic=True, reference=False))
    # The critic trains adapters and its head [8] (embed on fsdp) + bias over the policy's base.
    assert ppo.parts["critic weights + AdamW"] == 3 * (320 + 16 + 4)


def test_lora_switch_in_a_paper_config_and_the_cli(capsys):
    config = runpy.run_path(str(REPO / "configs" / "grpo_qwen7b.py"))["get_config"]()
    full = planning.plan_memory(config)
    config.rl.lora.rank = 16
    assert planning.validate(config) == []
    with_lora = planning.plan_memory(config)
    assert with_lora.workload.cfg.lora.rank == 16
    assert with_lora.peak < full.peak - 20 * hardware.GIB  # AdamW, reference, gradients gone
    tool = runpy.run_path(str(REPO / "tools" / "plan_memory.py"))
    path = str(REPO / "configs" / "grpo_qwen7b.py")
    assert tool["main"]([path, "--lora_rank=16", "--min_devices"]) == 0
    out = capsys.readouterr().out
    assert "LoRA adapters" in out and "fewest devices that fit: 2" in out
    config.rl.lora.targets = "q,qkv"
    assert any("config.rl.lora" in p for p in planning.validate(config))
