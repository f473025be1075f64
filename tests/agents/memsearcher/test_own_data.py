"""A user's own data for MemSearcher: sets under any name, by layout; evaluation without a
training file; a file cut into train and eval only when asked, and saying so; the user's
corpus and index used exactly as given, a mismatch one line."""

import json

import pytest

from memjax.agents.memsearcher import job_setup
from memjax.errors import ConfigError, DataError, StaleArtefactError
from memjax.memory import embedder as embedder_module
from memjax.memory.atomic import latest_snapshot
from memjax.memory.corpus import build_corpus_index, read_index_meta
from memjax.memory.index import ScannParams
from memjax.recipes.memsearcher import memsearcher_config
from tests.memory.test_server_robustness import CountedWords


def _wiki(path, n=6, offset=0):
    rows = [
        {
            "_id": f"w{i + offset}",
            "type": "compositional",
            "question": f"Which topic{i % 5} is word{i}",
            "answer": f"word{i}",
            "context": [[f"Title {i}", [f"word{i} topic{i % 5}", "more."]]],
            "evidences": [],
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _data(config):
    return job_setup.QAData.from_section(config.data)


def _search(config):
    """The retriever's settings and the QA files a closed corpus pools, as the jobs read them."""
    return job_setup.RetrieverSettings.from_section(config.retriever), _data(config)


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setattr(
        embedder_module.Embedder, "load", staticmethod(lambda *a, **k: CountedWords())
    )
    c = memsearcher_config("packaged:smollm2")  # its training files (/data/...) do not exist here
    c.data.eval_files = f"my_wiki={_wiki(tmp_path / 'dev.jsonl')}"
    c.retriever.kind = "in_process"
    c.retriever.corpus = str(tmp_path / "corpus.jsonl")
    c.retriever.index_dir = str(tmp_path / "index")
    c.retriever.encoder.source = "counted-words"
    c.retriever.encoder.layout = ""
    return c


def test_an_evaluation_set_under_the_users_name_needs_no_training_file(config):
    sets = job_setup.load_qa_sets(_data(config), "eval")
    assert list(sets) == ["my_wiki"] and len(sets["my_wiki"]) == 6
    line = job_setup.qa_split_summary(_data(config), "eval").line()
    assert "my_wiki: dev.jsonl: 2wikimultihopqa, 6 questions" in line and "cut" not in line
    config.data.eval_files = "my_wiki"
    with pytest.raises(ConfigError, match="write name=path"):
        job_setup.load_qa_sets(_data(config), "eval")


def test_one_file_for_both_is_cut_only_when_asked_and_says_so(config, tmp_path):
    config.data.train_files = config.data.eval_files
    with pytest.raises(ConfigError, match="named for both training and evaluation; set"):
        job_setup.load_qa_sets(_data(config), "eval")
    config.data.shared_file_eval_fraction = 1.0
    with pytest.raises(ConfigError, match=r"shared_file_eval_fraction=1: .* must be in \(0, 1\)"):
        job_setup.load_qa_sets(_data(config), "eval")
    config.data.shared_file_eval_fraction = 0.5
    train = job_setup.load_qa_sets(_data(config), "train")["my_wiki"]
    held_out = job_setup.load_qa_sets(_data(config), "eval")["my_wiki"]
    assert len(train) == len(held_out) == 3 and not {e.id for e in train} & {e.id for e in held_out}
    summary = job_setup.qa_split_summary(_data(config), "eval")
    assert summary.sizes == {"eval": 3, "train": 3} and "cut by question id, 0.5 to eval" in (
        summary.line()
    )


def test_closed_corpus_is_keyed_by_its_qa_files_and_a_users_corpus_is_never_rewritten(
    config, tmp_path, capsys
):
    corpus = job_setup.ensure_closed_corpus(*_search(config), "eval")
    assert len(corpus.read_text().splitlines()) == 6
    assert job_setup.ensure_closed_corpus(*_search(config), "eval") == corpus  # fresh: kept
    config.data.eval_files = f"my_wiki={_wiki(tmp_path / 'other.jsonl', 4, offset=10)}"
    job_setup.ensure_closed_corpus(*_search(config), "eval")
    assert "written from other QA files; rewriting" in capsys.readouterr().out
    users = tmp_path / "users_corpus.jsonl"
    users.write_text('{"id": "u1", "contents": "\\"Mine\\"\\nword1"}\n')
    config.retriever.corpus = str(users)
    assert job_setup.ensure_closed_corpus(*_search(config), "eval") == users
    assert users.read_text() == '{"id": "u1", "contents": "\\"Mine\\"\\nword1"}\n'


def _users_index(tmp_path, kind="scann", source="counted-words"):
    corpus = tmp_path / "users_corpus.jsonl"
    rows = [{"id": f"d{i}", "contents": f"word{i} topic{i % 5}"} for i in range(40)]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_corpus_index(
        corpus,
        CountedWords(),
        tmp_path / "users_index",
        kind=kind,
        scann=ScannParams(num_leaves=4, leaves_to_search=4),
        encoder_meta={"source": source, "layout": None},
    )
    return corpus, tmp_path / "users_index"


def test_a_users_scann_index_is_used_as_given_not_replaced(config, tmp_path, capsys):
    corpus, index = _users_index(tmp_path)
    config.retriever.corpus, config.retriever.index_dir = str(corpus), str(index)
    config.retriever.index_kind = "exact"  # the config's default differs from the user's index
    snapshot = latest_snapshot(index)
    retriever = job_setup.make_retriever(*_search(config), "eval")
    assert latest_snapshot(index) == snapshot and retriever.index.kind == "scann"
    assert "used as it is (index.kind: 'scann' -> 'exact')" in capsys.readouterr().out
    assert retriever.search(["word7"], 1)[0][0]["id"] == "d7"


def test_a_users_index_of_another_encoder_or_corpus_is_one_line(config, tmp_path):
    corpus, index = _users_index(tmp_path, source="another-encoder")
    config.retriever.corpus, config.retriever.index_dir = str(corpus), str(index)
    with pytest.raises(StaleArtefactError, match="encoder.source: 'another-encoder' -> 'counted"):
        job_setup.make_retriever(*_search(config), "eval")
    config.retriever.encoder.source = ""  # no encoder named: the index's own
    assert job_setup.index_state(_search(config)[0], corpus)[0] == "use"
    corpus.write_text('{"id": "x", "contents": "another corpus"}\n')
    with pytest.raises(StaleArtefactError, match="corpus.sha256: "):
        job_setup.make_retriever(*_search(config), "eval")
    assert read_index_meta(index)["documents"] == 40  # untouched


def test_a_set_without_paragraphs_and_no_corpus_is_one_line(config, tmp_path):
    nq = tmp_path / "nq.jsonl"
    nq.write_text(json.dumps({"id": "q1", "question": "q", "golden_answers": ["a"]}) + "\n")
    config.data.eval_files = f"nq={nq}"
    with pytest.raises(DataError, match=r"\(nq.jsonl\) carry no paragraphs to pool into a closed"):
        job_setup.make_retriever(*_search(config), "eval")
