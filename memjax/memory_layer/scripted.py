"""Scripted roles: a fact extractor, a memory manager and an answer agent without a model.

    memory = Memory(root, facts=ScriptedFacts(), manager=ScriptedManager(), embedder=embedder)

Each is a ChatPolicy like a model's (a batch of chats in, completion texts out) and reads the
prompts memjax renders, so the memory layer runs its whole pipeline through them: the
completions go through the same defensive parsers, id maps and bank operations as a model's.
They serve tests and quick use, and they are a floor a trained manager has to beat.

- ScriptedFacts: every declarative sentence of at least `min_words` words said by someone other
  than the assistant is a fact (questions and greetings are not).
- ScriptedManager: per fact, NONE when a shown memory says the same words, UPDATE when a shown
  memory has the same words except the last (a new value for the same thing: "Alice lives in
  Paris" -> "Alice lives in Berlin"), ADD otherwise.
- ScriptedAnswer: lists the memories shown and answers with the first one (the best retrieved).

A prompt they cannot read (another template) gets output the parsers count as malformed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from memjax.agents.memory_r1.answer_prompt import ANSWER_MARKER

_FENCE = re.compile(r"```\n(.*?)\n```", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[\w']+")
# "- <timestamp>: <text>" (answer_prompt.format_memories); a timestamp has no ": " in it.
_MEMORY_LINE = re.compile(r"^- .*?: (.+)$", re.MULTILINE)
ASSISTANT_SPEAKERS = frozenset({"assistant", "system"})


def _last_user_content(messages: Sequence[dict]) -> str:
    for m in reversed(list(messages)):
        if m.get("role") == "user":
            return str(m.get("content", ""))
    return ""


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


class ScriptedFacts:
    """Sentences as facts; reads the dialogue after "Input:" as `speaker: text` lines."""

    def __init__(self, min_words: int = 3):
        self.min_words = int(min_words)

    def __call__(self, batch: Sequence[Sequence[dict]]) -> list[str]:
        return [json.dumps({"facts": self.facts(_last_user_content(m))}) for m in batch]

    def facts(self, user_message: str) -> list[str]:
        dialogue = user_message.split("Input:\n", 1)[-1]
        out: list[str] = []
        for line in dialogue.splitlines():
            speaker, sep, text = line.partition(": ")
            if not sep or speaker.strip().casefold() in ASSISTANT_SPEAKERS:
                continue
            for sentence in _SENTENCE_END.split(text.strip()):
                sentence = sentence.strip()
                if sentence.endswith("?") or len(_words(sentence)) < self.min_words:
                    continue
                fact = sentence.rstrip(".!").strip()
                if fact and fact not in out:
                    out.append(fact)
        return out


def _read_manager_prompt(text: str) -> tuple[list[dict], list[str]]:
    """(shown memories [{"id", "text"}], facts) from memjax's manager prompt."""
    memories: list[dict] = []
    facts: list[str] = []
    for block in _FENCE.findall(text):
        try:
            value = json.loads(block)
        except ValueError:
            continue
        if isinstance(value, list) and all(isinstance(v, dict) and "id" in v for v in value):
            memories = value
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            facts = value
    return memories, facts


def manager_decisions(memories: Sequence[dict], facts: Sequence[str]) -> list[dict]:
    """The scripted manager's {"id", "text", "event"} items for the shown memories and facts."""
    items: list[dict] = []
    claimed: set[str] = set()
    for fact in facts:
        fact_words = _words(fact)
        event, target = "ADD", None
        for memory in memories:
            mem_id, mem_words = str(memory.get("id")), _words(str(memory.get("text", "")))
            if mem_id in claimed:
                continue
            if mem_words == fact_words:
                event, target = "NONE", memory
                break
            same_frame = len(mem_words) == len(fact_words) > 1 and mem_words[:-1] == fact_words[:-1]
            if same_frame:
                event, target = "UPDATE", memory
                break
        if target is None:
            added = sum(item["event"] == "ADD" for item in items)
            items.append({"id": str(len(memories) + added), "text": fact, "event": "ADD"})
            continue
        claimed.add(str(target["id"]))
        item = {"id": str(target["id"]), "text": fact, "event": event}
        if event == "UPDATE":
            item["old_memory"] = target.get("text", "")
        items.append(item)
    return items


class ScriptedManager:
    """ADD / UPDATE / NONE by word comparison (no DELETE): see the module docstring."""

    def __call__(self, batch: Sequence[Sequence[dict]]) -> list[str]:
        out = []
        for messages in batch:
            memories, facts = _read_manager_prompt(_last_user_content(messages))
            out.append(json.dumps({"memory": manager_decisions(memories, facts)}))
        return out


class ScriptedAnswer:
    """Distils every memory shown and answers with the first (the best retrieved one)."""

    def __call__(self, batch: Sequence[Sequence[dict]]) -> list[str]:
        out = []
        for messages in batch:
            memories = _MEMORY_LINE.findall(_last_user_content(messages))
            listed = "".join(f"- {m}\n" for m in memories)
            out.append(f"{listed}{ANSWER_MARKER} {memories[0] if memories else 'unknown'}")
        return out
