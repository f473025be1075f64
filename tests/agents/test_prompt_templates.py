"""Prompt templates as data: a config points a prompt at a file with {{placeholders}}; a bad
file is one error naming it; a good one changes the rendered text and nothing else."""

import runpy
from pathlib import Path

import pytest

from memjax.agents.memory_r1 import job_setup as mr1
from memjax.agents.memory_r1.answer_env import AnswerEnvironment, AnswerExample, answer_messages
from memjax.agents.memory_r1.run_settings import MemoryR1Run, prompt_templates
from memjax.agents.memsearcher import MemSearcherEpisode
from memjax.agents.memsearcher.agent_factory import episode_factory
from memjax.agents.memsearcher.settings import EpisodeSettings
from memjax.agents.retrieval import ScriptedRetriever, passage
from memjax.errors import ConfigError
from memjax.eval.judge import JUDGE_TEMPLATE, render_judge_prompt
from memjax.recipes.memory_r1 import memory_r1_config
from memjax.text.prompt_templates import PromptTemplate, TemplateError, load_template
from tests.agents.memory_r1 import helpers
from tests.agents.scripted import boxed, feed, memory, tool_call, word_count

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
QUESTION = "Between Harvey Pekar and Denise Levertov who was born earlier?"
EXAMPLE = AnswerExample(
    "c/0", "Where does Alice live?", "Denver", 1,
    "Alice", (("3 June, 2023", "I moved to Denver"),), "Bob", (("8 May, 2023", "Nice!"),),
)  # fmt: skip


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_placeholders_render_and_json_braces_stay_literal():
    t = PromptTemplate("x", ("q",), 'Q: {{ q }} -> {"label": "CORRECT"} {{q}}')
    assert t.render(q="a?") == 'Q: a? -> {"label": "CORRECT"} a?'
    with pytest.raises(ValueError, match="takes"):
        t.render(other="a")


def test_a_bad_template_file_is_one_error_naming_file_field_and_placeholders(tmp_path):
    path = write(tmp_path, "judge.txt", "Q {{question}} G {{gold}} A {{generated_answer}}")
    with pytest.raises(TemplateError) as e:
        load_template(JUDGE_TEMPLATE, path, "config.prompts.judge")
    message = str(e.value)
    assert "config.prompts.judge" in message and "judge.txt" in message
    assert "unknown placeholder(s) {{gold}}" in message
    assert "missing placeholder(s) {{gold_answer}}" in message
    with pytest.raises(ConfigError, match="config.prompts.judge=.*no such template file"):
        load_template(JUDGE_TEMPLATE, str(tmp_path / "absent.txt"), "config.prompts.judge")


def test_config_checks_every_template_at_job_start(tmp_path):
    config = memory_r1_config("unused")
    config.prompts.fact_user = write(tmp_path, "f.txt", "Dialogue: {{turns}}")
    with pytest.raises(TemplateError, match=r"fact_user.*\{\{turns\}\}.*\{\{dialogue\}\}"):
        mr1.construction_settings(MemoryR1Run.from_config(config))
    other = memory_r1_config("unused")
    other.prompts.answr = "typo.txt"
    with pytest.raises(ConfigError, match=r"unknown prompt\(s\) \['answr'\]"):
        prompt_templates(other)


