"""Every `memjax.launch` command in README.md and docs/ runs as written, under `--dry_run`.

Each command is parsed as the launcher parses it (the config file locked, every `--config.*`
override applied: one that names no field fails), its job's checks run, the model weights it
names that are not on this machine are pointed at a tiny stand-in (an HF checkpoint saved by
tests/models/hf_fixtures.py), and the dry run must pass: weights present and, where the config
names hardware, a memory plan that fits. The data, corpus, index, URL and workdir checks are
not run here (the papers' datasets are not on a test machine; tests/test_input_checks.py
holds those checks to their own cases).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from absl import flags
from ml_collections import config_flags

from memjax import dry_run, input_checks, launch
from tests.doc_commands import doc_commands

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = doc_commands(ROOT)


def parse(argv: list[str]):
    """(config, workdir, config file) as `memjax.launch` parses `argv` (its own flags)."""
    fv, full = flags.FlagValues(), ["memjax.launch", *argv, "--dry_run"]
    config_flags.DEFINE_config_file(
        "config", None, "", flag_values=fv, lock_config=True, sys_argv=full
    )
    flags.DEFINE_string("workdir", None, "", flag_values=fv)
    flags.DEFINE_bool("dry_run", False, "", flag_values=fv)
    fv(full)
    return fv.config, fv.workdir, config_flags.get_config_filename(fv["config"])


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    from tests.models.hf_fixtures import make_hf_model

    root = tmp_path_factory.mktemp("stand_ins")
    make_hf_model("qwen2_tied").save_pretrained(root / "model")
    (root / "model" / "tokenizer.json").write_text("{}")
    index = root / "index" / "snapshot-0"
    index.mkdir(parents=True)
    (index / "meta.json").write_text(json.dumps({"documents": 1}))
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield {
        "root": root,
        "model": str(root / "model"),
        "index": str(root / "index"),
        "url": f"http://127.0.0.1:{server.getsockname()[1]}",
    }
    server.close()


def stand_in(missing: input_checks.Missing, s: dict) -> str:
    name = missing.field.rsplit(".", 1)[-1]
    if name in ("source", "trained"):
        return s["model"]
    if missing.field == "retriever.url":
        return s["url"]
    if name == "index_dir":
        return s["index"]
    file = s["root"] / "files" / missing.field / (Path(missing.value).name or "data.jsonl")
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text('{"id": "q0", "question": "?", "golden_answers": ["a"]}\n')
    return str(file)


def test_the_docs_have_commands():
    assert len(COMMANDS) >= 5, [str(c) for c in COMMANDS]
    assert any("configs/grpo_qwen7b.py" in " ".join(c.argv) for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.where)
def test_a_documented_command_passes_its_dry_run(command, stand_ins, monkeypatch, capsys):
    from memjax import job_checks

    monkeypatch.setattr(job_checks, "INPUT_CHECKS", {})
    monkeypatch.setattr(job_checks, "check_workdir", lambda workdir: None)
    monkeypatch.chdir(ROOT)
    try:
        config, workdir, config_file = parse(command.argv)
    except flags.Error as e:
        pytest.fail(f"{command}\n  its options do not parse: {e}")
    launch.check(config)  # a ConfigError fails the test with the field it names
    for missing in input_checks.check_weights(config):
        path, leaf = missing.field.rpartition(".")[::2]
        node = config
        for key in filter(None, path.split(".")):
            node = node[key]
        node[leaf] = stand_in(missing, stand_ins)
    status = dry_run.run(config, config_file, workdir)
    out = capsys.readouterr()
    assert status == 0, f"{command}\n{out.out}\n{out.err}"
    assert out.out.startswith(f"dry run of {config_file}")
