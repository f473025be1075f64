"""The memsearcher.eval and memsearcher.train jobs on a HotpotQA-layout file written here: the
closed corpus and its MiniLM index are built by the job's setup, the retriever runs in-process
or over HTTP with the same results, scripted policies drive all four agents, and (heavy) a tiny
random model runs both jobs end to end through the real sampler."""

import json
import logging
import runpy
import threading

import pytest

from memjax import jobs
from memjax.agents.episode import ModelOutput
from memjax.agents.memsearcher import job_setup
from memjax.agents.memsearcher import prompts as ms_prompts
from memjax.agents.memsearcher.agent_factory import parse_batch_sizes
from memjax.agents.memsearcher.eval_job import (
    evaluate,
    lock_step,
    per_call,
    prediction_rows,
    write_outputs,
)
from memjax.agents.memsearcher.react import SYSTEM_PROMPT as REACT_PROMPT
from memjax.agents.memsearcher.run_settings import MemSearcherEvalRun
from memjax.agents.memsearcher.settings import EpisodeSettings
from memjax.agents.rag import SYSTEM_PROMPT as RAG_PROMPT
from memjax.agents.transcript import chat_format
from memjax.data.corpus import read_corpus
from memjax.errors import ConfigError
from tests.agents.conftest import tiny_decoder
from tests.agents.scripted import boxed, memory, tool_call

PARAGRAPHS = {
    "Denise Levertov": [
        "Denise Levertov was a British-born American poet.",
        " She was born in 1923.",
    ],
    "Harvey Pekar": ["Harvey Pekar was an American comic book writer.", " He was born in 1939."],
    "Nile": ["The Nile is a major river.", " It flows north through northeastern Africa."],
    "Bach": ["Johann Sebastian Bach was a German composer of the Baroque period."],
}
QUESTIONS = [
    (
        "q1",
        "Between Harvey Pekar and Denise Levertov who was born earlier",
        "Denise Levertov",
        ["Denise Levertov", "Harvey Pekar", "Bach"],
    ),
    ("q2", "Which river flows north through northeastern Africa", "Nile", ["Nile", "Bach"]),
]
GOLD = {f"{q}?": a for _, q, a, _ in QUESTIONS}
CPU_CONFIG = job_setup.REPO_ROOT / "configs" / "memsearcher_cpu.py"


def hotpot_row(qid, question, answer, titles):
    return {
        "id": qid,
        "question": question,
        "answer": answer,
        "type": "bridge",
        "level": "hard",
        "supporting_facts": {"title": [titles[0]], "sent_id": [0]},
        "context": {"title": titles, "sentences": [PARAGRAPHS[t] for t in titles]},
    }


def _data(config):
    return job_setup.QAData.from_section(config.data)


def _search(config):
    """The retriever's settings and the QA files a closed corpus pools, as the jobs read them."""
    return job_setup.RetrieverSettings.from_section(config.retriever), _data(config)


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hotpot")
    # Two files with the same two questions: a file named in both would be cut by id.
    rows = "".join(json.dumps(hotpot_row(*q)) + "\n" for q in QUESTIONS)
    (tmp / "train.jsonl").write_text(rows)
    (tmp / "eval.jsonl").write_text(rows)
    c = runpy.run_path(str(CPU_CONFIG))["get_config"]()
    c.data.train.hotpotqa = str(tmp / "train.jsonl")
    c.data.eval.hotpotqa = str(tmp / "eval.jsonl")
    c.retriever.corpus = str(tmp / "corpus.jsonl")
    c.retriever.index_dir = str(tmp / "index")
    c.retriever.default_top_n = 2
    c.retriever.max_top_n = 2
    c.agent.max_turns_eval = 3
    return c


def scripted(call):
    """Searches once with the question, then answers it (MemSearcher through its memory)."""
    first = call.messages[0]["content"]
    if first == ms_prompts.SYSTEM_PROMPT:
        question = call.messages[1]["content"].split("<question> ")[1].split(" </question>")[0]
        last = call.messages[-1]["content"]
        if last.startswith("<tool_response>"):
            return ModelOutput(memory(last.split("\n")[1][:80]), True)
        if "<memory>  </memory>" in call.messages[1]["content"]:
            return ModelOutput(tool_call(question), True)
        return ModelOutput(boxed(GOLD[question]), True)
    if first == REACT_PROMPT:
        question = call.messages[1]["content"].removeprefix("Question: ")
        if len(call.messages) > 2:
            return ModelOutput(boxed(GOLD[question]), True)
        return ModelOutput(tool_call(question), True)
    if first.startswith(RAG_PROMPT[:30]):
        question = call.messages[1]["content"].removeprefix("Question: ")
        return ModelOutput(boxed(GOLD[question]), True)
    question = first.split("Question: ")[1].strip()  # Search-R1's single user prompt
    if "<information>" in call.assistant_prefix:
        return ModelOutput(f"<think>Found.</think>\n<answer> {GOLD[question]} </answer>", True)
    return ModelOutput(f"<think>Search.</think>\n<search> {question} </search>", False)


