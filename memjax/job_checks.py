"""Each job's config and inputs checked at launch, before anything loads: a bad value fails in
the first second with its field and the allowed range, not minutes later with an unrelated error.

    check_job_config("memory_r1.train_answer", config)     # raises memjax.errors.ConfigError
    check_inputs("memsearcher.eval", config, workdir)     # data files, corpus, index, URL, ...

The trainer sections are read into their typed configs (`RLRunConfig`, `SFTRunConfig`), which
check their own bounds; the other sections' sizes are checked here by dotted path.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from memjax.errors import ConfigError, DataError, StaleArtefactError
from memjax.fingerprint import describe
from memjax.workdir import is_remote


def _lookup(config, dotted: str):
    node = config
    for key in dotted.split("."):
        if not hasattr(node, "keys") or key not in node:
            return None
        node = node[key]
    return node


def at_least(config, low: int, paths: Iterable[str]) -> None:
    """Every present field of `paths` is an integer >= low."""
    for path in paths:
        v = _lookup(config, path)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or float(v) != int(v):
            raise ConfigError(f"config.{path}={v!r}: expected an integer >= {low}")
        if v < low:
            raise ConfigError(f"config.{path}={v!r}: must be >= {low}")


def one_of(config, path: str, choices: Iterable[str]) -> None:
    """The field at `path`, when present, is one of `choices`."""
    v, choices = _lookup(config, path), tuple(choices)
    if v is not None and v not in choices:
        raise ConfigError(f"config.{path}={v!r}: expected one of {', '.join(choices)}")


def _memory_r1_sections(config) -> None:
    at_least(
        config,
        1,
        (
            "construction.related_k",
            "construction.fact_max_new_tokens",
            "construction.manager_max_new_tokens",
            "construction.batch_size",
            "construction.max_prompt_tokens",
            "answer_agent.k_per_speaker",
            "answer_agent.max_new_tokens",
            "answer_agent.batch_size",
            "judge.max_new_tokens",
            "snapshots.window",
            "data.synthetic.num_conversations",
            "data.synthetic.sessions_per_conversation",
        ),
    )
    at_least(
        config,
        0,
        (
            "construction.fact_context_turns",
            "construction.checkpoint_every",
            "construction.engine_slots",
            "data.max_questions",
        ),
    )
    from memjax.agents.memory_r1.bank_builders import POLICY, builder
    from memjax.agents.memory_r1.rewards import REWARD_METRICS

    one_of(config, "answer_agent.metric", REWARD_METRICS)

    builder(str(config.construction.get("builder", POLICY)), str(config.data.path))


def _memory_r1_train(config) -> None:
    from memjax.rl.run_config import RLRunConfig

    _memory_r1_sections(config)
    RLRunConfig.from_section(config.rl, "config.rl")
    check_decode_wave(config, "rl", "rl.mesh")


def check_decode_wave(config, section: str, mesh_path: str) -> None:
    """`<section>.decode_batch` rows are whole groups split evenly over the mesh's data x fsdp,
    with a -1 axis sized from `hardware.num_devices` where the config names its hardware (a
    launcher's retarget to a slice sets fsdp=-1)."""
    from memjax.planning import PlanError, resolve_mesh
    from memjax.rl.run_config import wave_problem

    decode = int(_lookup(config, f"{section}.decode_batch") or 0)
    mesh = dict(_lookup(config, mesh_path) or {})
    devices = _lookup(config, "hardware.num_devices")
    if mesh and devices and -1 in mesh.values():
        try:
            mesh = resolve_mesh(mesh, int(devices))
        except PlanError:  # the plan's own check names that mesh
            return
    problem = wave_problem(decode, int(_lookup(config, f"{section}.group_size") or 1), mesh)
    if problem is not None:
        raise ConfigError(f"config.{section}.decode_batch={decode}: {problem}")


def _memory_r1_eval(config) -> None:
    _memory_r1_sections(config)


def _memory_r1_demo(config) -> None:
    _memory_r1_train(config)
    at_least(
        config,
        1,
        ("demo.train_conversations", "demo.eval_conversations", "demo.sessions_per_conversation"),
    )
    at_least(config, 0, ("demo.max_eval_examples",))
    from memjax.experiments.demo import DemoSettings

    DemoSettings.from_config(config)  # the job's own reader: no unknown or mistyped field


def _memsearcher(config) -> None:
    at_least(
        config,
        1,
        (
            "agent.memory_cap_tokens",
            "agent.max_turns_train",
            "agent.max_turns_eval",
            "rollout.group_size",
            "rollout.max_tokens_per_call",
            "rollout.max_prompt_length",
            "rollout.max_response_length",
            "eval_sampling.max_tokens_per_call",
            "eval.batch_size",
            "eval.max_context_tokens",
            "retriever.default_top_n",
            "retriever.max_top_n",
            "train.batch_size",
            "train.mini_batch_size",
            "train.ppo_epochs",
            "train.micro_batches",
            "train.vocab_chunk",
        ),
    )
    at_least(config, 0, ("data.max_examples", "train.num_steps", "eval.engine_slots"))
    if _lookup(config, "eval.batch_size") is not None:
        from memjax.agents.memsearcher.agent_factory import eval_batch_sizes

        eval_batch_sizes(config.eval)  # "agent=N,..." well formed


def _memsearcher_train(config) -> None:
    from memjax.agents.memsearcher.run_settings import RolloutSettings, TrainSettings
    from memjax.agents.memsearcher.train_job import trainer_config
    from memjax.models.lora_config import lora_from_section
    from memjax.rl.losses import PolicyLossConfig
    from memjax.training.sections import read_section
    from memjax.training.states import optimizer_from

    _memsearcher(config)
    check_decode_wave(config, "rollout", "mesh")
    # Checked here against the config's own mesh: the trainer drops a mesh on a one-device
    # machine, so a dry run there would not see the clash the cluster would.
    mesh = config.get("mesh") or {}
    if config.rollout.get("engine", False) and any(int(v) != 1 for v in mesh.values()):
        raise ConfigError(
            f"config.rollout.engine=True: the rollout engine runs on one device, unsharded, "
            f"and config.mesh={dict(mesh)} spans several; unset the mesh or set "
            "rollout.engine=False"
        )
    # The sections the trainer takes over whole, named where the user sets them (the
    # translated section below would name them under config.train).
    optimizer_from(config.optimizer, "config.optimizer", 1)
    read_section(PolicyLossConfig, config.loss, "config.loss")
    lora_from_section(config.get("lora"), "config")
    train, rollout = TrainSettings.from_config(config), RolloutSettings.from_section(config.rollout)
    trainer_config(train, rollout, int(config.train.batch_size))  # the trainer's own checks


def _toy_rl(config) -> None:
    from memjax.rl.run_config import RLRunConfig

    at_least(
        config,
        1,
        ("model.vocab_size", "model.embed_dim", "model.mlp_dim", "model.num_layers")
        + ("model.num_heads", "model.num_kv_heads", "task.num_targets", "task.length"),
    )
    RLRunConfig.from_section(config)


def _sft(config) -> None:
    from memjax.sft.run_config import SFTRunConfig

    if not str(_lookup(config, "data.train") or ""):
        raise ConfigError("config.data.train: the trajectory jsonl to train on is required")
    SFTRunConfig.from_section(config.sft, "config.sft")
    kind = _lookup(config, "task_eval.kind")
    if kind not in (None, "none", "search_agent"):
        raise ConfigError(f"config.task_eval.kind={kind!r}: choose none or search_agent")
    at_least(config, 1, ("task_eval.max_examples",))
    at_least(config, 0, ("data.max_per_role",))


def _memory_serve(config) -> None:
    from memjax.serving.memory_job import serve_settings

    # The banks' root may come from --workdir, which the job itself checks when it starts.
    serve_settings(config, workdir="<workdir>")


def _memory_serve_inputs(config) -> None:
    from memjax.serving.memory_job import serve_settings

    _, memory = serve_settings(config, workdir="<workdir>")
    memory.check_sources()  # every role's model path, before any is loaded


def _openai_serve(config) -> None:
    from memjax.serving.openai_job import serve_config

    serve_config(config)  # every server field, engine settings included


CHECKS: dict[str, Callable] = {
    "memory.serve": _memory_serve,
    "serve.openai": _openai_serve,
    "rl.train": _toy_rl,
    "sft.train": _sft,
    "memory_r1.build_banks": _memory_r1_eval,
    "memory_r1.eval": _memory_r1_eval,
    "memory_r1.train_manager": _memory_r1_train,
    "memory_r1.train_answer": _memory_r1_train,
    "memory_r1.demo": _memory_r1_demo,
    "memsearcher.train": _memsearcher_train,
    "memsearcher.eval": _memsearcher,
}


def check_job_config(job: str, config) -> None:
    """Raises ConfigError for the first bad field of `job`'s config; jobs without a schema
    here check their own few fields when they start."""
    check = CHECKS.get(job)
    if check is not None:
        check(config)


# ---------------------------------------------------------------- inputs, before any work
# Each check reads only what it names (a file's first record, an index's meta.json, one
# request to a server) and raises a UserError whose message names the file, field or URL.

URL_TIMEOUT_S = 5.0


def check_config_file(path: str) -> str | None:
    """Why the config file cannot give a config (missing, unreadable, not Python, no
    `get_config`), as one line naming it; None when it can."""
    import ast

    file = Path(path).expanduser()
    if not file.is_file():
        return f"--config={path}: no such file"
    try:
        tree = ast.parse(file.read_bytes(), filename=str(file))
    except SyntaxError as e:
        return f"{path}:{e.lineno}: not valid Python ({e.msg})"
    except (OSError, ValueError) as e:
        return f"--config={path}: unreadable ({e})"
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    if "get_config" not in names:
        return f"{path}: defines no get_config() returning the config"
    return None


def check_workdir(workdir: str | None) -> None:
    """The output directory can be written (or made): a directory is made and removed in it,
    or in its nearest existing ancestor, so that what the permission bits do not show (a
    read-only mount, /proc) is caught too. A gs:// workdir is checked by `memjax.workdir`."""
    if not workdir or is_remote(workdir):
        return
    path = Path(workdir).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--workdir={workdir}: exists and is not a directory")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"--workdir={workdir}: {existing} is not a directory")
    try:
        with tempfile.TemporaryDirectory(dir=existing):
            pass
    except OSError as e:
        where = "" if existing == path else f" (nothing can be made in {existing})"
        raise ConfigError(f"--workdir={workdir}: not writable{where}: {e.strerror}") from None


def check_corpus_file(path: str, field: str) -> None:
    """A corpus jsonl exists and its first record is {"id", "contents": str}."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataError(f"config.{field}={path!r}: no such corpus file")
    with file.open("rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except ValueError as e:
                raise DataError(f"{file}:{line_no}: not a JSON corpus record ({e})") from None
            if not isinstance(row, dict) or not isinstance(row.get("contents"), str):
                raise DataError(f'{file}:{line_no}: a corpus record is {{"id", "contents": str}}')
            if "id" not in row:
                raise DataError(f'{file}:{line_no}: a corpus record needs an "id"')
            return
    raise DataError(f"config.{field}={path!r}: the corpus is empty")


def check_retriever_url(url: str, field: str = "retriever.url") -> None:
    """Something answers POST <url>/retrieve (Search-R1's route, memjax's server) with JSON
    results, within a few seconds."""
    import urllib.error
    import urllib.request

    body = json.dumps({"queries": ["memjax input check"], "topk": 1}).encode()
    request = urllib.request.Request(
        url.rstrip("/") + "/retrieve", body, {"Content-Type": "application/json"}
    )
    where = f"config.{field}={url!r}"
    try:
        with urllib.request.urlopen(request, timeout=URL_TIMEOUT_S) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as e:
        raise ConfigError(f"{where}: POST /retrieve answered HTTP {e.code}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise ConfigError(f"{where}: no retrieval server answers ({reason})") from None
    except ValueError:
        raise ConfigError(f"{where}: POST /retrieve did not answer JSON") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("result"), list):
        raise ConfigError(f'{where}: POST /retrieve answered without a "result" list')


def check_search_retriever(config, split: str | None) -> None:
    """MemSearcher's retriever: the server's URL, or the corpus and index as given."""
    from memjax.agents.memsearcher import job_setup

    r = config.retriever
    if r.kind == "http":
        check_retriever_url(str(r.url))
        return
    one_of(config, "retriever.kind", job_setup.RETRIEVER_KINDS)
    if not r.index_dir:
        raise ConfigError("config.retriever.index_dir is empty; the in-process retriever needs it")
    retriever = job_setup.RetrieverSettings.from_section(r)
    data = job_setup.QAData.from_section(config.data)
    corpus, state = (None, None)
    if r.corpus:
        corpus, state = job_setup.closed_corpus_state(retriever, data, split)
        if state == "user":
            check_corpus_file(str(corpus), "retriever.corpus")
    index_state, notes = job_setup.index_state(retriever, corpus if state == "user" else None)
    if index_state == "mismatch":
        raise StaleArtefactError(
            f"config.retriever.index_dir={r.index_dir!r} does not match the config "
            f"({describe(notes)}); point retriever.corpus / retriever.encoder at what built it, "
            "or give another index_dir"
        )
    if state == "stale" or (index_state == "build" and state == "write"):  # will be written
        sources = job_setup.corpus_sources(data, split)
        if not any(q.paragraphs for q in sources):
            names = ", ".join(q.path.name for q in sources)
            raise DataError(
                f"config.retriever.corpus={r.corpus!r}: the question files ({names}) carry no "
                "paragraphs to pool into a closed corpus; give a corpus file"
            )
    if index_state == "build" and not r.corpus:
        raise ConfigError(f"config.retriever.corpus is empty and {r.index_dir} holds no index")


def check_memsearcher_inputs(config, split: str) -> None:
    from memjax.agents.memsearcher import job_setup

    data = job_setup.QAData.from_section(config.data)
    job_setup.load_qa_sets(data, split)  # files, layouts, no empty set, the split rule
    check_search_retriever(config, split)


def check_conversations(config, split: str | None) -> None:
    """Memory-R1: the conversations a job reads have turns and questions."""
    from memjax.agents.memory_r1 import job_setup as S
    from memjax.agents.memory_r1.run_settings import DataSection

    data = DataSection.from_config(config.data)
    chosen = S.select_conversations(S.load_conversations(data), data, split)
    if not chosen:
        raise DataError(f"config.data: no conversations in split {split or data.split!r}")
    for c in chosen:
        if not any(s.turns for s in c.sessions):
            raise DataError(
                f"config.data.path={data.path!r}: conversation {c.sample_id} has no turns in "
                "any session; there is nothing to build its memory bank from"
            )
    if not any(S.questions(c, data) for c in chosen):
        raise DataError(
            f"config.data.path={data.path!r}: the chosen conversations ask no questions"
        )


def _index_build_inputs(config) -> None:
    check_corpus_file(str(config.corpus), "corpus")


def _serve_inputs(config) -> None:
    from memjax.memory.corpus import read_index_meta

    try:
        read_index_meta(config.index_dir)
    except FileNotFoundError:
        raise DataError(f"config.index_dir={config.index_dir!r}: holds no index") from None


INPUT_CHECKS: dict[str, Callable] = {
    "memsearcher.eval": lambda c: check_memsearcher_inputs(c, "eval"),
    "memsearcher.train": lambda c: check_memsearcher_inputs(c, "train"),
    "memory_r1.build_banks": lambda c: check_conversations(c, None),
    "memory_r1.eval": lambda c: check_conversations(c, None),
    "memory_r1.train_manager": lambda c: check_conversations(c, "train"),
    "memory_r1.train_answer": lambda c: check_conversations(c, "train"),
    "index.build": _index_build_inputs,
    "retriever.serve": _serve_inputs,
    "memory.serve": _memory_serve_inputs,
}


def check_inputs(job: str, config, workdir: str | None = None) -> None:
    """Every input of `job` that can be checked without loading a model or embedding anything:
    the output directory, data files, corpus, index and retriever URL. Raises the first
    problem as a UserError (one line naming the file, field or URL)."""
    check_workdir(workdir)
    check = INPUT_CHECKS.get(job)
    if check is not None:
        check(config)


__all__ = [
    "CHECKS",
    "INPUT_CHECKS",
    "at_least",
    "check_config_file",
    "check_decode_wave",
    "check_conversations",
    "check_corpus_file",
    "check_inputs",
    "check_job_config",
    "check_memsearcher_inputs",
    "check_retriever_url",
    "check_search_retriever",
    "check_workdir",
]
