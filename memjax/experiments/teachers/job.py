"""The `sft.make_data` job: teachers write trajectories, replays keep the full-reward ones.

    python -m memjax.launch --config=configs/sft_data_cpu.py --workdir=/tmp/sft_data \
        --config.roles=manager,answer --config.teacher.kind=model \
        --config.teacher.source=/models/Qwen2.5-7B-Instruct

Writes to `config.output_dir` (default: the workdir), atomically:
  trajectories.jsonl  the kept trajectories (memjax.experiments.teachers.trajectory's format)
  summary.json        per role: offered, kept, keep rate, reject reasons, the split drawn from
                      and its size; rows and tokens per role under the student's tokenizer
and prints a short summary. The data are the training splits unless `config.split=heldout`
(memjax.experiments.teachers.data_split); each trajectory names its split.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import jax
from ml_collections import ConfigDict

from memjax.experiments.teachers import memory_roles as MR
from memjax.experiments.teachers import search_roles as SR
from memjax.experiments.teachers.data_split import choose_split
from memjax.experiments.teachers.memory_world import (
    MemorySettings,
    MemoryWorld,
    locomo_source,
    synthetic_source,
)
from memjax.experiments.teachers.token_stats import token_counts
from memjax.experiments.teachers.trajectory import ROLES, Trajectory, write_trajectories
from memjax.experiments.teachers.verdict import RejectionTally, Verdict
from memjax.remote.openai_source import is_openai_source, settings_from_config, shared_model

MEMORY_ROLES = ("facts", "manager", "answer")
TEACHERS = ("oracle", "model")
ANSWER_DATA = ("synthetic", "locomo")


def parse_roles(names: str) -> list[str]:
    roles = [r.strip() for r in str(names).split(",") if r.strip()]
    bad = [r for r in roles if r not in ROLES]
    if bad or not roles:
        raise ValueError(f"config.roles={names!r}: choose from {', '.join(ROLES)}")
    return roles


def _memory_settings(m: ConfigDict) -> MemorySettings:
    from memjax.agents.memory_r1.answer_env import AnswerSettings
    from memjax.agents.memory_r1.construction import ConstructionSettings

    return MemorySettings(
        construction=ConstructionSettings(int(m.related_k), int(m.fact_context_turns)),
        answer=AnswerSettings(
            distill=bool(m.distill), metric=str(m.metric), style=str(m.answer_style)
        ),
        k_per_speaker=int(m.k_per_speaker),
        locomo_date_only=bool(m.locomo_date_only),
    )


class Teachers:
    """The chat and batch teachers a config asks for (None: the scripted oracles)."""

    def __init__(self, t: ConfigDict):
        if t.kind not in TEACHERS:
            raise ValueError(f"config.teacher.kind={t.kind!r}; choose from {TEACHERS}")
        self.kind = str(t.kind)
        self.chat = self.batch = None
        self.attempts = max(1, int(t.attempts)) if self.kind == "model" else 1
        if self.kind == "model":
            from memjax.checkpoints import load_model
            from memjax.experiments.teachers.model_teacher import (
                BatchTeacher,
                ChatTeacher,
                TeacherSampling,
                teacher_sampler,
            )

            if not t.source:
                raise ValueError("config.teacher.source is empty; a model teacher needs weights")
            if is_openai_source(str(t.source)):
                self._remote(t)
                return
            model = load_model(str(t.source), param_dtype=str(t.param_dtype))
            sampling = TeacherSampling(
                float(t.temperature), float(t.top_p), int(t.max_new_tokens),
                int(t.batch_size), int(t.max_prompt_tokens), int(t.seed),
            )  # fmt: skip
            sampler = teacher_sampler(model, sampling)
            self.chat = ChatTeacher(sampler, sampling.batch_size, sampling.seed)
            self.batch = BatchTeacher(sampler, sampling.batch_size)
            self.seed = sampling.seed

    def _remote(self, t: ConfigDict) -> None:
        """A teacher behind an OpenAI-compatible endpoint (`openai:MODEL@URL`), sampled there
        at the teacher's temperature and top-p."""
        from memjax.agents.remote_calls import remote_call_policy

        settings = settings_from_config(t.get("openai"))
        model = shared_model(str(t.source), settings)
        sampling = dict(temperature=float(t.temperature), top_p=float(t.top_p))
        self.chat = model.chat_policy(int(t.max_new_tokens), seed=int(t.seed), **sampling)
        self.batch = remote_call_policy(model, int(t.max_new_tokens), **sampling)
        self.seed = int(t.seed)


