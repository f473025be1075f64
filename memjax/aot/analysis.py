"""What a compiled program says about itself: memory per device, collectives, costs.

    report = analyse(program, compiled, target, compile_s)   # a flat dict, JSON-ready

Memory is XLA's `memory_analysis()` of the compiled executable (argument, output, alias and
temporary bytes per device), held against the planner's figure for the same part and against
the device's usable HBM (`hardware.USABLE_FRACTION`), counting what else the planner says is
resident at the time (e.g. the sampler's weights during a train step). Collectives are read
from the optimized HLO text. XLA's `cost_analysis()` counts a while-loop body once (the
micro-batch scan, the layer scan, the decode loop), so the roofline comes from the model's
FLOPs and the bytes the call must stream (weights, optimizer state, KV cache), not from it.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from memjax import hardware as hw_lib
from memjax.aot.programs import Program
from memjax.aot.targets import Target
from memjax.models.params import is_info

GAP_TOLERANCE = 0.15  # planner vs compiler: a larger relative gap is a finding
COLLECTIVES = (
    "all-gather",
    "reduce-scatter",
    "all-reduce",
    "all-to-all",
    "collective-permute",
)
_DTYPE_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
    "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8,
}  # fmt: skip
_OP = re.compile(
    r"=\s*(?P<shape>\(?[a-z0-9]+\[[^=]*?)\s+(?P<op>"
    + "|".join(COLLECTIVES)
    + r")(?P<start>-start)?\("
)
_ARRAY = re.compile(r"([a-z]+[0-9]*)\[([0-9,]*)\]")


def _arrays(shape_text: str) -> list[tuple[str, tuple[int, ...]]]:
    out = []
    for dtype, dims in _ARRAY.findall(shape_text):
        if dtype in _DTYPE_BYTES:
            out.append((dtype, tuple(int(d) for d in dims.split(",") if d)))
    return out


def _nbytes(dtype: str, dims: tuple[int, ...]) -> int:
    return int(np.prod(dims, dtype=np.int64)) * _DTYPE_BYTES[dtype]


def collectives(hlo_text: str) -> list[dict]:
    """Every collective in the optimized HLO: kind, result shape and bytes. An async `-start`
    op's result tuple holds its operand and its result; the larger is counted."""
    found = []
    for m in _OP.finditer(hlo_text):
        arrays = _arrays(m.group("shape"))
        if not arrays:
            continue
        if m.group("start"):
            arrays = [max(arrays, key=lambda a: _nbytes(*a))]
        for dtype, dims in arrays:
            found.append(
                {
                    "op": m.group("op"),
                    "shape": f"{dtype}[{','.join(map(str, dims))}]",
                    "dims": dims,
                    "bytes": _nbytes(dtype, dims),
                }  # fmt: skip
            )
    return found


