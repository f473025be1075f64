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

from memjax.errors import ConfigError
from memjax.experiments.teachers import memory_roles as MR
from memjax.experiments.teachers import search_roles as SR
from memjax.experiments.teachers.data_split import choose_split
from memjax.experiments.teachers.memory_world import MemoryWorld, locomo_source, synthetic_source
from memjax.experiments.teachers.settings import MEMORY_ROLES, MakeDataRun, TeacherSpec
from memjax.experiments.teachers.token_stats import token_counts
from memjax.experiments.teachers.trajectory import Trajectory, write_trajectories
from memjax.experiments.teachers.verdict import RejectionTally, Verdict
from memjax.remote.openai_source import is_openai_source, shared_model


class Teachers:
    """The chat and batch teachers a config asks for (None: the scripted oracles)."""

    def __init__(self, t: TeacherSpec):
        self.kind = t.kind
        self.chat = self.batch = None
        self.attempts = t.attempts
        if self.kind == "model":
            from memjax.checkpoints import load_model
            from memjax.experiments.teachers.model_teacher import (
                BatchTeacher,
                ChatTeacher,
                TeacherSampling,
                teacher_sampler,
            )

            if not t.source:
                raise ConfigError("config.teacher.source is empty; a model teacher needs weights")
            if is_openai_source(t.source):
                self._remote(t)
                return
            model = load_model(t.source, param_dtype=t.param_dtype)
            sampling = TeacherSampling(
                t.temperature, t.top_p, t.max_new_tokens,
                t.batch_size, t.max_prompt_tokens, t.seed,
            )  # fmt: skip
            sampler = teacher_sampler(model, sampling)
            self.chat = ChatTeacher(sampler, sampling.batch_size, sampling.seed)
            self.batch = BatchTeacher(sampler, sampling.batch_size)
            self.seed = sampling.seed

    def _remote(self, t: TeacherSpec) -> None:
        """A teacher behind an OpenAI-compatible endpoint (`openai:MODEL@URL`), sampled there
        at the teacher's temperature and top-p."""
        from memjax.agents.remote_calls import remote_call_policy

        model = shared_model(t.source, t.openai)
        sampling = dict(temperature=t.temperature, top_p=t.top_p)
        self.chat = model.chat_policy(t.max_new_tokens, seed=t.seed, **sampling)
        self.batch = remote_call_policy(model, t.max_new_tokens, **sampling)
        self.seed = t.seed


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


def _memory_jobs(run: MakeDataRun, teachers, tally, splits) -> list[Trajectory]:
    from memjax.memory.embedder import Embedder

    if not any(r in MEMORY_ROLES for r in run.roles):
        return []
    embedder = Embedder.load(run.embedder_source, layout=run.embedder_layout)
    world = MemoryWorld(embedder, run.memory)
    s = run.synthetic
    syn = synthetic_source(s.seed, s.num_conversations, s.sessions_per_conversation)
    syn_convs, syn_name = choose_split(
        "synthetic", list(world.conversations(syn).values()), run.split, seed=s.seed
    )
    jobs = []  # (role, data source, conversations, split name)
    make = {"facts": MR.fact_trajectories, "manager": MR.manager_trajectories,
            "answer": MR.answer_trajectories}  # fmt: skip
    replay = {"facts": MR.replay_facts, "manager": MR.replay_manager, "answer": MR.replay_answer}
    for role in (r for r in run.roles if r in MEMORY_ROLES):
        data = run.answer_data if role == "answer" else []
        if role != "answer" or "synthetic" in data:
            jobs.append((role, syn, syn_convs, syn_name))
        if "locomo" in data:
            loc = locomo_source(run.locomo_path)
            convs, name = choose_split("locomo", list(world.conversations(loc).values()), run.split)
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


def _search_jobs(run: MakeDataRun, teachers, tally, splits, count_tokens) -> list[Trajectory]:
    from memjax.agents.memsearcher.episode import MemSearcherSettings
    from memjax.agents.memsearcher.job_setup import QAData, make_retriever
    from memjax.agents.search_r1 import SearchR1Settings
    from memjax.agents.search_tool import SearchSettings
    from memjax.data.hotpotqa import load_hotpotqa
    from memjax.experiments.teachers.search_world import SearchWorld

    spec = run.search
    if spec is None:
        return []
    path = spec.hotpotqa_path
    examples, name = choose_split("hotpotqa", load_hotpotqa(path), run.split)
    examples = examples[: spec.max_examples] if spec.max_examples > 0 else examples
    files = {"hotpotqa": path}  # the pooled corpus of the whole file
    data = QAData(train=files, eval=files, format="hotpotqa_hf")
    search = SearchSettings(spec.default_top_n, spec.max_top_n, spec.passage_separator)
    world = SearchWorld(
        examples, make_retriever(spec.retriever, data), count_tokens, path,
        MemSearcherSettings(spec.max_turns, spec.memory_cap_tokens, search=search),
        SearchR1Settings(spec.max_turns, spec.default_top_n),
        max_call_tokens=spec.max_call_tokens,
    )  # fmt: skip
    out = []
    replay = {"memsearcher": SR.replay_memsearcher, "search_r1": SR.replay_search_r1}
    seed = getattr(teachers, "seed", 0)
    for role in (r for r in run.roles if r in SR.AGENTS):
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


def make_data_job(config, workdir: str | None) -> dict:
    from memjax.agents.transcript import chat_format
    from memjax.checkpoints import packaged
    from memjax.checkpoints.tokenizer import load_tokenizer

    out_dir = Path(config.output_dir or workdir or "")
    if not str(out_dir):
        raise SystemExit("sft.make_data: set --workdir or --config.output_dir")
    run = MakeDataRun.from_config(config)  # values and data files, before anything slow loads
    t0 = time.perf_counter()
    tokenizer = load_tokenizer(packaged.resolve(run.tokenizer))
    teachers = Teachers(run.teacher)
    tally, splits = RejectionTally(), {}
    kept = _memory_jobs(run, teachers, tally, splits)
    count = lambda text: len(tokenizer.encode(text))  # noqa: E731
    kept += _search_jobs(run, teachers, tally, splits, count)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_trajectories(out_dir / "trajectories.jsonl", kept)
    summary = {
        "teacher": teachers.kind if teachers.kind == "oracle" else run.teacher.source,
        "split": run.split,
        "roles": tally.as_dict(),
        "splits": splits,
        "tokens": token_counts(kept, chat_format(tokenizer)),
        "tokenizer": run.tokenizer,
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