def test_a_lone_surrogate_search_query_leaves_the_episode_batch_running(config, smollm2_tokenizer):
    """Half an escaped emoji in a model's tool call reaches the retriever as a lone surrogate;
    the real MiniLM tokenizer would refuse it and fail the whole batch's search."""
    import jax

    def policy(call):
        output = scripted(call)
        if "<tool_call>" in output.text:  # escaped as the model writes JSON: "\ud83d"
            output = ModelOutput(output.text.replace('"}}', ' \\ud83d"}}'), output.eos)
        return output

    retriever = job_setup.make_retriever(*_search(config))
    sets = job_setup.load_qa_sets(_data(config), "eval")
    count = lambda s: len(smollm2_tokenizer.encode(s))
    run = evaluate(
        ["memsearcher"],
        sets,
        EpisodeSettings.from_config(config),
        lock_step(per_call(policy)),
        retriever,
        count,
        jax.random.key(0),
        2,
    )
    assert [e.result.answer for e in run] == list(GOLD.values())
    assert all(e.result.searches[0].endswith("\ud83d") for e in run)
    assert retriever.repaired_queries == 2 and retriever.failed_queries == 0


def test_eval_over_closed_corpus_in_process_and_http_agree(config, smollm2_tokenizer, tmp_path):
    import jax

    from memjax.memory.server import RetrievalService, make_server

    sets = job_setup.load_qa_sets(_data(config), "eval")
    assert [e.question for e in sets["hotpotqa"]] == list(GOLD)  # `?` appended
    local = job_setup.make_retriever(*_search(config))  # writes the corpus, builds the index
    corpus = read_corpus(config.retriever.corpus)
    assert len(corpus) == len(PARAGRAPHS)  # paragraphs shared by questions are pooled once
    srv = make_server(RetrievalService(local), "127.0.0.1", 0, max_body_bytes=1 << 16)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = srv.server_address[:2]
        config.retriever.kind = "http"
        config.retriever.url = f"http://{host}:{port}"
        remote = job_setup.make_retriever(*_search(config))
        count = lambda s: len(smollm2_tokenizer.encode(s))
        agents = ["memsearcher", "search_r1", "react", "rag"]
        episodes = EpisodeSettings.from_config(config)
        runs = [
            evaluate(
                agents,
                sets,
                episodes,
                lock_step(per_call(scripted)),
                r,
                count,
                jax.random.key(0),
                1,
            )
            for r in (local, remote)
        ]
    finally:
        config.retriever.kind = "in_process"
        srv.shutdown()
        srv.server_close()
    fmt = chat_format(smollm2_tokenizer)
    rows_local, rows_http = (prediction_rows(run, fmt) for run in runs)
    assert rows_local == rows_http
    by_agent = {}
    for row in rows_local:
        by_agent.setdefault(row["agent"], []).append(row)
    for agent in agents:
        assert [r["answer"] for r in by_agent[agent]] == list(GOLD.values()), agent
    assert [len(r["turn_tokens"]) for r in by_agent["memsearcher"]] == [2, 2]
    assert by_agent["memsearcher"][0]["searches"] == [list(GOLD)[0]]
    # The growing baseline's second turn holds its first; MemSearcher's is rebuilt.
    react = by_agent["react"][0]["turn_tokens"]
    assert react[1] > react[0]

    split = job_setup.qa_split_summary(_data(config), "eval")
    paths = write_outputs(runs[0], smollm2_tokenizer, tmp_path, split)
    scores = json.loads(paths["scores_json"].read_text())
    assert scores["split"] == {"name": "eval", "sizes": {"train": 2, "eval": 2}, "how": split.how}
    assert {a: [round(r["em"], 6) for r in rows] for a, rows in scores["scores"].items()} == {
        a: [1.0] for a in agents
    }
    turns = json.loads(paths["json"].read_text())
    assert turns["split"]["name"] == "eval"
    assert [t["turn"] for t in turns["turns"]["memsearcher"]] == [1, 2]
    for table in ("scores_markdown", "markdown"):
        assert split.line() in paths[table].read_text()
    assert paths["plot"].stat().st_size > 0
    assert len(paths["predictions"].read_text().splitlines()) == 4 * len(GOLD)