def _sample_and_keep(make, replay, attempts: int, tally: RejectionTally, role: str):
    """Up to `attempts` rounds of make(attempt) -> trajectories; each id is kept once, at its
    first full-reward replay; rejections are counted for trajectories never kept."""
    kept: dict[str, Trajectory] = {}
    last: dict[str, Verdict] = {}
    for attempt in range(attempts):
        for t in make(attempt):
            if t.id in kept:
                continue
            verdict = replay(t)
            if verdict.kept:
                t.reward = verdict.reward
                kept[t.id] = t
            last[t.id] = verdict
    for trajectory_id, verdict in last.items():
        tally.add(role, verdict if trajectory_id not in kept else Verdict(verdict.reward))
    return list(kept.values())


def _memory_jobs(config, roles, teachers, tally, splits) -> list[Trajectory]:
    from memjax.agents.memsearcher.job_setup import resolve_path
    from memjax.memory.embedder import Embedder

    if not any(r in MEMORY_ROLES for r in roles):
        return []
    embedder = Embedder.load(config.embedder.source, layout=config.embedder.layout or None)
    world = MemoryWorld(embedder, _memory_settings(config.memory))
    s = config.synthetic
    syn = synthetic_source(int(s.seed), int(s.num_conversations), int(s.sessions_per_conversation))
    syn_convs, syn_name = choose_split(
        "synthetic", list(world.conversations(syn).values()), config.split, seed=int(s.seed)
    )
    jobs = []  # (role, data source, conversations, split name)
    make = {"facts": MR.fact_trajectories, "manager": MR.manager_trajectories,
            "answer": MR.answer_trajectories}  # fmt: skip
    replay = {"facts": MR.replay_facts, "manager": MR.replay_manager, "answer": MR.replay_answer}
    for role in (r for r in roles if r in MEMORY_ROLES):
        data = _answer_data(config) if role == "answer" else []
        if role != "answer" or "synthetic" in data:
            jobs.append((role, syn, syn_convs, syn_name))
        if "locomo" in data:
            path = resolve_path(config.locomo.path, "locomo.path")
            loc = locomo_source(path)
            convs, name = choose_split(
                "locomo", list(world.conversations(loc).values()), config.split
            )
            jobs.append((role, loc, convs, name))
    out = []
    for role, source, convs, name in jobs:
        splits[f"{role}:{name}"] = {"conversations": len(convs)}
        kept = _sample_and_keep(
            lambda _, r=role, src=source, cs=convs, n=name: make[r](world, src, cs, n, teachers.chat),
            lambda t, r=role: replay[r](world, t), teachers.attempts, tally, role,
        )  # fmt: skip
        print(f"{role} on {name}: kept {len(kept)}", flush=True)
        out += kept
    return out


def _search_jobs(config, roles, teachers, tally, splits, count_tokens) -> list[Trajectory]:
    from memjax.agents.memsearcher.episode import MemSearcherSettings
    from memjax.agents.memsearcher.job_setup import (
        QAData,
        RetrieverSettings,
        make_retriever,
        resolve_path,
    )
    from memjax.agents.search_r1 import SearchR1Settings
    from memjax.agents.search_tool import SearchSettings
    from memjax.data.hotpotqa import load_hotpotqa
    from memjax.experiments.teachers.search_world import SearchWorld

    if not any(r in SR.AGENTS for r in roles):
        return []
    path = resolve_path(config.hotpotqa.path, "hotpotqa.path")
    examples, name = choose_split("hotpotqa", load_hotpotqa(path), config.split)
    limit = int(config.hotpotqa.max_examples)
    examples = examples[:limit] if limit > 0 else examples
    r, a = config.retriever, config.agent
    files = {"hotpotqa": str(path)}  # the pooled corpus of the whole file
    data = QAData(train=files, eval=files, format="hotpotqa_hf")
    search = SearchSettings(int(r.default_top_n), int(r.max_top_n), str(r.passage_separator))
    world = SearchWorld(
        examples, make_retriever(RetrieverSettings.from_section(r), data), count_tokens, str(path),
        MemSearcherSettings(int(a.max_turns), int(a.memory_cap_tokens), search=search),
        SearchR1Settings(int(a.max_turns), int(r.default_top_n)),
        max_call_tokens=int(a.get("max_call_tokens", 0)),
    )  # fmt: skip
    out = []
    replay = {"memsearcher": SR.replay_memsearcher, "search_r1": SR.replay_search_r1}
    seed = getattr(teachers, "seed", 0)
    for role in (r for r in roles if r in SR.AGENTS):
        splits[f"{role}:{name}"] = {"questions": len(examples)}
        kept = _sample_and_keep(
            lambda i, ag=role: SR.search_trajectories(
                world, ag, examples, name, teachers.batch, jax.random.fold_in(jax.random.key(seed), i)
            ),
            lambda t, ag=role: replay[ag](world, t), teachers.attempts, tally, role,
        )  # fmt: skip
        print(f"{role} on {name}: kept {len(kept)}", flush=True)
        out += kept
    return out


