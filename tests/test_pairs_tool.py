"""tools/benchmarks/pairs.py: step-by-step alternation and the median of per-pair ratios; the
`tools/bench.py` command every benchmark runs under."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools.benchmarks import pairs

ROOT = Path(__file__).resolve().parents[1]


def test_alternate_runs_a_and_b_in_turn():
    calls = []
    times = pairs.alternate(lambda: calls.append("a"), lambda: calls.append("b"), pairs=3)
    assert calls == ["a", "b", "a", "b", "a", "b"]
    assert len(times.a_s) == len(times.b_s) == 3
    with pytest.raises(ValueError, match="pairs"):
        pairs.alternate(lambda: None, lambda: None, pairs=0)


def test_median_of_per_pair_ratios_resists_a_load_on_one_pair():
    # The peer takes 2 s and memjax 1 s, except in pair 2, where a load doubled memjax's time:
    # a ratio of totals would say 1.67; the median per-pair ratio stays at 2.
    t = pairs.PairedTimes(a_s=(1.0, 2.0, 1.0, 1.0, 1.0), b_s=(2.0, 2.0, 2.0, 2.0, 2.0))
    assert t.ratios() == [2.0, 1.0, 2.0, 2.0, 2.0]
    s = t.summary()
    assert (s["ratio"], s["ratio_min"], s["ratio_max"], s["pairs"]) == (2.0, 1.0, 2.0, 5)
    assert (s["ratio_q1"], s["ratio_q3"]) == (2.0, 2.0)
    assert (s["memjax_median_s"], s["peer_median_s"]) == (1.0, 2.0)
    assert "ratio 2.000 (median of 5 pairs; min 1.000" in pairs.format_summary(s)
    one = pairs.PairedTimes(a_s=(2.0,), b_s=(1.0,)).summary()
    assert (one["ratio"], one["ratio_q1"], one["ratio_q3"]) == (0.5, 0.5, 0.5)


def test_load_average_has_three_numbers():
    load = pairs.load_average()
    assert len(load) == 3 and all(x >= 0 for x in load)


def test_rotate_changes_who_goes_first_every_round():
    calls = []
    times = pairs.rotate({n: (lambda n=n: calls.append(n)) for n in "abc"}, rounds=3)
    assert calls == list("abcbcacab")
    assert {n: len(t) for n, t in times.items()} == {"a": 3, "b": 3, "c": 3}
    assert pairs.paired_ratio([2.0, 4.0, 3.0], [1.0, 1.0, 1.0]) == {
        "median": 3.0,
        "min": 2.0,
        "max": 4.0,
    }


def _bench_module():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import bench
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return bench


def test_every_benchmark_is_a_subcommand_with_the_shared_interface():
    bench = _bench_module()
    modules = {p.stem for p in (ROOT / "tools" / "benchmarks").glob("*.py")}
    assert set(bench.BENCHMARKS) == modules - {"__init__", "pairs"}
    for name in bench.BENCHMARKS:
        module = bench._module(name)
        assert callable(module.add_arguments) and callable(module.main), name
        assert bench._summary(name), f"{name} has no docstring"
    argv = ["forward", "--pairs", "2"]
    args = bench.parser(argv).parse_args(argv)
    assert (args.name, args.pairs, args.batch) == ("forward", 2, 8)


def test_bench_prints_the_report_as_its_last_line(monkeypatch, capsys):
    bench = _bench_module()

    class Fake:
        def add_arguments(parser):
            parser.add_argument("--pairs", type=int, default=3)

        def main(args):
            print("progress")
            return {"pairs": args.pairs, "ratio": 1.5}

    monkeypatch.setattr(bench, "_module", lambda name: Fake)
    assert bench.main(["forward", "--pairs", "4"]) == {"pairs": 4, "ratio": 1.5}
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "progress" and json.loads(lines[-1]) == {"pairs": 4, "ratio": 1.5}


def test_bench_command_lists_the_benchmarks_and_refuses_an_unknown_name(tmp_path):
    run = [sys.executable, str(ROOT / "tools" / "bench.py")]
    listing = subprocess.run([*run, "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert listing.returncode == 0 and "rl_shared_prefix" in listing.stdout
    bad = subprocess.run([*run, "nope"], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "invalid choice: 'nope'" in bad.stderr
