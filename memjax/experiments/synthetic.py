"""Synthetic LoCoMo-format conversations whose facts change over dated sessions.

Two people chat across sessions. Each person has a few fact *tracks* (dogs, an allergy, a
city, a job, a hobby); a track states a fact in one session and may add to it (a second dog),
refine it (an allergy narrowed from "nuts" to "peanuts") or contradict it (a move, a new job,
a dropped hobby) in a later one. Questions ask for the *latest* state, so a memory that only
ever ADDs answers wrongly: exactly what a memory manager must learn to UPDATE or DELETE.

Turns and answers are short (a few words) so that a 135M model on CPU can handle them.
Output is the LoCoMo JSON schema, read by the same loader as the real file. Deterministic:
the same config (seed included) gives the same conversations.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import random
from typing import Any

from memjax.data.categories import MULTI_HOP, OPEN_DOMAIN, SINGLE_HOP, TEMPORAL
from memjax.data.locomo import parse_locomo
from memjax.data.locomo_types import Conversation

NAMES = (
    "Alice", "Ben", "Carla", "Dev", "Emma", "Farid", "Gina", "Hugo", "Ines", "Jon",
    "Kara", "Leo", "Mia", "Nate", "Omar", "Pia", "Quinn", "Rosa", "Sam", "Tara",
)  # fmt: skip
DOG_NAMES = ("Max", "Bella", "Rex", "Luna", "Coco", "Milo", "Daisy", "Buddy", "Ruby", "Otis")
CITIES = ("Boston", "Denver", "Austin", "Seattle", "Chicago", "Miami", "Portland", "Dallas")
JOBS = ("nurse", "teacher", "chef", "pilot", "baker", "lawyer", "plumber", "designer")
HOBBIES = ("painting", "chess", "running", "yoga", "surfing", "pottery", "knitting", "climbing")
# (what they first think they are allergic to, what it turns out to be, a food to avoid)
ALLERGIES = (
    ("nuts", "peanuts", "peanut butter"),
    ("shellfish", "shrimp", "shrimp tacos"),
    ("fruit", "kiwi", "kiwi juice"),
    ("dairy", "cheese", "cheese pizza"),
)
TRACKS = ("dogs", "allergy", "city", "job", "hobby")
GREETINGS = (
    ("Hi {other}! How are you?", "Good, thanks! Any news?"),
    ("Hey {other}, long time!", "Hi! What's new?"),
    ("Hello {other}!", "Hey! How was your week?"),
)
FILLERS = (
    ("The weather is nice today.", "Yes, very sunny."),
    ("I watched a movie last night.", "Oh, which one?"),
    ("Work was busy this week.", "Hope you can rest soon."),
    ("I had pasta for lunch.", "Sounds tasty!"),
)


@dataclasses.dataclass(frozen=True)
class SyntheticConfig:
    num_conversations: int = 4
    sessions_per_conversation: int = 4  # at least 2, so a fact can change after it is stated
    # Every person gets these tracks (the papers' cases: a second dog, a refined allergy) ...
    always_tracks: tuple[str, ...] = ("dogs", "allergy")
    tracks_per_person: int = 3  # ... topped up with random others from TRACKS to this many
    change_probability: float = 0.7  # chance a track changes in a later session
    fillers_per_session: int = 1  # small-talk exchanges that carry no fact
    seed: int = 0
    start_date: datetime.date = datetime.date(2023, 5, 8)
    id_prefix: str = "syn"


@dataclasses.dataclass
class _Event:
    session: int
    speaker: str
    text: str
    reply: str
    track: str = ""
    value: str = ""  # the track's value this turn states (a dog's name, a city, ...)
    previous: str = ""  # the value it adds to, refines or replaces; "" when first stated
    dia_id: str = ""  # filled when the turn is placed


@dataclasses.dataclass(frozen=True)
class TrackEvent:
    """One turn in which a speaker states or changes a fact track: the ground truth that
    oracles and checks read (which turn carries which fact, and what it replaces)."""

    conversation_id: str
    dia_id: str
    speaker: str
    track: str  # one of TRACKS
    value: str
    previous: str  # "" for the first statement of a track

    @property
    def is_change(self) -> bool:
        return bool(self.previous)


def _locomo_date_time(rng: random.Random, day: datetime.date) -> str:
    hour, minute = rng.randint(1, 12), rng.choice((0, 15, 30, 45))
    half = rng.choice(("am", "pm"))
    return f"{hour}:{minute:02d} {half} on {day.day} {day.strftime('%B')}, {day.year}"


def _answer_date(day: datetime.date) -> str:
    return f"{day.day} {day.strftime('%B')} {day.year}"  # LoCoMo answers read "7 May 2023"


class _PersonBuilder:
    """Schedules one person's fact tracks and writes the questions about their latest state."""

    def __init__(self, rng: random.Random, cfg: SyntheticConfig, name: str, used_dogs: set[str]):
        self.rng, self.cfg, self.name = rng, cfg, name
        self.used_dogs = used_dogs
        self.events: list[_Event] = []
        # (question, answer, category, evidence, session whose date is the answer or None)
        self.qas: list[tuple[str, str, int, list[_Event], int | None]] = []

    def _sessions(self) -> tuple[int, int | None]:
        n = self.cfg.sessions_per_conversation
        first = self.rng.randint(1, n - 1)
        later = (
            self.rng.randint(first + 1, n)
            if self.rng.random() < self.cfg.change_probability
            else None
        )
        return first, later

    def _event(
        self, session: int, text: str, reply: str, track: str, value: str, previous: str = ""
    ) -> _Event:
        event = _Event(session, self.name, text, reply, track, value, previous)
        self.events.append(event)
        return event

    def _qa(self, question: str, answer: str, category: int, evidence: list[_Event]) -> None:
        self.qas.append((question, answer, category, evidence, None))

    def _date_qa(self, question: str, session: int, evidence: list[_Event]) -> None:
        self.qas.append((question, "", TEMPORAL, evidence, session))

    def _dog(self) -> str:
        name = self.rng.choice([d for d in DOG_NAMES if d not in self.used_dogs])
        self.used_dogs.add(name)
        return name

    def build(self, tracks: list[str]) -> None:
        for track in tracks:
            first, later = self._sessions()
            getattr(self, f"_track_{track}")(first, later)

    def _track_dogs(self, first: int, later: int | None) -> None:
        p, d1 = self.name, self._dog()
        e1 = self._event(
            first, f"I adopted a dog named {d1}!", f"Aw, {d1} is a cute name!", "dogs", d1
        )
        if later is None:
            self._qa(f"How many dogs does {p} have?", "one", SINGLE_HOP, [e1])
            return
        d2 = self._dog()
        e2 = self._event(
            later, f"We adopted a second dog, {d2}!", "Two dogs now, how fun!", "dogs", d2, d1
        )
        self._qa(f"How many dogs does {p} have?", "two", SINGLE_HOP, [e1, e2])
        self._qa(f"What are the names of {p}'s dogs?", f"{d1} and {d2}", MULTI_HOP, [e1, e2])
        self._date_qa(f"When did {p} adopt {d2}?", later, [e2])

    def _track_allergy(self, first: int, later: int | None) -> None:
        p = self.name
        general, specific, food = self.rng.choice(ALLERGIES)
        e1 = self._event(
            first,
            f"I found out I'm allergic to {general}.",
            "Oh no, be careful!",
            "allergy",
            general,
        )
        evidence, answer = [e1], general
        if later is not None:
            e2 = self._event(
                later,
                f"Update: it's only {specific}, not all {general}.",
                "Good to know!",
                "allergy",
                specific,
                general,
            )
            evidence, answer = [e1, e2], specific
        self._qa(f"What is {p} allergic to?", answer, SINGLE_HOP, evidence)
        self._qa(f"Should {p} avoid {food}?", "yes", OPEN_DOMAIN, evidence)

    def _track_city(self, first: int, later: int | None) -> None:
        p = self.name
        c1, c2 = self.rng.sample(CITIES, 2)
        e1 = self._event(first, f"I live in {c1} now.", f"{c1} sounds lovely!", "city", c1)
        if later is None:
            self._qa(f"Where does {p} live?", c1, SINGLE_HOP, [e1])
            return
        e2 = self._event(later, f"Big news: I moved to {c2}!", f"Wow, enjoy {c2}!", "city", c2, c1)
        self._qa(f"Where does {p} live?", c2, SINGLE_HOP, [e1, e2])
        self._date_qa(f"When did {p} move to {c2}?", later, [e2])

    def _track_job(self, first: int, later: int | None) -> None:
        p = self.name
        j1, j2 = self.rng.sample(JOBS, 2)
        e1 = self._event(first, f"I work as a {j1}.", f"A {j1}? Nice!", "job", j1)
        if later is None:
            self._qa(f"What is {p}'s job?", j1, SINGLE_HOP, [e1])
            return
        e2 = self._event(
            later, f"I quit my job. Now I'm a {j2}!", "Congrats on the new job!", "job", j2, j1
        )
        self._qa(f"What is {p}'s job?", j2, SINGLE_HOP, [e1, e2])

    def _track_hobby(self, first: int, later: int | None) -> None:
        p = self.name
        h1, h2 = self.rng.sample(HOBBIES, 2)
        e1 = self._event(first, f"I just started {h1}.", f"{h1.capitalize()} is fun!", "hobby", h1)
        if later is None:
            self._qa(f"What hobby is {p} into?", h1, SINGLE_HOP, [e1])
            return
        e2 = self._event(
            later, f"I gave up {h1}. Now I love {h2}.", f"Oh, {h2} sounds great!", "hobby", h2, h1
        )
        self._qa(f"What hobby is {p} into?", h2, SINGLE_HOP, [e1, e2])