def _answer_data(config: ConfigDict) -> list[str]:
    data = [d.strip() for d in str(config.answer_data).split(",") if d.strip()]
    unknown = [d for d in data if d not in ANSWER_DATA]
    if unknown or not data:
        raise ValueError(f"config.answer_data={config.answer_data!r}; choose from {ANSWER_DATA}")
    return data


def _check_inputs(config: ConfigDict, roles: list[str]) -> None:
    """Config values and data files, checked before any model or index loads."""
    from memjax.agents.memsearcher.job_setup import resolve_path
    from memjax.experiments.teachers.data_split import SPLITS

    if config.split not in SPLITS:
        raise ValueError(f"config.split={config.split!r}; choose from {SPLITS}")
    if config.teacher.kind not in TEACHERS:
        raise ValueError(f"config.teacher.kind={config.teacher.kind!r}; choose from {TEACHERS}")
    if "answer" in roles and "locomo" in _answer_data(config):
        resolve_path(config.locomo.path, "locomo.path")
    if any(r in SR.AGENTS for r in roles):
        resolve_path(config.hotpotqa.path, "hotpotqa.path")


def make_data_job(config: ConfigDict, workdir: str | None) -> dict:
    from memjax.agents.transcript import chat_format
    from memjax.checkpoints import packaged
    from memjax.checkpoints.tokenizer import load_tokenizer

    out_dir = Path(config.output_dir or workdir or "")
    if not str(out_dir):
        raise SystemExit("sft.make_data: set --workdir or --config.output_dir")
    roles = parse_roles(config.roles)
    _check_inputs(config, roles)  # before anything slow loads
    t0 = time.perf_counter()
    tokenizer = load_tokenizer(packaged.resolve(config.tokenizer))
    teachers = Teachers(config.teacher)
    tally, splits = RejectionTally(), {}
    kept = _memory_jobs(config, roles, teachers, tally, splits)
    count = lambda text: len(tokenizer.encode(text))  # noqa: E731
    kept += _search_jobs(config, roles, teachers, tally, splits, count)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_trajectories(out_dir / "trajectories.jsonl", kept)
    summary = {
        "teacher": teachers.kind if teachers.kind == "oracle" else str(config.teacher.source),
        "split": config.split,
        "roles": tally.as_dict(),
        "splits": splits,
        "tokens": token_counts(kept, chat_format(tokenizer)),
        "tokenizer": str(config.tokenizer),
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    tmp = out_dir / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=1))
    tmp.replace(out_dir / "summary.json")
    for role, r in summary["roles"].items():
        tokens = summary["tokens"].get(role, {})
        print(
            f"{role}: kept {r['kept']}/{r['offered']} ({r['keep_rate']:.1%}); "
            f"rows {tokens.get('rows', 0)}, tokens {tokens.get('tokens', 0)} "
            f"(trained {tokens.get('trained_tokens', 0)}); rejected {r['reject_reasons']}",
            flush=True,
        )
    print(f"wrote {len(kept)} trajectories to {out_dir / 'trajectories.jsonl'}", flush=True)
    return summary
