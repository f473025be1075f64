"""What every Memory-R1 job reads from its config: conversations, questions, models, settings."""

from __future__ import annotations

import json
from pathlib import Path

from ml_collections import ConfigDict

from memjax.agents.memory_r1.answer_env import AnswerSettings
from memjax.agents.memory_r1.construction import ConstructionSettings
from memjax.agents.memory_r1.models import load_agent_model, sampler_policy
from memjax.agents.memory_r1.policy import TimedPolicy
from memjax.data.categories import ADVERSARIAL
from memjax.data.locomo import load_locomo
from memjax.data.locomo_types import Conversation
from memjax.data.splits import MEMORY_R1_TRAIN_IDS, MEMORY_R1_VALIDATION_IDS
from memjax.data.synthetic import SyntheticConfig, generate_conversations
from memjax.errors import ConfigError, DataError
from memjax.fingerprint import path_stamp

SPLITS = ("train", "validation", "test", "all")


def load_conversations(data: ConfigDict) -> list[Conversation]:
    if data.path == "synthetic":
        s = data.synthetic
        return generate_conversations(
            SyntheticConfig(
                num_conversations=int(s.num_conversations),
                sessions_per_conversation=int(s.sessions_per_conversation),
                seed=int(s.seed),
            )
        )
    if not Path(data.path).is_file():
        raise DataError(
            f"config.data.path={data.path!r} does not exist (LoCoMo's locomo10.json, or "
            "'synthetic')"
        )
    return load_locomo(data.path)


def split_ids(conversations: list[Conversation], split: str, synthetic: bool) -> list[str]:
    """Memory-R1's split (conv-26 train, conv-30 validation, the rest test); synthetic data:
    first half train, then one validation, the rest test."""
    if split not in SPLITS:
        raise ConfigError(f"config.data.split={split!r}; choose from {SPLITS}")
    ids = [c.sample_id for c in conversations]
    if split == "all":
        return ids
    if synthetic:
        half = max(1, len(ids) // 2)
        parts = {"train": ids[:half], "validation": ids[half : half + 1]}
        parts["test"] = ids[half + 1 :] or ids[half:]
        return parts[split]
    train, val = set(MEMORY_R1_TRAIN_IDS), set(MEMORY_R1_VALIDATION_IDS)
    parts = {
        "train": [i for i in ids if i in train],
        "validation": [i for i in ids if i in val],
        "test": [i for i in ids if i not in train | val],
    }
    return parts[split]


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
        wanted = split_ids(conversations, split or data.split, data.path == "synthetic")
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
    """A greedy, timed ChatPolicy for a role (evaluation and construction decode greedily)."""
    model = load_agent_model(agent_spec(config, role))
    policy = sampler_policy(
        model,
        {"greedy": True, "temperature": 1.0, "max_new_tokens": max_new_tokens},
        batch_size=batch_size,
        seed=int(config.seed),
        max_prompt_tokens=int(config.construction.max_prompt_tokens),
    )
    return TimedPolicy(policy, name or role, batch_size=batch_size)


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


def bank_inputs(config: ConfigDict, role: str = "manager") -> dict:
    """What besides the conversation and the construction settings decides a bank: the model
    that extracts facts and manages memory, the embedder, and the generation settings (greedy
    decoding, so these fix the outputs). Batch size is left out: it does not change them."""
    c = config.construction
    return {
        **model_identity(config, role),
        **embedder_identity(config),
        "construction.fact_max_new_tokens": int(c.fact_max_new_tokens),
        "construction.manager_max_new_tokens": int(c.manager_max_new_tokens),
        "construction.max_prompt_tokens": int(c.max_prompt_tokens),
    }


def load_embedder(config: ConfigDict):
    from memjax.memory.embedder import Embedder

    return Embedder.load(config.embedder.source, layout=config.embedder.layout or None)


def construction_settings(config: ConfigDict) -> ConstructionSettings:
    c = config.construction
    return ConstructionSettings(
        related_k=int(c.related_k), fact_context_turns=int(c.fact_context_turns)
    )


def answer_settings(config: ConfigDict) -> AnswerSettings:
    a = config.answer_agent
    return AnswerSettings(
        distill=bool(a.distill),
        metric=str(a.metric),
        style=str(a.style),
        answer_prefix=str(a.get("answer_prefix", "")),
    )


def write_json(path: Path, obj) -> None:
    """Atomic JSON write (a reader never sees half a file)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, ensure_ascii=False))
    tmp.replace(path)
