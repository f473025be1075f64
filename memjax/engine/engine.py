"""Continuous batching: a fixed number of slots, each serving one request at a time.

    engine = Engine(params, cfg, eos_ids=tok.eos_ids, tokenizer=tok, slots=8, max_len=2048)
    rid = engine.submit(Request(prompt_ids, SamplingParams(max_new_tokens=64), key))
    while engine.busy:
        for rid, completion in engine.step():
            ...                                    # hand it back; submit the next turn

A slot's row of the KV cache holds its request's sequence from slot 0 (`slot_cache`). When a
request ends (EOS, a stop string, its max_new_tokens) its slot is free at once, and the next
waiting request is prefilled into it between the other slots' decode calls: each `step`
prefills the prompts waiting for a slot, in chunks of `prefill_chunk` tokens, and then runs up
to `steps_per_call` decode steps, which return early when a row ends. Every waiting prompt goes
in before the next decode call by default, so no slot idles while the others decode;
`chunks_per_step` caps the chunks per step instead, so long prompts delay the live rows' next
tokens less (a server's latency) at the price of slots that wait for their prompt.

Programs are bounded as the lock-step sampler's are: prompt chunks come in power-of-two
lengths up to `prefill_chunk`, and attention reads a window of the cache rounded up to
`window_block` slots that covers the longest live row, so short rows do not pay for the
buffer's full length.

Prompts that open alike (an agent's instructions) share their first chunks: a chunk's keys and
values are kept, keyed by every token up to its end, and copied into the next slot whose prompt
opens with those tokens instead of being computed again (`prefix_store`; bit-identical).

Greedy completions are the lock-step sampler's; sampled ones draw from the same keys
(`token_choice`), so a request's completion does not depend on its slot or its neighbours.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from memjax.engine import programs
from memjax.engine.prefix_store import PrefixStore
from memjax.engine.requests import EOS, MAX_TOKENS, STOP_STRING, Completion, Request, RequestError
from memjax.engine.token_choice import RowSettings
from memjax.models import decoder
from memjax.models.config import DecoderConfig
from memjax.models.slot_cache import init_slots
from memjax.sampling.padding import bucket_length
from memjax.sampling.sampler import prepare_params
from memjax.sampling.stops import first_stop_string_end

WINDOW_BLOCK = 256
PREFILL_CHUNK = 256
STEPS_PER_CALL = 8
PREFIX_CHUNKS = 32  # prompt chunks kept for prompts that open alike (prefix_store.py)


@dataclasses.dataclass
class _Active:
    """A request in a slot, on the host."""

    rid: int
    request: Request
    prefilled: int = 0  # prompt tokens in the slot so far
    tokens: list[int] = dataclasses.field(default_factory=list)
    logprobs: list[float] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _HostSlots:
    """The host's copy of every slot's state ([B] numpy arrays), sent with each decode call."""

    token: np.ndarray
    length: np.ndarray
    live: np.ndarray
    produced: np.ndarray
    limit: np.ndarray
    temperature: np.ndarray
    top_k: np.ndarray
    top_p: np.ndarray
    greedy: np.ndarray
    key: np.ndarray  # [B, 2] uint32
    row: np.ndarray

    @classmethod
    def empty(cls, n: int, key_shape: tuple[int, ...]) -> _HostSlots:
        i32 = lambda: np.zeros(n, np.int32)
        return cls(
            token=i32(),
            length=i32(),
            live=np.zeros(n, bool),
            produced=i32(),
            limit=np.ones(n, np.int32),
            temperature=np.ones(n, np.float32),
            top_k=i32(),
            top_p=np.ones(n, np.float32),
            greedy=np.zeros(n, bool),
            key=np.zeros((n, *key_shape), np.uint32),
            row=i32(),
        )

    def settings(self, rows=slice(None)) -> RowSettings:
        return RowSettings(
            temperature=jnp.asarray(self.temperature[rows]),
            top_k=jnp.asarray(self.top_k[rows]),
            top_p=jnp.asarray(self.top_p[rows]),
            greedy=jnp.asarray(self.greedy[rows]),
            key=jnp.asarray(self.key[rows]),
            row=jnp.asarray(self.row[rows]),
        )

    def device_state(self) -> programs.SlotState:
        return programs.SlotState(
            token=jnp.asarray(self.token),
            length=jnp.asarray(self.length),
            live=jnp.asarray(self.live),
            produced=jnp.asarray(self.produced),
            limit=jnp.asarray(self.limit),
            settings=self.settings(),
        )


def _key_data(key) -> np.ndarray:
    if isinstance(key, int):
        key = jax.random.key(key)
    return np.asarray(jax.random.key_data(key), np.uint32)


class Engine:
    def __init__(
        self,
        params,
        cfg: DecoderConfig,
        *,
        eos_ids: Sequence[int],
        tokenizer=None,
        slots: int = 8,
        max_len: int = 2048,
        prefill_chunk: int = PREFILL_CHUNK,
        steps_per_call: int = STEPS_PER_CALL,
        window_block: int = WINDOW_BLOCK,
        prefix_chunks: int = PREFIX_CHUNKS,
        chunks_per_step: int = 0,
    ):
        if (
            slots < 1
            or max_len < 2
            or prefill_chunk < 1
            or steps_per_call < 1
            or chunks_per_step < 0
        ):
            raise ValueError(
                f"Engine(slots={slots}, max_len={max_len}, prefill_chunk={prefill_chunk}, "
                f"steps_per_call={steps_per_call}, chunks_per_step={chunks_per_step}): slots, "
                "chunk and steps must be >= 1, max_len >= 2, chunks_per_step >= 0"
            )
        self.cfg = cfg
        # Per-layer weights and cache on every backend: a layer's slots are then a buffer of
        # their own, which the GPU and TPU decode kernels read in place (slot_attention.py);
        # under a layer scan they would be a slice the kernel could not take without a copy.
        self.params = decoder.unstack_layers(prepare_params(params, cfg))
        self.tokenizer = tokenizer
        self.eos = jnp.asarray(sorted({int(e) for e in eos_ids}) or [-1], jnp.int32)
        self.eos_set = frozenset(int(e) for e in eos_ids)
        self.max_len = min(int(max_len), cfg.max_position_embeddings)
        self.prefill_chunk = bucket_length(prefill_chunk)
        self.steps_per_call = int(steps_per_call)
        self.window_block = int(window_block)
        # Room past max_len for a last prompt chunk's padding and a decode call's overshoot.
        self.size = self._round(self.max_len + max(self.prefill_chunk, self.steps_per_call))
        self.cache = init_slots(cfg, slots, self.size, per_layer=True)
        self.host = _HostSlots.empty(slots, _key_data(0).shape)
        self.active: list[_Active | None] = [None] * slots
        self.waiting: collections.deque[_Active] = collections.deque()
        self._next_id = 0
        self.chunks_per_step = int(chunks_per_step)
        self.prefix = PrefixStore(prefix_chunks, self.prefill_chunk)
        self.decode_calls = 0  # counters for benchmarks and tests
        self.decode_steps = 0
        self.prefill_calls = 0

    # -- the client's side -----------------------------------------------------------------

    def submit(self, request: Request) -> int:
        """Queues a request; returns its id. Refuses one that cannot fit a slot, in one line."""
        n, new = len(request.prompt), request.sampling.max_new_tokens
        if n == 0:
            raise RequestError("a request needs at least one prompt token")
        if n + new > self.max_len:
            raise RequestError(
                f"request of {n} prompt tokens + max_new_tokens={new} needs {n + new} positions, "
                f"more than the engine's max_len={self.max_len}"
            )
        if request.stop_strings and self.tokenizer is None:
            raise RequestError("stop_strings need an engine with a tokenizer")
        rid = self._next_id
        self._next_id += 1
        self.waiting.append(_Active(rid, request))
        return rid

    @property
    def busy(self) -> bool:
        return bool(self.waiting) or any(a is not None for a in self.active)

    def run(self, requests: Iterable[Request]) -> list[Completion]:
        """Every request to its end; completions in the order given."""
        ids = [self.submit(r) for r in requests]
        done: dict[int, Completion] = {}
        while self.busy:
            done.update(self.step())
        return [done[i] for i in ids]

    def step(self) -> list[tuple[int, Completion]]:
        """One round: fill free slots from the queue, prompt chunks (`chunks_per_step` of them,
        or all while no slot decodes), then a decode call. Returns the requests that ended,
        with their ids."""
        finished: list[tuple[int, Completion]] = []
        self._admit()
        budget = self.chunks_per_step if self.host.live.any() else 0
        self._prefill(finished, budget)
        if self.host.live.any():
            self._decode(finished)
        return finished

    def clear(self) -> None:
        """Drops every queued and running request (their completions are never returned), e.g.
        after a failed step, so the request that broke it is not stepped again in front of
        the next ones. A program that failed after taking the donated cache leaves it deleted:
        a zeroed one replaces it (every slot is free, so nothing in it is needed)."""
        self.waiting.clear()
        self.active = [None] * len(self.active)
        self.host.live[:] = False
        self.cache = jax.tree.map(
            lambda a: jnp.zeros(a.shape, a.dtype) if a.is_deleted() else a, self.cache
        )

    # -- scheduling ------------------------------------------------------------------------

    def _admit(self) -> None:
        for slot, entry in enumerate(self.active):
            if entry is None and self.waiting:
                self.active[slot] = self.waiting.popleft()
                self.host.live[slot] = False
                self.host.length[slot] = 0

    def _prefill(self, finished, budget: int) -> None:
        """Prompt chunks for slots still prefilling: at most `budget` of them (0: all)."""
        done = 0
        for slot, entry in enumerate(self.active):
            if entry is None or self.host.live[slot]:
                continue
            while entry.prefilled < len(entry.request.prompt):
                if budget and done == budget:
                    return
                self._prefill_chunk(slot, entry, finished)
                done += 1

    def _reuse_opening(self, slot: int, entry: _Active) -> None:
        """Copies the stored chunks that open the request's prompt into its slot."""
        for block in self.prefix.match(entry.request.prompt):
            self.cache = programs.write_block(
                self.cache, block, jnp.int32(slot), jnp.int32(entry.prefilled)
            )
            entry.prefilled += self.prefill_chunk
        self.host.length[slot] = entry.prefilled

    def _prefill_chunk(self, slot: int, entry: _Active, finished) -> None:
        prompt = entry.request.prompt
        if entry.prefilled == 0:
            self._reuse_opening(slot, entry)
        start = entry.prefilled
        piece = list(prompt[start : start + self.prefill_chunk])
        T = bucket_length(len(piece))
        tokens = np.zeros((1, T), np.int32)
        tokens[0, : len(piece)] = piece
        self.cache, logits = programs.prefill_slot(
            self.params,
            self.cache,
            jnp.int32(slot),
            jnp.asarray(tokens),
            jnp.int32(start),
            jnp.int32(len(piece) - 1),
            cfg=self.cfg,
            window=self._round(start + T),
        )
        self.prefill_calls += 1
        entry.prefilled += len(piece)
        opening = prompt[: entry.prefilled]
        if len(piece) == self.prefill_chunk and self.prefix.wants(opening):
            block = programs.read_block(
                self.cache, jnp.int32(slot), jnp.int32(start), size=self.prefill_chunk
            )
            self.prefix.add(opening, block)
        # While it prefills, the slot still runs in decode calls: its throwaway write lands at
        # `length`, the next chunk's first slot, which that chunk overwrites.
        self.host.length[slot] = entry.prefilled
        if entry.prefilled == len(prompt):
            self._start_decoding(slot, entry, logits, finished)

    def _start_decoding(self, slot: int, entry: _Active, logits, finished) -> None:
        """Samples the request's first token from its prompt's logits and makes the slot live."""
        sampling, h = entry.request.sampling, self.host
        h.temperature[slot] = sampling.temperature
        h.top_k[slot] = sampling.top_k
        h.top_p[slot] = sampling.top_p
        h.greedy[slot] = sampling.greedy
        h.key[slot] = _key_data(entry.request.key)
        h.row[slot] = entry.request.row
        h.limit[slot] = sampling.max_new_tokens
        token, logprob = programs.first_token(
            logits, h.settings(slice(slot, slot + 1)), filtered=_filters(sampling)
        )
        token = int(token)
        h.token[slot] = token
        h.length[slot] = len(entry.request.prompt)
        h.produced[slot] = 1
        h.live[slot] = True
        ended = token in self.eos_set or sampling.max_new_tokens == 1
        if ended:
            h.live[slot] = False
        self._take(slot, entry, [token], [float(logprob)], ended, finished)

    def _decode(self, finished) -> None:
        h = self.host
        longest = int(h.length[h.live].max())
        window = self._round(longest + self.steps_per_call)
        filtered = any(
            _filters(a.request.sampling) for a, live in zip(self.active, h.live) if a and live
        )
        was_live = h.live.copy()
        self.cache, state, out = programs.decode(
            self.params,
            self.cache,
            h.device_state(),
            self.eos,
            cfg=self.cfg,
            window=window,
            steps=self.steps_per_call,
            filtered=filtered,
        )
        steps = int(out.steps)
        tokens, logprobs = np.asarray(out.tokens)[:, :steps], np.asarray(out.logprobs)[:, :steps]
        h.token, h.length = np.array(state.token), np.array(state.length)
        h.live, h.produced = np.array(state.live), np.array(state.produced)
        self.decode_calls += 1
        self.decode_steps += steps
        for slot in np.flatnonzero(was_live):
            got = tokens[slot] >= 0
            self._take(
                slot,
                self.active[slot],
                tokens[slot][got].tolist(),
                logprobs[slot][got].tolist(),
                not h.live[slot],
                finished,
            )

    def _take(self, slot, entry: _Active, tokens, logprobs, ended: bool, finished) -> None:
        """Appends a slot's new tokens; ends the request on EOS, its limit or a stop string."""
        entry.tokens.extend(tokens)
        entry.logprobs.extend(logprobs)
        reason = None
        if ended:
            reason = EOS if entry.tokens[-1] in self.eos_set else MAX_TOKENS
        stops = entry.request.stop_strings
        if stops:
            hit = first_stop_string_end(entry.tokens, stops, self.tokenizer)
            if hit is not None:
                n = hit[0]
                if not (n == len(entry.tokens) and reason == EOS):
                    reason = STOP_STRING
                del entry.tokens[n:], entry.logprobs[n:]
        if reason is None:
            return
        self.host.live[slot] = False
        self.active[slot] = None
        completion = Completion(entry.request, entry.tokens, entry.logprobs, reason)
        finished.append((entry.rid, completion))

    # -- shapes ----------------------------------------------------------------------------

    def _round(self, n: int) -> int:
        """n slots rounded up to the window block (the attention windows' buckets), at most
        the cache's size once it has one."""
        rounded = -(-int(n) // self.window_block) * self.window_block
        return min(rounded, getattr(self, "size", rounded))


def _filters(sampling) -> bool:
    return not sampling.greedy and (sampling.top_k > 0 or sampling.top_p < 1.0)
