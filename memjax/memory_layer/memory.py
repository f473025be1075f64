"""`Memory`: a Mem0-compatible memory layer driven by Memory-R1's agents.

    memory = Memory.from_config(MemoryConfig(root="/tmp/mem", manager=RoleSpec("/runs/grpo")))
    memory.add([{"role": "user", "content": "I live in Paris."}], user_id="alice")
    memory.search("where does alice live?", user_id="alice")   # {"results": [{"id", ...}]}
    memory.answer("Where does Alice live?", user_id="alice")    # {"answer": "Paris", ...}

`add` runs the pipeline Memory-R1 trains (and Mem0 prompts): the fact extractor reads the
messages and writes {"facts": [...]}; the manager sees the user's memories closest to those
facts (top `related_k`) and writes ADD / UPDATE / DELETE / NONE; the operations are applied to
the user's bank, each logged with its provenance (the add's id and the manager's raw output),
and Mem0's {"results": [{"id", "memory", "event"}]} comes back. `infer=False` stores each
non-system message as a memory, no model involved. Malformed model output is counted in
`stats()` and never raises.

Every user has a bank of their own (one MemoryBank, saved atomically after each change, so a
restart finds it whole); nothing one user does reads or changes another's. Operations on one
user run one at a time (a lock per user), so concurrent adds lose nothing; model calls run one
at a time across users (one model, one set of weights).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path

from memjax.agents.memory_r1.answer_parser import parse_answer
from memjax.agents.memory_r1.answer_prompt import MEMORIES_PER_SPEAKER, render_answer_prompt
from memjax.agents.memory_r1.bank_ops import answer_memories, to_bank_op
from memjax.agents.memory_r1.construction import manager_messages
from memjax.agents.memory_r1.fact_parser import parse_facts
from memjax.agents.memory_r1.fact_prompt import render_fact_messages
from memjax.agents.memory_r1.manager_parser import parse_manager_output
from memjax.agents.memory_r1.policy import ChatPolicy
from memjax.memory import ops as O
from memjax.memory.bank import MemoryBank
from memjax.memory.ops import MemoryOp, Provenance
from memjax.memory_layer import store
from memjax.memory_layer.config import MemoryConfig
from memjax.memory_layer.shapes import (
    InputLimits,
    MemoryInputError,
    MemoryNotFound,
    check_metadata,
    check_text,
    check_top_k,
    check_user_id,
    history_entry,
    iso_time,
    memory_item,
    normalise_messages,
)
from memjax.memory_layer.store import MemoryRecord, UserMemories

ASSISTANT = "assistant"


class Memory:
    def __init__(
        self,
        root: str | Path,
        *,
        facts: ChatPolicy,
        manager: ChatPolicy,
        embedder,
        answer: ChatPolicy | None = None,
        related_k: int = 10,
        limits: InputLimits = InputLimits(),
        clock: Callable[[], float] = time.time,
    ):
        self.root = Path(root)
        self.facts, self.manager, self.answer_agent = facts, manager, answer
        self.embedder = embedder
        self.related_k = int(related_k)
        self.limits = limits
        self.clock = clock
        self.counters: Counter = Counter()
        self._lock = threading.Lock()  # the user table and the id index
        self._model_lock = threading.Lock()
        self._user_locks: dict[str, threading.Lock] = {}
        self._users = store.load_all(self.root, embedder)
        self._owner_of: dict[str, str] = {}  # every memory id ever logged -> its user
        for user in self._users.values():
            self._index(user)

    @classmethod
    def from_config(cls, config: MemoryConfig | dict) -> Memory:
        """Loads the embedder and builds each role's policy from its source."""
        from memjax.memory.embedder import Embedder
        from memjax.memory_layer.roles import role_policy

        if isinstance(config, dict):
            config = MemoryConfig.from_dict(config)
        config.validate()
        config.check_sources()  # a wrong path fails before the embedder loads
        embedder = Embedder.load(config.embedder, layout=config.embedder_layout or None)
        return cls(
            config.root,
            facts=role_policy(config.facts, "facts"),
            manager=role_policy(config.manager, "manager"),
            answer=role_policy(config.answer, "answer"),
            embedder=embedder,
            related_k=config.related_k,
            limits=config.limits,
        )

    # ------------------------------------------------------------------ writing

    def add(
        self,
        messages,
        user_id: str,
        metadata: dict | None = None,
        infer: bool = True,
        *,
        timestamp: str | None = None,
    ) -> dict:
        """Mem0's add: {"results": [{"id", "memory", "event"(, "previous_memory")}]}.
        `timestamp` dates the memories (default: today, UTC)."""
        user_id = check_user_id(user_id, self.limits)
        messages = normalise_messages(messages, self.limits)
        metadata = check_metadata(metadata, self.limits)
        if not isinstance(infer, bool):
            raise MemoryInputError(f"infer: true or false, got {infer!r}")
        date = timestamp if timestamp is not None else self._today()
        check_text(date, "timestamp", self.limits.max_user_id_chars)
        source = f"add:{uuid.uuid4().hex}"
        with self._user(user_id, create=True) as user:
            if infer:
                ops, output = self._inferred_ops(user, messages, date)
            else:
                ops, output = self._raw_ops(user, messages, date), None
            results = self._apply(user, ops, Provenance(source, output), metadata)
        return {"results": results}

    def _inferred_ops(self, user: UserMemories, messages, date: str):
        """(bank ops, the manager's raw output) for one add: facts, then the manager."""
        turns = [
            (m.get("name") or (user.user_id if m["role"] == "user" else m["role"]), m["content"])
            for m in messages
            if m["role"] != "system"
        ]
        if not turns:
            return [], None
        parsed = parse_facts(self._call(self.facts, render_fact_messages(turns, date)))
        self._count({f"facts_json_{parsed.json_status}": 1, "facts_total": len(parsed.facts)})
        if not parsed.facts:  # nothing to remember: no manager call (as Mem0)
            return [], None
        chat, ids = manager_messages(user.bank, parsed.facts, user.user_id, self.related_k)
        output = self._call(self.manager, chat)
        decision = parse_manager_output(output, ids)
        counts = Counter({f"manager_{k}": n for k, n in decision.counts().items()})
        counts.update(manager_calls=1, manager_well_formed=int(decision.well_formed))
        self._count(counts)
        ops = [to_bank_op(op, user.user_id, date) for op in decision.ops]
        return [_with_new_id(op) for op in ops], output

    def _raw_ops(self, user: UserMemories, messages, date: str) -> list[MemoryOp]:
        """infer=False: each message a memory, as long as a memory may be (the bank's bound,
        checked here so a refusal is the caller's error, not a silently missing result)."""
        limit = user.bank.max_text_chars
        for i, m in enumerate(messages):
            if m["role"] != "system" and len(m["content"]) > limit:
                raise MemoryInputError(
                    f"messages[{i}].content: {len(m['content'])} characters; a memory stored "
                    f"without inference holds at most {limit}"
                )
        return [
            MemoryOp(
                O.ADD, id=uuid.uuid4().hex, text=m["content"], owner=user.user_id, timestamp=date
            )
            for m in messages
            if m["role"] != "system"
        ]

    def _apply(self, user: UserMemories, ops, provenance: Provenance, metadata) -> list[dict]:
        """Applies ops to the user's bank, keeps the records, saves, and reports Mem0's way."""
        old = {op.id: user.bank.get(op.id).text for op in ops if op.id in user.bank}
        results = user.bank.apply_many(ops, provenance)
        now = iso_time(self.clock())
        out = []
        self._count(
            Counter(f"bank_{r.reason}" if not r.accepted else "bank_accepted" for r in results)
        )
        for op, result in zip(ops, results):
            if not result.accepted or op.kind == O.NOOP:
                continue
            if op.kind == O.ADD:
                user.records[result.id] = MemoryRecord(dict(metadata), now, now)
                out.append({"id": result.id, "memory": op.text, "event": "ADD"})
            elif op.kind == O.UPDATE:
                user.records[result.id].updated_at = now
                out.append(
                    {
                        "id": result.id,
                        "memory": op.text,
                        "event": "UPDATE",
                        "previous_memory": old.get(op.id),
                    }
                )
            else:
                user.records.pop(result.id, None)
                out.append({"id": result.id, "memory": old.get(op.id), "event": "DELETE"})
        with self._lock:
            for result in results:
                if result.accepted and result.id is not None:
                    self._owner_of[result.id] = user.user_id
        if ops:
            store.save_user(self.root, user)
        return out

    def update(self, memory_id: str, text: str, *, user_id: str | None = None) -> dict:
        """Replaces a memory's text (logged as an UPDATE from the API). With `user_id`, only
        that user's memory (another's is not found), here and in get, delete and history."""
        text = check_text(text, "text", self.limits.max_message_chars)
        with self._owning_user(memory_id, user_id, present=True) as user:
            op = MemoryOp(O.UPDATE, id=memory_id, text=text)
            result = self._apply(user, [op], Provenance("api:update"), {})
            if not result:
                reason = user.bank.log[-1].reason
                raise MemoryInputError(f"text: the memory bank refused it ({reason})")
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id: str, *, user_id: str | None = None) -> dict:
        with self._owning_user(memory_id, user_id, present=True) as user:
            self._apply(user, [MemoryOp(O.DELETE, id=memory_id)], Provenance("api:delete"), {})
        return {"message": "Memory deleted successfully!"}

    def delete_all(self, user_id: str) -> dict:
        user_id = check_user_id(user_id, self.limits)
        with self._user(user_id, create=False) as user:
            if user is not None:
                ops = [MemoryOp(O.DELETE, id=e.id) for e in user.bank.entries()]
                self._apply(user, ops, Provenance("api:delete_all"), {})
        return {"message": "Memories deleted successfully!"}

    def reset(self) -> None:
        """Forgets every user, memory and history, on disk too. Waits for the operations
        under way (user locks first, then the table's: the order every method takes them)."""
        with self._lock:
            locks = [self._user_locks[u] for u in sorted(self._user_locks)]
        with contextlib.ExitStack() as held:
            for lock in locks:
                held.enter_context(lock)
            with self._lock:
                self._users.clear()
                self._owner_of.clear()
                shutil.rmtree(self.root / "users", ignore_errors=True)

    # ------------------------------------------------------------------ reading

    def get(self, memory_id: str, *, user_id: str | None = None) -> dict | None:
        """The memory, or None when no memory has this id (Mem0's get)."""
        try:
            with self._owning_user(memory_id, user_id, present=True) as user:
                return memory_item(user.bank.get(memory_id), user.records[memory_id], user.user_id)
        except MemoryNotFound:
            return None

    def get_all(self, user_id: str, limit: int = 100) -> dict:
        user_id = check_user_id(user_id, self.limits)
        limit = check_top_k(limit, self.limits)
        with self._user(user_id, create=False) as user:
            if user is None:
                return {"results": []}
            entries = sorted(user.bank.entries(), key=lambda e: e.created_step)[:limit]
            return {"results": [memory_item(e, user.records[e.id], user_id) for e in entries]}

    def search(self, query: str, user_id: str, top_k: int = 10, *, limit=None) -> dict:
        """The user's top_k memories for the query, best first (`limit`: Mem0's name)."""
        query = check_text(query, "query", self.limits.max_query_chars)
        user_id = check_user_id(user_id, self.limits)
        top_k = check_top_k(limit if limit is not None else top_k, self.limits)
        with self._user(user_id, create=False) as user:
            if user is None:
                return {"results": []}
            hits = user.bank.search(query, k=top_k, owner=user_id)
            return {"results": [memory_item(e, user.records[e.id], user_id, s) for e, s in hits]}

    def history(self, memory_id: str, *, user_id: str | None = None) -> list[dict]:
        """Every accepted operation on the memory, oldest first, with its provenance."""
        with self._owning_user(memory_id, user_id) as user:
            return [
                history_entry(r, user.user_id)
                for r in user.bank.log
                if r.accepted and r.id == memory_id and r.op.kind != O.NOOP
            ]

    def answer(self, question: str, user_id: str | Sequence[str], k: int = 30) -> dict:
        """The answer agent over each user's top-k memories, with memory distillation:
        {"answer", "selected_memories", "memories", "output"}. One user, or two (the speakers
        of a conversation, as Memory-R1's answer prompt has them)."""
        if self.answer_agent is None:
            raise MemoryInputError("answer: this Memory was built without an answer agent")
        question = check_text(question, "question", self.limits.max_query_chars)
        users = [user_id] if isinstance(user_id, str) else list(user_id)
        if not 1 <= len(users) <= 2:
            raise MemoryInputError("user_id: one user id, or two")
        users = [check_user_id(u, self.limits) for u in users]
        k = min(check_top_k(k, self.limits), MEMORIES_PER_SPEAKER)
        retrieved = []
        for u in users:
            with self._user(u, create=False) as user:
                retrieved.append(answer_memories(user.bank, u, question, k) if user else [])
        if len(users) == 1:
            users, retrieved = [users[0], ASSISTANT], [retrieved[0], []]
        prompt = render_answer_prompt(users[0], retrieved[0], users[1], retrieved[1], question)
        output = self._call(self.answer_agent, [{"role": "user", "content": prompt}])
        parsed = parse_answer(output)
        self._count({"answers_total": 1, "answers_has_marker": int(parsed.has_marker)})
        return {
            "answer": parsed.answer,
            "selected_memories": list(parsed.selected_memories),
            "memories": [text for memories in retrieved for _, text in memories],
            "output": output,
        }

    def stats(self) -> dict:
        """Counters: parse outcomes of every model output, bank results, answers."""
        with self._lock:
            return dict(self.counters)

    # ------------------------------------------------------------------ internals

    def _count(self, counts) -> None:
        """Adds to the counters (adds for different users run at once)."""
        with self._lock:
            self.counters.update(counts)

    def _call(self, policy: ChatPolicy, messages: list[dict]) -> str:
        with self._model_lock:
            texts = policy([messages])
        if len(texts) != 1:
            raise RuntimeError(f"a role answered 1 prompt with {len(texts)} completions")
        return texts[0] if isinstance(texts[0], str) else ""

    def _today(self) -> str:
        return datetime.datetime.fromtimestamp(self.clock(), datetime.UTC).strftime("%d %B %Y")

    def _index(self, user: UserMemories) -> None:
        with self._lock:
            for record in user.bank.log:
                if record.id is not None:
                    self._owner_of[record.id] = user.user_id

    def _user_lock(self, user_id: str) -> threading.Lock:
        with self._lock:
            return self._user_locks.setdefault(user_id, threading.Lock())

    @contextmanager
    def _user(self, user_id: str, create: bool):
        """The user's memories (None when absent and not `create`), their lock held."""
        with self._user_lock(user_id):
            with self._lock:
                user = self._users.get(user_id)
                if user is None and create:
                    bank = MemoryBank(self.embedder, default_owner=user_id)
                    user = self._users[user_id] = UserMemories(user_id, bank, {})
            yield user

    @contextmanager
    def _owning_user(self, memory_id, user_id: str | None = None, present: bool = False):
        """The user whose bank logged `memory_id`, their lock held; with `present`, only
        while the memory exists (history outlives a DELETE, get/update/delete do not)."""
        missing = MemoryNotFound(f"memory id {str(memory_id)[:80]!r}: no such memory")
        if not isinstance(memory_id, str) or not memory_id:
            raise missing
        with self._lock:
            owner = self._owner_of.get(memory_id)
        if owner is None or (user_id is not None and user_id != owner):
            raise missing
        with self._user(owner, create=False) as user:
            # None: reset between the lookup and the lock.
            if user is None or (present and memory_id not in user.bank):
                raise missing
            yield user


def _with_new_id(op: MemoryOp) -> MemoryOp:
    """ADDs get a fresh, globally unique id (Mem0's ids are UUIDs, and GET /memories/{id}
    names no user)."""
    return dataclasses.replace(op, id=uuid.uuid4().hex) if op.kind == O.ADD else op