def test_memsearcher_templates_change_the_prompts_and_nothing_else(tmp_path):
    config = runpy.run_path(str(CONFIGS / "memsearcher_cpu.py"))["get_config"]()
    default = EpisodeSettings.from_config(config).memsearcher(evaluation=False)
    config.prompts.memsearcher_system = write(tmp_path, "s.txt", "Search, remember, answer.")
    config.prompts.memsearcher_user = write(
        tmp_path, "u.txt", "Question: {{question}}\nMemory: {{memory}}"
    )
    config.prompts.memsearcher_tool_response = write(
        tmp_path, "t.txt", "<tool_response>{{call}}\n{{result}}\n</tool_response>\nUpdate it."
    )
    custom = EpisodeSettings.from_config(config).memsearcher(evaluation=False)
    outputs = [tool_call("Levertov"), memory("Levertov: 1923."), boxed("Denise Levertov")]
    runs = []
    for settings in (default, custom):
        retriever = ScriptedRetriever(default=[passage("7", "Denise Levertov", "Born 1923.")])
        episode = feed(MemSearcherEpisode(QUESTION, word_count, settings), outputs, retriever)
        runs.append((episode, episode.result(["Denise Levertov"]), retriever.calls))
    (a, ra, calls_a), (b, rb, calls_b) = runs
    first, second = (e.contexts[1].calls[0].messages for e in (a, b))
    assert second[0]["content"] == "Search, remember, answer."
    assert second[1]["content"] == "Question: " + QUESTION + "\nMemory: Levertov: 1923."
    assert first != second
    reply = b.contexts[0].calls[1].messages[-1]["content"]
    assert reply.endswith("</tool_response>\nUpdate it.") and "Born 1923." in reply
    # Everything but the text: the same outputs read the same way, to the same reward.
    assert (ra.reward, ra.stop_reason, ra.answer) == (rb.reward, rb.stop_reason, rb.answer)
    assert (a.memories, a.searches, calls_a) == (b.memories, b.searches, calls_b)
    assert [c.outputs for c in a.contexts] == [c.outputs for c in b.contexts]


def test_search_r1_instruction_template_changes_only_the_prompt(tmp_path):
    config = runpy.run_path(str(CONFIGS / "memsearcher_cpu.py"))["get_config"]()
    default = episode_factory("search_r1", EpisodeSettings.from_config(config), word_count, True)(
        QUESTION
    )
    # The authors' instruction has two <answer> examples; scoring is not fooled by them.
    config.prompts.search_r1_instruction = write(
        tmp_path,
        "i.txt",
        "Use <answer> and </answer>, e.g. <answer> Beijing </answer>. {{question}}",
    )
    custom = episode_factory("search_r1", EpisodeSettings.from_config(config), word_count, True)(
        QUESTION
    )
    assert custom.current_call().messages[0]["content"].endswith(QUESTION)
    assert default.current_call().messages != custom.current_call().messages
    results = []
    for episode, text in ((default, "no answer yet"), (custom, "no answer yet")):
        retriever = ScriptedRetriever()
        feed(episode, [(text, True)], retriever)
        results.append(episode.result(["Denise Levertov"]))
    assert [(r.answer, r.reward, r.stop_reason) for r in results] == [(None, 0.0, "no_answer")] * 2


def test_memory_r1_answer_and_judge_templates_change_only_the_text(tmp_path):
    config = memory_r1_config("unused")
    config.prompts.answer = write(
        tmp_path,
        "a.txt",
        "{{speaker_a}}:\n{{memories_a}}\n{{speaker_b}}:\n{{memories_b}}\nQ: {{question}} "
        "Answer after **Answer:**",
    )
    config.prompts.judge = write(
        tmp_path, "j.txt", "{{question}} | {{gold_answer}} | {{generated_answer}} -> label?"
    )
    default = mr1.answer_settings(MemoryR1Run.from_config(memory_r1_config("unused")))
    custom = mr1.answer_settings(MemoryR1Run.from_config(config))
    text = answer_messages(EXAMPLE, custom)[0]["content"]
    assert text.startswith("Alice:\n- 3 June, 2023: I moved to Denver\nBob:")
    assert text != answer_messages(EXAMPLE, default)[0]["content"]
    completion = "**Answer:** Denver"
    for settings in (default, custom):
        env = AnswerEnvironment(helpers.ByteTokenizer(), settings)
        state, _ = env.reset(EXAMPLE)
        result = env.step(state, env.tokenizer.encode(completion), "eos")[1]
        assert (result.reward, result.info["em"]) == (1.0, 1.0)
    judge = prompt_templates(config)["judge"]
    assert render_judge_prompt("q?", "Paris", "Paris", judge) == "q? | Paris | Paris -> label?"
