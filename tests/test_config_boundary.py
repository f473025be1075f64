"""Configs become typed settings once, at the job boundary: below it no function takes a
ConfigDict.

A function "takes a config" when a parameter is annotated `ConfigDict` or is named `config`
without an annotation. Only four kinds of function may:
  - a job's entry point (memjax/jobs.py's JOBS), which reads its config and passes typed
    settings down;
  - the config's checkers (the launcher, `--dry_run`, the job and input checks, the memory
    planner), whose work is to read and judge the whole config;
  - a reader, listed below, whose one work is to turn a config into a typed value;
  - the recipes (memjax/recipes/), which write configs: they sit above the boundary.
"""

import ast
from pathlib import Path

from memjax.jobs import JOBS

MEMJAX = Path(__file__).resolve().parents[1] / "memjax"

# Modules that read and judge a whole config (they run before any job does).
CHECKERS = {"launch.py", "job_checks.py", "dry_run.py", "input_checks.py", "planning.py"}

BUILDERS = ("recipes/",)  # modules that write configs

# "module path:function" -> what it returns. Each turns a config into typed settings.
READERS = {
    "aot/programs.py:JobShape.from_config": "JobShape",
    "rl/toy.py:ToyRun.from_config": "ToyRun (the rest of the config is the trainer's)",
    "memory/server.py:_limits": "ServerLimits",
    "serving/openai_job.py:serve_config": "ServeConfig",
    "serving/memory_job.py:serve_settings": "(ServerSettings, MemoryConfig)",
    "training/checkpoint_checks.py:run_spec_from_config": "{dotted field: value} of a run",
    "experiments/reproduce/job.py:plan": "the reproduction's stages, [Stage]",
    "agents/memory_r1/run_settings.py:MemoryR1Run.from_config": "MemoryR1Run",
    "agents/memory_r1/run_settings.py:ModelSpec.from_config": "ModelSpec",
    "agents/memory_r1/run_settings.py:DataSection.from_config": "DataSection",
    "agents/memory_r1/run_settings.py:ConstructionSection.from_config": "ConstructionSection",
    "agents/memory_r1/run_settings.py:AnswerAgentSection.from_config": "AnswerAgentSection",
    "agents/memory_r1/run_settings.py:EmbedderSpec.from_config": "EmbedderSpec",
    "agents/memory_r1/run_settings.py:prompt_templates": "dict[str, PromptTemplate]",
    "experiments/sources.py:synthetic_config": "SyntheticSplitConfig",
    "experiments/demo.py:DemoSettings.from_config": "DemoSettings",
    "agents/memsearcher/qa_sets.py:QAData.from_section": "QAData",
    "agents/memsearcher/job_setup.py:RetrieverSettings.from_section": "RetrieverSettings",
    "agents/memsearcher/job_setup.py:PolicyModel.from_section": "PolicyModel",
    "agents/memsearcher/settings.py:prompt_templates": "dict[str, PromptTemplate]",
    "agents/memsearcher/settings.py:EpisodeSettings.from_config": "EpisodeSettings",
    "agents/memsearcher/agent_factory.py:eval_batch_sizes": "dict[str, int]",
    "agents/memsearcher/run_settings.py:SearchSetup.from_config": "SearchSetup",
    "agents/memsearcher/run_settings.py:RolloutSettings.from_section": "RolloutSettings",
    "agents/memsearcher/run_settings.py:TrainSettings.from_config": "TrainSettings",
    "agents/memsearcher/run_settings.py:EvalSettings.from_config": "EvalSettings",
    "agents/memsearcher/run_settings.py:MemSearcherTrainRun.from_config": "MemSearcherTrainRun",
    "agents/memsearcher/run_settings.py:MemSearcherEvalRun.from_config": "MemSearcherEvalRun",
    "sft/job.py:SFTData.from_section": "SFTData",
    "sft/job.py:SFTModel.from_section": "SFTModel",
    "sft/job.py:SFTJob.from_config": "SFTJob",
    "experiments/teachers/settings.py:MakeDataRun.from_config": "MakeDataRun",
    "experiments/teachers/settings.py:SearchSpec.from_config": "SearchSpec",
}


def _annotation(arg: ast.arg) -> str:
    return ast.unparse(arg.annotation) if arg.annotation is not None else ""


def _takes_config(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    for arg in args:
        annotation = _annotation(arg)
        if "ConfigDict" in annotation or (arg.arg == "config" and not annotation):
            return True
    return False


def _functions(node, prefix: str):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{prefix}{child.name}", child
            yield from _functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def config_takers(root: Path = MEMJAX) -> set[str]:
    """'module path:qualified name' of every function under `root` that takes a config."""
    out = set()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for name, fn in _functions(ast.parse(path.read_text(), str(path)), ""):
            if _takes_config(fn):
                out.add(f"{rel}:{name}")
    return out


def _job_entries() -> set[str]:
    entries = set()
    for target in JOBS.values():
        module, fn = target.split(":")
        rel = module.removeprefix("memjax.").replace(".", "/") + ".py"
        entries.add(f"{rel}:{fn}")
    return entries


def test_the_rule_sees_config_parameters(tmp_path):
    (tmp_path / "m.py").write_text(
        "def a(config): ...\n"
        "def b(x, *, config): ...\n"
        "def c(c: ConfigDict): ...\n"
        "def d(config: MiniBatchConfig): ...\n"
        "class K:\n    def e(self, section, config=None): ...\n"
    )
    assert config_takers(tmp_path) == {"m.py:a", "m.py:b", "m.py:c", "m.py:K.e"}


def test_no_function_below_the_job_boundary_takes_a_config():
    allowed = _job_entries() | set(READERS)
    below = {
        name
        for name in config_takers()
        if name not in allowed
        and name.split(":")[0] not in CHECKERS
        and not name.startswith(BUILDERS)
    }
    assert not below, "functions below the job boundary that take a ConfigDict:\n  " + "\n  ".join(
        sorted(below)
    )


def test_every_listed_reader_and_entry_exists():
    takers = config_takers()
    assert set(READERS) <= takers, set(READERS) - takers
    assert _job_entries() <= takers, _job_entries() - takers
