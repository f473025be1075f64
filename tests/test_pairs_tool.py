"""tools/_pairs.py: step-by-step alternation and the median of per-pair ratios."""

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "tools" / "_pairs.py"
_SPEC = importlib.util.spec_from_file_location("_pairs", _PATH)
pairs = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("_pairs", pairs)  # dataclasses look their module up there
_SPEC.loader.exec_module(pairs)


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
