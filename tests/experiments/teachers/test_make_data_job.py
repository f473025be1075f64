"""`sft.make_data` end to end on tiny data: the packaged MiniLM embeds the banks and the
corpus, the packaged SmolLM2 tokenizer counts tokens; the files are written and describe the
kept trajectories."""

import json
import runpy
from pathlib import Path

import pytest

from memjax import jobs
from memjax.errors import DataError
from memjax.experiments.teachers.trajectory import read_trajectories
from tests.experiments.teachers.fixtures import write_hotpot

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "sft_data_cpu.py"


def tiny_config(tmp_path):
    config = runpy.run_path(str(CONFIG))["get_config"]()
    config.synthetic.num_conversations = 2
    config.answer_data = "synthetic"
    config.hotpotqa.path = str(write_hotpot(tmp_path / "hotpot.jsonl"))
    config.retriever.corpus = str(tmp_path / "corpus.jsonl")
    config.retriever.index_dir = str(tmp_path / "index")
    config.output_dir = str(tmp_path / "out")
    return config


@pytest.mark.heavy
def test_make_data_writes_trajectories_and_summary(tmp_path, capsys):
    config = tiny_config(tmp_path)
    summary = jobs.resolve("sft.make_data")(config, str(tmp_path / "work"))
    out = Path(config.output_dir)
    written = json.loads((out / "summary.json").read_text())
    assert written == json.loads(json.dumps(summary))
    trajectories = read_trajectories(out / "trajectories.jsonl")
    by_role = {}
    for t in trajectories:
        by_role.setdefault(t.role, []).append(t)
    assert set(by_role) == {"facts", "manager", "answer", "memsearcher", "search_r1"}
    for role, stats in written["roles"].items():
        assert stats["kept"] == len(by_role[role]) > 0
        assert stats["keep_rate"] == 1.0, (role, stats["reject_reasons"])
        tokens = written["tokens"][role]
        assert tokens["rows"] == sum(len(t.contexts) for t in by_role[role])
        assert 0 < tokens["trained_tokens"] < tokens["tokens"]
    # Splits are named in the output and on every trajectory; HotpotQA's train part is what
    # memsearcher.eval does not hold out (2 of the 3 questions, cut by id), never the other.
    from memjax.data.splits import held_out_ids
    from tests.experiments.teachers.fixtures import HOTPOT_ROWS

    all_ids = [r["id"] for r in HOTPOT_ROWS]
    train_ids = set(all_ids) - held_out_ids(all_ids, 0.2, 0)
    name = "memsearcher:hotpotqa:train_2_of_3_by_id(seed 0)"
    assert written["splits"][name] == {"questions": 2}
    assert written["splits"]["manager:synthetic:train_seed1000"] == {"conversations": 2}
    assert {t.source["question_id"] for t in by_role["search_r1"]} == train_ids
    assert all(t.split for t in trajectories)
    assert not list(out.glob("*.tmp"))  # written atomically
    printed = capsys.readouterr().out
    assert "memsearcher: kept 2/2 (100.0%)" in printed


def test_bad_config_values_name_the_field(tmp_path):
    config = tiny_config(tmp_path)
    config.roles = "manager,planner"
    with pytest.raises(ValueError, match="config.roles"):
        jobs.resolve("sft.make_data")(config, str(tmp_path))
    config.roles = "search_r1"
    config.hotpotqa.path = str(tmp_path / "missing.jsonl")
    with pytest.raises(DataError, match="config.hotpotqa.path"):
        jobs.resolve("sft.make_data")(config, str(tmp_path))
    config.roles, config.answer_data = "answer", "synthetic,msc"
    with pytest.raises(ValueError, match="config.answer_data"):
        jobs.resolve("sft.make_data")(config, str(tmp_path))
    config.answer_data, config.teacher.kind = "synthetic", "gpt"
    with pytest.raises(ValueError, match="config.teacher.kind"):
        jobs.resolve("sft.make_data")(config, str(tmp_path))
