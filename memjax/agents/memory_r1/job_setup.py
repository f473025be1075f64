"""What every Memory-R1 job reads from its config: conversations, questions, models, settings."""

from __future__ import annotations

import json
from pathlib import Path

from ml_collections import ConfigDict

from memjax.agents.memory_r1.answer_env import ANSWER_TEMPLATES, AnswerSettings
from memjax.agents.memory_r1.construction import (
    FACT_TEMPLATES,
    MANAGER_TEMPLATES,
    ConstructionSettings,
)
from memjax.agents.memory_r1.models import load_agent_model, sampler_policy
from memjax.agents.memory_r1.policy import TimedPolicy
from memjax.agents.memory_r1.sources import registered, source_for
from memjax.data.categories import ADVERSARIAL
from memjax.data.locomo import load_locomo
from memjax.data.locomo_types import Conversation
from memjax.data.splits import MEMORY_R1_TRAIN_IDS, MEMORY_R1_VALIDATION_IDS, SplitSummary
from memjax.errors import ConfigError, DataError
from memjax.eval.judge import JUDGE_TEMPLATE
from memjax.fingerprint import path_stamp
from memjax.remote import openai_source
from memjax.text.prompt_templates import PromptTemplate, templates_from_config

SPLITS = ("train", "validation", "test", "all")


def load_conversations(data: ConfigDict) -> list[Conversation]:
    source = source_for(data)
    if source is not None:
        return source.conversations(data)
    if not Path(data.path).is_file():
        names = " or ".join(repr(n) for n in registered()) or "a registered source"
        raise DataError(
            f"config.data.path={data.path!r} does not exist (LoCoMo's locomo10.json, or {names})"
        )
    return load_locomo(data.path)


def split_ids(conversations: list[Conversation], split: str, data: ConfigDict) -> list[str]:
    """Memory-R1's split (conv-26 train, conv-30 validation, the rest test); a registered
    source's data: that source's split (`sources.ConversationSource.split_ids`)."""
    if split not in SPLITS:
        raise ConfigError(f"config.data.split={split!r}; choose from {SPLITS}")
    ids = [c.sample_id for c in conversations]
    if split == "all":
        return ids
    source = source_for(data)
    if source is not None:
        return source.split_ids(ids, split, data)
    train, val = set(MEMORY_R1_TRAIN_IDS), set(MEMORY_R1_VALIDATION_IDS)
    parts = {
        "train": [i for i in ids if i in train],
        "validation": [i for i in ids if i in val],
        "test": [i for i in ids if i not in train | val],
    }
    return parts[split]


def split_summary(conversations: list[Conversation], data: ConfigDict) -> SplitSummary:
    """What a report states about its questions: the scored part and every part's size."""
    by_id = {c.sample_id: c for c in conversations}

    def count(ids) -> int:
        return sum(len(questions(by_id[i], data)) for i in ids)

    if data.conversations:
        chosen = [i.strip() for i in str(data.conversations).split(",") if i.strip()]
        name = "conversations " + ", ".join(chosen)
    else:
        chosen, name = split_ids(conversations, data.split, data), str(data.split)
    source = source_for(data)
    if source is not None:
        how = source.how(data)
    else:
        how = "LoCoMo by conversation: conv-26 train, conv-30 validation, the rest test"
    sizes = {part: count(split_ids(conversations, part, data)) for part in SPLITS[:3]}
    sizes["scored"] = count(chosen)
    how += f"; {len(chosen)} conversations scored"
    if int(data.max_questions) > 0:
        how += f", at most {int(data.max_questions)} questions each"
    return SplitSummary(name, sizes, how)