def test_sft_task_eval_scores_the_agent_in_its_batches(config, smollm2_tokenizer, monkeypatch):
    """The SFT job's periodic agent evaluation: the recipe's agent on held-out questions, in
    that agent's batch size, scored by reward, EM and behaviour."""
    from memjax.agents import sampler_adapter
    from memjax.agents.memsearcher.sft_eval import search_agent_eval

    batches = []

    class ScriptedSampler:  # stands in for the sampler over `params`
        def __init__(self, params, cfg, tokenizer, sampling, max_prompt_tokens):
            assert max_prompt_tokens == config.eval.max_context_tokens - sampling.max_new_tokens

        def __call__(self, calls, rng):
            batches.append(len(calls))
            return [scripted(call) for call in calls]

    monkeypatch.setattr(sampler_adapter, "SamplerPolicy", ScriptedSampler)
    monkeypatch.setitem(config.eval, "agent_batch_sizes", "memsearcher=1,react=2")
    run = MemSearcherEvalRun.from_config(config)
    evaluate_params = search_agent_eval(run, smollm2_tokenizer, cfg=None, max_examples=2)
    scores = evaluate_params(None)
    assert scores == {
        "task_reward": 1.0,
        "task_em": 1.0,
        "searched": 1.0,
        "format_valid": 1.0,
        "answered": 1.0,
    }
    assert batches == [1] * len(batches) and len(batches) == 2 * 3  # search, memory, answer


@pytest.fixture(scope="module")
def tiny_checkpoint(smollm2_tokenizer, tmp_path_factory):
    """A 2-layer random Llama over SmolLM2's vocabulary, as an HF directory with its tokenizer."""
    from memjax.checkpoints.decoder_io import export_hf_decoder

    params, cfg = tiny_decoder(smollm2_tokenizer.vocab_size, seed=2)
    directory = tmp_path_factory.mktemp("tiny") / "model"
    export_hf_decoder(params, cfg, directory)
    smollm2_tokenizer.hf.save_pretrained(str(directory))
    return directory


def test_batch_sizes_per_agent():
    sizes = parse_batch_sizes(" memsearcher=20, react = 4", 10)
    assert sizes == {"memsearcher": 20, "search_r1": 10, "react": 4, "rag": 10}
    assert parse_batch_sizes("", 3) == dict.fromkeys(sizes, 3)
    for bad, match in [
        ("reactor=3", "expected agent=N with agent one of memsearcher"),
        ("memsearcher", "expected agent=N"),
        ("memsearcher=0", "memsearcher's batch size '0'"),
        ("rag=two", "rag's batch size 'two'"),
    ]:
        with pytest.raises(ConfigError, match=rf"config.eval.agent_batch_sizes='{bad}': {match}"):
            parse_batch_sizes(bad, 10)


@pytest.mark.heavy
def test_jobs_end_to_end_on_a_tiny_model(config, tiny_checkpoint, tmp_path, capsys, caplog):
    config.model.source = str(tiny_checkpoint)
    config.eval_sampling.max_tokens_per_call = 8
    config.eval.batch_size = 2
    config.eval.agent_batch_sizes = "memsearcher=1"  # its two questions in two batches
    caplog.set_level(logging.INFO, logger="absl")
    config.agent.max_turns_eval = 2
    config.eval.engine = False  # lock-step batches
    jobs.resolve("memsearcher.eval")(config, str(tmp_path / "eval_run"))
    out = capsys.readouterr().out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["driver"] == "lock_step"
    assert summary["questions"] == 2 and summary["agents"] == [
        "memsearcher",
        "search_r1",
        "react",
        "rag",
    ]
    scores = json.loads((tmp_path / "eval_run/eval/qa_scores.json").read_text())
    assert scores["split"]["name"] == "eval" and scores["split"]["sizes"] == {"train": 2, "eval": 2}
    assert all(rows[0]["count"] == 2 for rows in scores["scores"].values())
    predictions = (tmp_path / "eval_run/eval/predictions.jsonl").read_text().splitlines()
    assert len(predictions) == 8
    batches = [m.split(" in ")[0] for m in caplog.messages if " questions in " in m]
    assert batches.count("memsearcher on hotpotqa: 1 questions") == 2
    assert batches.count("react on hotpotqa: 2 questions") == 1

    # The same evaluation with every episode a client of the engine: the same predictions.
    config.eval.engine = True
    config.eval.engine_slots = 1  # the two questions share one slot in turn
    jobs.resolve("memsearcher.eval")(config, str(tmp_path / "engine_run"))
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["driver"] == "engine"
    engine_rows = (tmp_path / "engine_run/eval/predictions.jsonl").read_text().splitlines()
    assert engine_rows == predictions

    config.rollout.max_tokens_per_call = 8
    config.rollout.group_size = 2
    config.train.batch_size = 1
    config.train.mini_batch_size = 1
    config.train.micro_batches = 1
    config.train.num_steps = 1
    config.train.vocab_chunk = 8192
    jobs.resolve("memsearcher.train")(config, str(tmp_path / "train_run"))
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["steps"] == 1
    curve = json.loads((tmp_path / "train_run/reward_curve.json").read_text())
    assert len(curve) == 1 and 0.0 <= curve[0]["reward"] <= 1.0
    assert (tmp_path / "train_run/checkpoints").is_dir()