def _conversation(
    rng: random.Random, cfg: SyntheticConfig, index: int
) -> tuple[dict[str, Any], list[_Event]]:
    speaker_a, speaker_b = rng.sample(NAMES, 2)
    used_dogs: set[str] = set()
    people = [_PersonBuilder(rng, cfg, name, used_dogs) for name in (speaker_a, speaker_b)]
    for person in people:
        others = [t for t in TRACKS if t not in cfg.always_tracks]
        extra = max(0, cfg.tracks_per_person - len(cfg.always_tracks))
        person.build(list(cfg.always_tracks) + rng.sample(others, extra))

    conversation: dict[str, Any] = {"speaker_a": speaker_a, "speaker_b": speaker_b}
    day = cfg.start_date + datetime.timedelta(days=rng.randint(0, 60))
    days: dict[int, datetime.date] = {}
    events = [e for p in people for e in p.events]
    for n in range(1, cfg.sessions_per_conversation + 1):
        days[n] = day
        opener = rng.choice((speaker_a, speaker_b))
        other = speaker_b if opener == speaker_a else speaker_a
        greet, answer = rng.choice(GREETINGS)
        pairs: list[tuple[str, str, str, str, _Event | None]] = [
            (opener, greet.format(other=other), other, answer, None)
        ]
        exchanges: list[tuple[str, str, str, str, _Event | None]] = [
            (e.speaker, e.text, speaker_b if e.speaker == speaker_a else speaker_a, e.reply, e)
            for e in events
            if e.session == n
        ]
        for _ in range(cfg.fillers_per_session):
            who = rng.choice((speaker_a, speaker_b))
            text, reply = rng.choice(FILLERS)
            exchanges.append((who, text, speaker_b if who == speaker_a else speaker_a, reply, None))
        rng.shuffle(exchanges)
        turns = []
        for speaker, text, replier, reply, event in pairs + exchanges:
            if event is not None:
                event.dia_id = f"D{n}:{len(turns) + 1}"
            turns.append({"speaker": speaker, "dia_id": f"D{n}:{len(turns) + 1}", "text": text})
            turns.append({"speaker": replier, "dia_id": f"D{n}:{len(turns) + 1}", "text": reply})
        conversation[f"session_{n}_date_time"] = _locomo_date_time(rng, day)
        conversation[f"session_{n}"] = turns
        day += datetime.timedelta(days=rng.randint(3, 30))

    qa = []
    for person in people:
        for question, answer, category, evidence, date_session in person.qas:
            if date_session is not None:
                answer = _answer_date(days[date_session])
            qa.append(
                {
                    "question": question,
                    "answer": answer,
                    "evidence": [e.dia_id for e in evidence],
                    "category": category,
                }
            )
    rng.shuffle(qa)
    sample = {"sample_id": f"{cfg.id_prefix}-{index}", "conversation": conversation, "qa": qa}
    return sample, sorted(events, key=_turn_order)


