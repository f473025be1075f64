"""Scripted policies, a bag-of-words encoder and a byte tokenizer for the Memory-R1 tests."""

import hashlib
import json
import re

import numpy as np


class BagOfWords:
    """Hashed word counts, L2-normalised: texts sharing words are close (stands in for MiniLM,
    which has its own tests)."""

    dim = 256

    def encode(self, texts, kind="passage"):
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


class ByteTokenizer:
    """Bytes as tokens (ids 3..258), PAD 0, EOS 2: the environments' tokenizer in tests."""

    pad_id, eos_ids, vocab_size = 0, (2,), 259

    def encode(self, text, add_special_tokens=False):
        return [b + 3 for b in text.encode()]

    def decode(self, ids, skip_special_tokens=True):
        return bytes(i - 3 for i in ids if i >= 3).decode(errors="replace")

    def chat_text(self, messages, add_generation_prompt=True):
        text = "".join(f"<{m['role']}>{m['content']}\n" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")

    def chat(self, messages, add_generation_prompt=True):
        return self.encode(self.chat_text(messages, add_generation_prompt))


def user_text(messages):
    return messages[-1]["content"]


def last_turn(messages):
    """The new turn ("Speaker: text") of a fact-extraction prompt."""
    return user_text(messages).strip().splitlines()[-1].split(": ", 1)[1]


def fact_policy(batch):
    """A fact for every turn that tells news; none for greetings and small talk."""
    news = ("adopted", "allergic", "live", "moved", "work", "job", "started", "gave up", "only")
    out = []
    for messages in batch:
        text = last_turn(messages)
        facts = [text.rstrip("!.")] if any(w in text.lower() for w in news) else []
        out.append(json.dumps({"facts": facts}))
    return out


def shown_memories(messages):
    """The manager prompt's current memory as [{"id", "text"}] (empty when it says so)."""
    text = user_text(messages)
    if "Current memory is empty." in text:
        return []
    block = text.split("Below is the current content of the memory:\n\n```\n", 1)[1]
    return json.loads(block.split("\n```", 1)[0])


def shown_facts(messages):
    text = user_text(messages)
    block = text.split("or cause no change.\n\n```\n", 1)[1]
    return json.loads(block.split("\n```", 1)[0])


def add_all_manager(batch):
    """ADDs every fact and keeps every shown memory (event NONE)."""
    out = []
    for messages in batch:
        items = [
            {"id": m["id"], "text": m["text"], "event": "NONE"} for m in shown_memories(messages)
        ]
        items += [{"id": "new", "text": f, "event": "ADD"} for f in shown_facts(messages)]
        out.append(json.dumps({"memory": items}))
    return out


QUESTION_WORDS = {"what", "where", "when", "which", "does", "the", "who", "how"}


def keyword_answerer(batch):
    """A frozen answer agent: the last capitalised word of the first listed memory (best
    first) that shares a content word with the question, or "unknown"."""
    out = []
    for messages in batch:
        text = user_text(messages)
        question = text.split("Question: ", 1)[1].splitlines()[0].lower()
        words = {w for w in re.findall(r"[a-z]+", question) if w not in QUESTION_WORDS}
        answer = "unknown"
        for _, memory in re.findall(r"^- (.*?): (.*)$", text, re.MULTILINE):
            names = re.findall(r"\b[A-Z][a-z]+\b", memory)
            if words & set(re.findall(r"[a-z]+", memory.lower())) and names:
                answer = names[-1]
                break
        out.append(f"**Memories selected as relevant:**\n- {answer}\n**Answer:** {answer}")
    return out
