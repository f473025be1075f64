"""TFDS builder for LoCoMo QA examples, written as array_record and read without TensorFlow.

LoCoMo cannot be downloaded by code (users fetch it themselves, CC BY-NC), so the builder reads
`locomo10.json` (or any LoCoMo-format file, e.g. a synthetic one) from a *manual* directory.
Each split holds one record per question (conversation id, question, answer, category,
evidence); the conversations themselves come from `memjax.data.locomo.load_locomo`.

    prepare_locomo_qa(manual_dir="/data/locomo", data_dir="/data/tfds")
    source = locomo_qa_source(data_dir="/data/tfds", split="train")  # random access, no TF
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from memjax.data.locomo import load_locomo
from memjax.data.splits import (
    MEMORY_R1_TRAIN_IDS,
    MEMORY_R1_VALIDATION_IDS,
    LocomoExample,
    split_by_conversation,
)


@dataclasses.dataclass(eq=False)
class LocomoQaConfig(tfds.core.BuilderConfig):
    filename: str = "locomo10.json"  # looked up in the manual dir
    train_ids: tuple[str, ...] = MEMORY_R1_TRAIN_IDS
    validation_ids: tuple[str, ...] = MEMORY_R1_VALIDATION_IDS
    include_adversarial: bool = False


MEMORY_R1 = LocomoQaConfig(
    name="memory_r1",
    description="Memory-R1 split: conv-26 train, conv-30 validation, the rest test; no cat 5.",
)
MEMORY_R1_WITH_ADVERSARIAL = LocomoQaConfig(
    name="memory_r1_with_adversarial",
    description="The Memory-R1 split with category 5 (adversarial) questions kept.",
    include_adversarial=True,
)


class LocomoQa(tfds.core.GeneratorBasedBuilder):
    """LoCoMo questions, one record each, split by conversation."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First release."}
    BUILDER_CONFIGS = [MEMORY_R1, MEMORY_R1_WITH_ADVERSARIAL]
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "Download data/locomo10.json from https://github.com/snap-research/locomo and place it "
        "in the manual directory (or pass a LocomoQaConfig with another filename)."
    )

    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls):
        # TFDS looks for a checksums file next to the builder's code, and on the way needs
        # `importlib_resources` (an optional etils extra this venv lacks). A manual-download
        # builder has no URLs to check, so there is no code path to consult.
        return None

    def _info(self) -> tfds.core.DatasetInfo:
        # Built directly (not dataset_info_from_configs) so the builder needs no package
        # metadata files next to it.
        return tfds.core.DatasetInfo(
            builder=self,
            description="LoCoMo QA examples for Memory-R1 training and evaluation.",
            features=tfds.features.FeaturesDict(
                {
                    "conversation_id": tfds.features.Text(),
                    "qa_index": np.int32,
                    "question": tfds.features.Text(),
                    "answer": tfds.features.Text(),  # "" when has_answer is False
                    "has_answer": np.bool_,
                    "category": np.int32,
                    "evidence": tfds.features.Sequence(tfds.features.Text()),
                    "adversarial_answer": tfds.features.Text(),  # "" when absent
                }
            ),
            homepage="https://github.com/snap-research/locomo",
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        path = os.path.join(dl_manager.manual_dir, self.builder_config.filename)
        cfg = self.builder_config
        split = split_by_conversation(
            load_locomo(path), cfg.train_ids, cfg.validation_ids, cfg.include_adversarial
        )
        return {
            name: self._generate_examples(examples) for name, examples in split.as_dict().items()
        }

    def _generate_examples(self, examples):
        for ex in examples:
            yield (
                ex.uid,
                {
                    "conversation_id": ex.conversation_id,
                    "qa_index": ex.qa_index,
                    "question": ex.question,
                    "answer": ex.answer or "",
                    "has_answer": ex.answer is not None,
                    "category": ex.category,
                    "evidence": list(ex.evidence),
                    "adversarial_answer": ex.adversarial_answer or "",
                },
            )


def prepare_locomo_qa(
    manual_dir: str | os.PathLike,
    data_dir: str | os.PathLike,
    config: str | LocomoQaConfig = "memory_r1",
) -> LocomoQa:
    """Build the array_record files once (a no-op when they exist)."""
    manual = os.fspath(manual_dir)
    if not os.path.isdir(manual):
        raise FileNotFoundError(f"manual_dir {manual} does not exist")
    builder = LocomoQa(data_dir=os.fspath(data_dir), config=config, file_format="array_record")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=manual))
    return builder


def locomo_qa_source(
    data_dir: str | os.PathLike, split: str, config: str | LocomoQaConfig = "memory_r1"
):
    """A random-access source over prepared records (tfds.data_source: no TensorFlow)."""
    return tfds.data_source(
        "locomo_qa",
        split=split,
        data_dir=os.fspath(data_dir),
        download=False,  # preparing needs the manual dir: call prepare_locomo_qa first
        builder_kwargs={"config": config},
    )


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def record_to_example(record: dict[str, Any]) -> LocomoExample:
    """A decoded TFDS record (bytes, numpy scalars) -> LocomoExample."""
    answer = _text(record["answer"]) if bool(record["has_answer"]) else None
    adversarial = _text(record["adversarial_answer"]) or None
    return LocomoExample(
        conversation_id=_text(record["conversation_id"]),
        qa_index=int(record["qa_index"]),
        question=_text(record["question"]),
        answer=answer,
        category=int(record["category"]),
        evidence=tuple(_text(e) for e in record["evidence"]),
        adversarial_answer=adversarial,
    )