_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?(?P<name>[\w.\-]+)\s.*\{\s*$")
_CALLS = re.compile(r"\bfusion\(.*?calls=%?(?P<name>[\w.\-]+)")
_RESULT = re.compile(r"^\s*(ROOT\s+)?%?[\w.\-]+\s*=\s*(?P<shape>\(?[a-z0-9]+\[[^=]*?)\s+[\w\-]+\(")
_CUSTOM_CALL = re.compile(r'custom_call_target="(?P<target>[^"]+)"')


def _computations(hlo_text: str) -> dict[str, list[str]]:
    """The HLO module's computations: name -> its instruction lines."""
    out: dict[str, list[str]] = {}
    current = None
    for line in hlo_text.splitlines():
        m = _COMPUTATION.match(line)
        if m and not line.startswith(" "):
            current = m.group("name")
            out[current] = []
        elif line.startswith("}"):
            current = None
        elif current is not None:
            out[current].append(line)
    return out


def custom_calls(hlo_text: str) -> dict[str, int]:
    """Custom-call targets in the compiled HLO (cuDNN's fused attention is
    `__cudnn$fmha...`), with their counts."""
    found: dict[str, int] = defaultdict(int)
    for m in _CUSTOM_CALL.finditer(hlo_text):
        found[m.group("target")] += 1
    return dict(found)


# Custom calls that are fused-attention kernels: cuDNN's flash attention (`__cudnn$fmha*`,
# forward and backward), and Pallas kernels (Mosaic on TPU: splash; Triton on GPU).
_FUSED_KERNELS = ("fmha", "tpu_custom_call", "triton")


def fused_attention_calls(hlo_text: str) -> dict[str, int]:
    """The fused kernels a compiled program calls, by custom-call target."""
    calls = custom_calls(hlo_text).items()
    return {k: v for k, v in calls if any(f in k.lower() for f in _FUSED_KERNELS)}


def materialised_scores(hlo_text: str, length: int, widths: tuple[int, ...] = ()) -> list[str]:
    """Buffers an attention over `length` tokens would hold as a [..., T, T] score or mask
    matrix: results with two dimensions equal to `length` and rank >= 3 (rank >= 4, or a
    boolean mask, when `length` is also one of the model's feature `widths`: a [B, T, D]
    activation with D = T is no score matrix), written by instructions outside fusion bodies
    (a fusion's own intermediates stay in registers and shared memory; only what an
    instruction of a non-fused computation produces is a buffer in HBM)."""
    if length <= 1:
        return []
    comps = _computations(hlo_text)
    calls = (_CALLS.search(line) for lines in comps.values() for line in lines)
    fused = {m.group("name") for m in calls if m}
    ambiguous = length in widths
    shapes = set()
    for name, lines in comps.items():
        if name in fused:
            continue
        for line in lines:
            m = _RESULT.match(line)
            if not m:
                continue
            for dtype, dims in _arrays(m.group("shape")):
                if len(dims) < 3 or dims.count(length) < 2:
                    continue
                if ambiguous and len(dims) < 4 and dtype != "pred":
                    continue
                shapes.add(f"{dtype}[{','.join(map(str, dims))}]")
    return sorted(shapes)


def collective_summary(found: list[dict], top: int = 3) -> dict:
    by_kind: dict[str, dict] = defaultdict(lambda: {"count": 0, "bytes": 0})
    for c in found:
        by_kind[c["op"]]["count"] += 1
        by_kind[c["op"]]["bytes"] += c["bytes"]
    largest = sorted(found, key=lambda c: -c["bytes"])[:top]
    return {
        "by_kind": dict(by_kind),
        "largest": [f"{c['op']} {c['shape']} ({c['bytes'] / 2**20:.1f} MiB)" for c in largest],
    }


def gathered_whole(found: list[dict], abstract, shard_count) -> list[str]:
    """Parameters an all-gather rebuilds at their full, unsharded shape although the rules
    shard them: with stacked layers that is every layer's copy at once, not one per step of
    the layer scan (`shard_count(info)`: the pieces the rules cut it into)."""
    if not abstract:
        return []
    gathered = {c["dims"] for c in found if c["op"] == "all-gather"}
    flagged = []
    leaves = _named_leaves(abstract)
    for name, info in leaves:
        if tuple(info.shape) in gathered and shard_count(info) > 1 and len(info.shape) > 1:
            flagged.append(f"{name} {list(info.shape)}")
    return flagged


def _named_leaves(tree, prefix=""):
    if is_info(tree):
        return [(prefix.rstrip("/"), tree)]
    out = []
    for k, v in tree.items():
        out += _named_leaves(v, f"{prefix}{k}/")
    return out


def replicated_inputs(compiled, expected) -> list[str]:
    """Inputs the executable takes fully replicated where the job meant them sharded."""
    import jax

    got = jax.tree.leaves(compiled.input_shardings[0])
    want = jax.tree.leaves(expected, is_leaf=lambda x: hasattr(x, "sharding"))
    out = []
    for i, (g, w) in enumerate(zip(got, want)):
        sharded = not w.sharding.is_fully_replicated
        if sharded and g.is_fully_replicated:
            out.append(f"input {i} {list(w.shape)}")
    return out


def _gap(compiled_bytes: int, planned: int | None):
    if planned is None:
        return None
    return (planned - compiled_bytes) / max(compiled_bytes, 1)


def analyse(program: Program, compiled, target: Target, compile_s: float, shard_count) -> dict:
    mem = compiled.memory_analysis()
    args = int(mem.argument_size_in_bytes)
    outs = int(mem.output_size_in_bytes)
    alias = int(mem.alias_size_in_bytes)
    temp = int(mem.temp_size_in_bytes)
    footprint = args + outs - alias + temp
    usable = target.hardware.usable_bytes
    resident = footprint + max(program.resident_elsewhere, 0)
    planner = program.planner
    gaps = {
        "arguments": _gap(args, planner.get("arguments")),
        "outputs": _gap(outs, planner.get("outputs")),
        "temporaries": _gap(temp, planner.get("temporaries")),
        "working set": _gap(footprint - args, planner.get("working set")),
    }
    hlo = compiled.as_text()
    found = collectives(hlo)
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    compute_s = program.hardware_flops / target.peak_flops if target.peak_flops else 0.0
    memory_s = program.hbm_traffic / target.hbm_bytes_per_s if target.hbm_bytes_per_s else 0.0
    step_s = max(compute_s, memory_s)
    mfu = program.model_flops / (step_s * target.peak_flops) if step_s else 0.0
    return {
        "function": program.name,
        "compile_s": round(compile_s, 1),
        "argument_bytes": args,
        "output_bytes": outs,
        "alias_bytes": alias,
        "temp_bytes": temp,
        "footprint_bytes": footprint,
        "working_set_bytes": footprint - args,  # new outputs + temporaries
        "planner": dict(planner),
        "planner_gap": {k: (round(v, 3) if v is not None else None) for k, v in gaps.items()},
        "planner_off": sorted(
            k for k, v in gaps.items() if v is not None and abs(v) > GAP_TOLERANCE
        ),
        "resident_bytes": resident,
        "usable_bytes": usable,
        "fits": resident <= usable,
        "collectives": collective_summary(found),
        "gathered_whole": gathered_whole(found, program.params, shard_count),
        "fused_attention": fused_attention_calls(hlo),
        "attention_len": program.attention_len,
        "score_buffers": materialised_scores(hlo, program.attention_len, program.widths),
        "replicated_inputs": replicated_inputs(compiled, program.args),
        "xla_flops": float(cost.get("flops", 0.0)) if cost else 0.0,
        "xla_bytes_accessed": float(cost.get("bytes accessed", 0.0)) if cost else 0.0,
        "model_flops": program.model_flops,
        "roofline_s": step_s,
        "roofline_bound": "compute" if compute_s >= memory_s else "memory",
        "roofline_mfu": round(mfu, 4),
    }


_NEEDED = re.compile(r"HLO temporaries \(([0-9.]+)([KMGT])\)")


def rejected(program: Program, target: Target, error: Exception, compile_s: float) -> dict:
    """The report of a program the compiler refused for lack of memory (RESOURCE_EXHAUSTED):
    it does not fit, and the compiler's figure for its temporaries is in the message."""
    text = str(error).splitlines()[0]
    m = _NEEDED.search(text)
    scale = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    temp = int(float(m.group(1)) * scale[m.group(2)]) if m else 0
    return {
        "function": program.name,
        "compile_s": round(compile_s, 1),
        "compile_error": text,
        "argument_bytes": 0,
        "output_bytes": 0,
        "alias_bytes": 0,
        "temp_bytes": temp,
        "footprint_bytes": temp,
        "working_set_bytes": temp,
        "planner": dict(program.planner),
        "planner_gap": {"temporaries": _gap(temp, program.planner.get("temporaries"))},
        "planner_off": [],
        "resident_bytes": temp + max(program.resident_elsewhere, 0),
        "usable_bytes": target.hardware.usable_bytes,
        "fits": False,
        "collectives": {"by_kind": {}, "largest": []},
        "gathered_whole": [],
        "replicated_inputs": [],
        "fused_attention": {},
        "attention_len": getattr(program, "attention_len", 0),
        "score_buffers": [],
        "roofline_mfu": 0.0,
        "roofline_bound": "-",
    }


def gib(b: float) -> str:
    return f"{b / hw_lib.GIB:.2f}"


def table_row(r: dict) -> str:
    """function | compiled args/out/temp GiB | planner | fits | largest collective | MFU."""
    p = r["planner"]
    plan = "/".join(gib(p[k]) if k in p else "-" for k in ("arguments", "outputs", "temporaries"))
    comp = "/".join(gib(r[k]) for k in ("argument_bytes", "output_bytes", "temp_bytes"))
    if "working set" in p:  # a step not donating: outputs + temporaries are compared together
        comp, plan = (
            f"{comp} (out+temp {gib(r['working_set_bytes'])})",
            f"{plan} (out+temp {gib(p['working set'])})",
        )
    largest = r["collectives"]["largest"][0] if r["collectives"]["largest"] else "none"
    off = ",".join(r["planner_off"]) or "-"
    return (
        f"| {r['function']} | {comp} | {plan} | {off} | {gib(r['resident_bytes'])} of "
        f"{gib(r['usable_bytes'])} {'yes' if r['fits'] else 'NO'} | {largest} | "
        f"{attention_cell(r)} | {r['roofline_mfu']:.2f} ({r['roofline_bound']}) |"
    )


def attention_cell(r: dict) -> str:
    """The fused kernels called (count) and any [T, T] score buffer, for a table cell."""
    kernels = ", ".join(f"{k} x{v}" for k, v in r.get("fused_attention", {}).items()) or "none"
    scores = r.get("score_buffers", [])
    return kernels + (f"; [T,T] scores {', '.join(scores)}" if scores else "")


TABLE_HEADER = (
    "| function | compiled args/out/temp GiB | planner args/out/temp GiB | planner off >15% "
    "| resident GiB of usable, fits | largest collective | fused attention kernels "
    "| roofline MFU |\n"
    "|---|---|---|---|---|---|---|---|"
)

__all__ = [
    "GAP_TOLERANCE",
    "analyse",
    "rejected",
    "collectives",
    "collective_summary",
    "gathered_whole",
    "table_row",
    "TABLE_HEADER",
]
