"""tools/check_logits.py on a tiny checkpoint: a pass within tolerance, a failure beyond it."""

import json

from tests.models.hf_fixtures import make_hf_model
from tests.tools_import import load_tool


def test_check_logits_reports_agreement_and_enforces_tolerance(tmp_path, capsys):
    make_hf_model("qwen2_untied").save_pretrained(tmp_path / "ckpt")
    tool = load_tool("check_logits")
    assert tool.main([str(tmp_path / "ckpt"), "--tol", "1e-4"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result) == {"max_abs_diff", "kl", "top1_agreement"}
    assert 0 < result["max_abs_diff"] < 1e-4  # random token ids: the checkpoint has no tokenizer
    assert result["top1_agreement"] == 1.0 and abs(result["kl"]) < 1e-8
    assert tool.main([str(tmp_path / "ckpt"), "--tol", "0"]) == 1
    assert tool.main([str(tmp_path / "missing")]) == 2