def select_conversations(
    conversations: list[Conversation], data: ConfigDict, split: str | None = None
) -> list[Conversation]:
    """config.data.conversations (comma-separated ids) if set, else the split."""
    by_id = {c.sample_id: c for c in conversations}
    if data.conversations:
        wanted = [i.strip() for i in str(data.conversations).split(",") if i.strip()]
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise ConfigError(
                f"config.data.conversations: {missing} not in the data; have {sorted(by_id)}"
            )
    else:
        wanted = split_ids(conversations, split or data.split, data)
    return [by_id[i] for i in wanted]


def questions(conversation: Conversation, data: ConfigDict) -> list:
    """QA items to answer: category 5 only when asked for; at most max_questions."""
    items = [
        q
        for q in conversation.qa
        if (q.category != ADVERSARIAL or data.include_adversarial)
        and (q.answer is not None or q.category == ADVERSARIAL)
    ]
    return items[: int(data.max_questions)] if int(data.max_questions) > 0 else items


def agent_spec(config: ConfigDict, role: str) -> ConfigDict:
    """The model of a role (manager, answer, teacher, judge): its own source if set, else
    config.model's; its trained weights, if any."""
    own = config[role]
    return ConfigDict(
        {
            "source": own.source or config.model.source,
            "param_dtype": own.param_dtype or config.model.param_dtype,
            "trained": own.get("trained", "") or "",
            "remat": config.model.get("remat", "") or "none",
        }
    )


def policy_for(
    config: ConfigDict, role: str, max_new_tokens: int, batch_size: int, name: str | None = None
) -> TimedPolicy:
    """A greedy, timed ChatPolicy for a role (evaluation and construction decode greedily);
    an `openai:MODEL@URL` source is called over HTTP at temperature 0."""
    spec = agent_spec(config, role)
    if openai_source.is_openai_source(spec.source):
        remote = remote_model(config, spec.source)
        return TimedPolicy(remote.chat_policy(max_new_tokens), name or role, batch_size=batch_size)
    model = load_agent_model(spec)
    policy = sampler_policy(
        model,
        {"greedy": True, "temperature": 1.0, "max_new_tokens": max_new_tokens},
        batch_size=batch_size,
        seed=int(config.seed),
        max_prompt_tokens=int(config.construction.max_prompt_tokens),
        engine_slots=int(config.construction.get("engine_slots", 0) or 0),
    )
    return TimedPolicy(policy, name or role, batch_size=batch_size)


def remote_model(config: ConfigDict, source: str) -> openai_source.OpenAIModel:
    settings = openai_source.settings_from_config(config.get("openai"))
    return openai_source.shared_model(source, settings)


def describe_model(config: ConfigDict, role: str) -> str:
    """A role's model as a report names it: an endpoint's model and URLs, or local weights."""
    spec = agent_spec(config, role)
    if openai_source.is_openai_source(spec.source):
        model, urls = openai_source.parse_source(spec.source)
        return f"{model} via OpenAI-compatible API at {', '.join(urls)}"
    return f"{spec.trained or spec.source} (memjax sampler, greedy)"


def call_inputs(config: ConfigDict, role: str, max_new_tokens: int) -> dict:
    """What besides its prompts decides a `policy_for` call's completions: the role's model
    and the greedy decoding's limits (the keys of a call_cache.CallCache)."""
    return {
        **model_identity(config, role),
        "greedy": True,
        "max_new_tokens": int(max_new_tokens),
        "construction.max_prompt_tokens": int(config.construction.max_prompt_tokens),
    }


def model_identity(config: ConfigDict, role: str) -> dict:
    """The fingerprint fields of a role's model: where its weights come from and their dtype
    (the `stamp` of local weights changes when they are retrained in place)."""
    spec = agent_spec(config, role)
    weights = spec.trained or spec.source
    return {
        f"{role}.source": spec.source,
        f"{role}.trained": spec.trained,
        f"{role}.param_dtype": spec.param_dtype,
        f"{role}.stamp": path_stamp(weights) if weights else "",
    }


def embedder_identity(config: ConfigDict) -> dict:
    e = config.embedder
    return {
        "embedder.source": e.source,
        "embedder.layout": e.layout or "",
        "embedder.stamp": path_stamp(e.source),
    }


