"""What every Memory-R1 job sets up from its settings (run_settings.MemoryR1Run): conversations,
questions, models, and the inputs that key its caches."""

from __future__ import annotations

import json
from pathlib import Path

from memjax.agents.memory_r1.answer_env import AnswerSettings
from memjax.agents.memory_r1.construction import ConstructionSettings
from memjax.agents.memory_r1.models import load_agent_model, sampler_policy
from memjax.agents.memory_r1.policy import TimedPolicy
from memjax.agents.memory_r1.run_settings import DataSection, EmbedderSpec, MemoryR1Run, ModelSpec
from memjax.agents.memory_r1.sources import registered, source_for
from memjax.data.categories import ADVERSARIAL
from memjax.data.locomo import load_locomo
from memjax.data.locomo_types import Conversation
from memjax.data.splits import MEMORY_R1_TRAIN_IDS, MEMORY_R1_VALIDATION_IDS, SplitSummary
from memjax.errors import ConfigError, DataError
from memjax.fingerprint import path_stamp
from memjax.remote import openai_source

SPLITS = ("train", "validation", "test", "all")


def load_conversations(data: DataSection) -> list[Conversation]:
    source = source_for(data.path)
    if source is not None:
        return source.conversations(data.source_settings)
    if not Path(data.path).is_file():
        names = " or ".join(repr(n) for n in registered()) or "a registered source"
        raise DataError(
            f"config.data.path={data.path!r} does not exist (LoCoMo's locomo10.json, or {names})"
        )
    return load_locomo(data.path)


def split_ids(conversations: list[Conversation], split: str, data: DataSection) -> list[str]:
    """Memory-R1's split (conv-26 train, conv-30 validation, the rest test); a registered
    source's data: that source's split (`sources.ConversationSource.split_ids`)."""
    if split not in SPLITS:
        raise ConfigError(f"config.data.split={split!r}; choose from {SPLITS}")
    ids = [c.sample_id for c in conversations]
    if split == "all":
        return ids
    source = source_for(data.path)
    if source is not None:
        return source.split_ids(ids, split, data.source_settings)
    train, val = set(MEMORY_R1_TRAIN_IDS), set(MEMORY_R1_VALIDATION_IDS)
    parts = {
        "train": [i for i in ids if i in train],
        "validation": [i for i in ids if i in val],
        "test": [i for i in ids if i not in train | val],
    }
    return parts[split]


def split_summary(conversations: list[Conversation], data: DataSection) -> SplitSummary:
    """What a report states about its questions: the scored part and every part's size."""
    by_id = {c.sample_id: c for c in conversations}

    def count(ids) -> int:
        return sum(len(questions(by_id[i], data)) for i in ids)

    if data.conversations:
        chosen = data.conversation_ids
        name = "conversations " + ", ".join(chosen)
    else:
        chosen, name = split_ids(conversations, data.split, data), data.split
    source = source_for(data.path)
    if source is not None:
        how = source.how(data.source_settings)
    else:
        how = "LoCoMo by conversation: conv-26 train, conv-30 validation, the rest test"
    sizes = {part: count(split_ids(conversations, part, data)) for part in SPLITS[:3]}
    sizes["scored"] = count(chosen)
    how += f"; {len(chosen)} conversations scored"
    if data.max_questions > 0:
        how += f", at most {data.max_questions} questions each"
    return SplitSummary(name, sizes, how)


def select_conversations(
    conversations: list[Conversation], data: DataSection, split: str | None = None
) -> list[Conversation]:
    """config.data.conversations (comma-separated ids) if set, else the split."""
    by_id = {c.sample_id: c for c in conversations}
    if data.conversations:
        wanted = data.conversation_ids
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise ConfigError(
                f"config.data.conversations: {missing} not in the data; have {sorted(by_id)}"
            )
    else:
        wanted = split_ids(conversations, split or data.split, data)
    return [by_id[i] for i in wanted]


def questions(conversation: Conversation, data: DataSection) -> list:
    """QA items to answer: category 5 only when asked for; at most max_questions."""
    items = [
        q
        for q in conversation.qa
        if (q.category != ADVERSARIAL or data.include_adversarial)
        and (q.answer is not None or q.category == ADVERSARIAL)
    ]
    return items[: data.max_questions] if data.max_questions > 0 else items


def policy_for(
    run: MemoryR1Run, role: str, max_new_tokens: int, batch_size: int, name: str | None = None
) -> TimedPolicy:
    """A greedy, timed ChatPolicy for a role (evaluation and construction decode greedily);
    an `openai:MODEL@URL` source is called over HTTP at temperature 0."""
    spec = run.model(role)
    if openai_source.is_openai_source(spec.source):
        remote = openai_source.shared_model(spec.source, run.openai)
        return TimedPolicy(remote.chat_policy(max_new_tokens), name or role, batch_size=batch_size)
    model = load_agent_model(spec)
    policy = sampler_policy(
        model,
        {"greedy": True, "temperature": 1.0, "max_new_tokens": max_new_tokens},
        batch_size=batch_size,
        seed=run.seed,
        max_prompt_tokens=run.construction.max_prompt_tokens,
        engine_slots=run.construction.engine_slots,
    )
    return TimedPolicy(policy, name or role, batch_size=batch_size)