def _turn_order(event: _Event) -> tuple[int, int]:
    session, turn = event.dia_id[1:].split(":")
    return int(session), int(turn)


def _generate(cfg: SyntheticConfig) -> list[tuple[dict[str, Any], list[_Event]]]:
    if cfg.sessions_per_conversation < 2:
        raise ValueError("sessions_per_conversation must be at least 2")
    if not 1 <= cfg.tracks_per_person <= len(TRACKS):
        raise ValueError(f"tracks_per_person must be in 1..{len(TRACKS)}")
    unknown = [t for t in cfg.always_tracks if t not in TRACKS]
    if unknown:
        raise ValueError(f"always_tracks: unknown {unknown}; valid: {TRACKS}")
    rng = random.Random(cfg.seed)
    return [_conversation(rng, cfg, i) for i in range(cfg.num_conversations)]


def generate_locomo_json(cfg: SyntheticConfig = SyntheticConfig()) -> list[dict[str, Any]]:
    """LoCoMo-schema samples (a JSON-ready list), deterministic in cfg."""
    return [sample for sample, _ in _generate(cfg)]


def generate_track_events(cfg: SyntheticConfig = SyntheticConfig()) -> dict[str, list[TrackEvent]]:
    """conversation id -> its fact-track turns in dialogue order, for the same cfg as
    `generate_locomo_json` (same seed, same conversations)."""
    return {
        sample["sample_id"]: [
            TrackEvent(sample["sample_id"], e.dia_id, e.speaker, e.track, e.value, e.previous)
            for e in events
        ]
        for sample, events in _generate(cfg)
    }


def generate_conversations(cfg: SyntheticConfig = SyntheticConfig()) -> list[Conversation]:
    """Synthetic conversations, parsed by the LoCoMo loader (so they are valid by construction)."""
    return parse_locomo(generate_locomo_json(cfg), source=f"<synthetic seed={cfg.seed}>")


def write_synthetic_locomo(path: str | os.PathLike, cfg: SyntheticConfig = SyntheticConfig()):
    """Write a LoCoMo-format JSON file; returns the path."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(generate_locomo_json(cfg), f, indent=1)
    return path