def fact_role(config: ConfigDict) -> str:
    """The role whose model extracts facts: "facts" when `config.facts` names its own source
    or trained weights, else "manager" (one memory model writes the facts and manages them).

    A separate extractor lets a manager trained on its decisions alone be measured end to end:
    a model tuned on manager rows only forgets how to extract facts."""
    own = config.get("facts")
    return "facts" if own is not None and (own.get("source") or own.get("trained")) else "manager"


def fact_and_manager_policies(config: ConfigDict) -> tuple[TimedPolicy, TimedPolicy]:
    """The greedy fact extractor and memory manager that build a bank."""
    c = config.construction
    facts = policy_for(
        config, fact_role(config), c.fact_max_new_tokens, c.batch_size, "fact_extraction"
    )
    manager = policy_for(config, "manager", c.manager_max_new_tokens, c.batch_size, "manager")
    return facts, manager


def bank_inputs(config: ConfigDict, role: str = "manager") -> dict:
    """What besides the conversation and the construction settings decides a bank: the model
    that extracts facts and manages memory (and a separate fact extractor's, when set), the
    embedder, and the generation settings (greedy decoding, so these fix the outputs). Batch
    size is left out: it does not change them."""
    c = config.construction
    extractor = model_identity(config, "facts") if fact_role(config) == "facts" else {}
    return {
        **model_identity(config, role),
        **(extractor if role == "manager" else {}),
        **embedder_identity(config),
        "construction.fact_max_new_tokens": int(c.fact_max_new_tokens),
        "construction.manager_max_new_tokens": int(c.manager_max_new_tokens),
        "construction.max_prompt_tokens": int(c.max_prompt_tokens),
    }


def fact_inputs(config: ConfigDict) -> dict:
    """What besides the conversation and the fact prompts decides the extracted facts: the
    extractor's model (named by what it is, not by the role that lends it: the SFT model as
    the manager's own extractor and as a trained manager's separate one is one extractor) and
    its generation settings."""
    identity = model_identity(config, fact_role(config))
    c = config.construction
    return {
        **{"extractor." + k.split(".", 1)[1]: v for k, v in identity.items()},
        "construction.fact_max_new_tokens": int(c.fact_max_new_tokens),
        "construction.max_prompt_tokens": int(c.max_prompt_tokens),
    }


def load_embedder(config: ConfigDict):
    from memjax.memory.embedder import Embedder

    return Embedder.load(config.embedder.source, layout=config.embedder.layout or None)


PROMPT_DEFAULTS = {
    **FACT_TEMPLATES,
    **MANAGER_TEMPLATES,
    **ANSWER_TEMPLATES,
    JUDGE_TEMPLATE.name: JUDGE_TEMPLATE,
}


def prompt_templates(config: ConfigDict) -> dict[str, PromptTemplate]:
    """Every Memory-R1 prompt's template: `config.prompts.<name>` (a file) or memjax's own;
    a bad file is one error naming it and its placeholders, raised at job start."""
    return templates_from_config(config.get("prompts"), PROMPT_DEFAULTS, "config.prompts")


def construction_settings(config: ConfigDict) -> ConstructionSettings:
    c = config.construction
    return ConstructionSettings(
        related_k=int(c.related_k),
        fact_context_turns=int(c.fact_context_turns),
        templates=prompt_templates(config),
    )


def answer_settings(config: ConfigDict) -> AnswerSettings:
    a = config.answer_agent
    return AnswerSettings(
        distill=bool(a.distill),
        metric=str(a.metric),
        style=str(a.style),
        answer_prefix=str(a.get("answer_prefix", "")),
        templates=prompt_templates(config),
    )


def write_json(path: Path, obj) -> None:
    """Atomic JSON write (a reader never sees half a file)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, ensure_ascii=False))
    tmp.replace(path)