def describe_model(spec: ModelSpec) -> str:
    """A role's model as a report names it: an endpoint's model and URLs, or local weights."""
    if openai_source.is_openai_source(spec.source):
        model, urls = openai_source.parse_source(spec.source)
        return f"{model} via OpenAI-compatible API at {', '.join(urls)}"
    return f"{spec.weights} (memjax sampler, greedy)"


def call_inputs(run: MemoryR1Run, role: str, max_new_tokens: int) -> dict:
    """What besides its prompts decides a `policy_for` call's completions: the role's model
    and the greedy decoding's limits (the keys of a call_cache.CallCache)."""
    return {
        **model_identity(run.model(role), role),
        "greedy": True,
        "max_new_tokens": int(max_new_tokens),
        "construction.max_prompt_tokens": run.construction.max_prompt_tokens,
    }


def model_identity(spec: ModelSpec, role: str) -> dict:
    """The fingerprint fields of a role's model, named `<role>.<field>`: where its weights
    come from and their dtype (the `stamp` of local weights changes when they are retrained in
    place)."""
    weights = spec.weights
    return {
        f"{role}.source": spec.source,
        f"{role}.trained": spec.trained,
        f"{role}.param_dtype": spec.param_dtype,
        f"{role}.stamp": path_stamp(weights) if weights else "",
    }


def embedder_identity(embedder: EmbedderSpec) -> dict:
    return {
        "embedder.source": embedder.source,
        "embedder.layout": embedder.layout,
        "embedder.stamp": path_stamp(embedder.source),
    }


def fact_and_manager_policies(run: MemoryR1Run) -> tuple[TimedPolicy, TimedPolicy]:
    """The greedy fact extractor and memory manager that build a bank. A separate extractor
    (`run.fact_role` "facts") lets a manager trained on its decisions alone be measured end to
    end: a model tuned on manager rows only forgets how to extract facts."""
    c = run.construction
    facts = policy_for(run, run.fact_role, c.fact_max_new_tokens, c.batch_size, "fact_extraction")
    manager = policy_for(run, "manager", c.manager_max_new_tokens, c.batch_size, "manager")
    return facts, manager


def bank_inputs(run: MemoryR1Run, role: str = "manager") -> dict:
    """What besides the conversation and the construction settings decides a bank: the model
    that extracts facts and manages memory (and a separate fact extractor's, when set), the
    embedder, and the generation settings (greedy decoding, so these fix the outputs). Batch
    size is left out: it does not change them."""
    c = run.construction
    extractor = model_identity(run.model("facts"), "facts") if run.fact_role == "facts" else {}
    return {
        **model_identity(run.model(role), role),
        **(extractor if role == "manager" else {}),
        **embedder_identity(run.embedder),
        "construction.fact_max_new_tokens": c.fact_max_new_tokens,
        "construction.manager_max_new_tokens": c.manager_max_new_tokens,
        "construction.max_prompt_tokens": c.max_prompt_tokens,
    }


def fact_inputs(run: MemoryR1Run) -> dict:
    """What besides the conversation and the fact prompts decides the extracted facts: the
    extractor's model (named by what it is, not by the role that lends it: the SFT model as
    the manager's own extractor and as a trained manager's separate one is one extractor) and
    its generation settings."""
    identity = model_identity(run.model(run.fact_role), run.fact_role)
    c = run.construction
    return {
        **{"extractor." + k.split(".", 1)[1]: v for k, v in identity.items()},
        "construction.fact_max_new_tokens": c.fact_max_new_tokens,
        "construction.max_prompt_tokens": c.max_prompt_tokens,
    }


def load_embedder(embedder: EmbedderSpec):
    from memjax.memory.embedder import Embedder

    return Embedder.load(embedder.source, layout=embedder.layout or None)


def construction_settings(run: MemoryR1Run) -> ConstructionSettings:
    c = run.construction
    return ConstructionSettings(
        related_k=c.related_k, fact_context_turns=c.fact_context_turns, templates=run.templates
    )


def answer_settings(run: MemoryR1Run) -> AnswerSettings:
    a = run.answer_agent
    return AnswerSettings(
        distill=a.distill,
        metric=a.metric,
        style=a.style,
        answer_prefix=a.answer_prefix,
        templates=run.templates,
    )


def write_json(path: Path, obj) -> None:
    """Atomic JSON write (a reader never sees half a file)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, ensure_ascii=False))
    tmp.replace(path)
