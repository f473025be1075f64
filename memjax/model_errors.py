"""Errors about the model a job is pointed at (a model source, a checkpoint directory, a GGUF
or safetensors file, a tokenizer). They are user errors (`memjax.launch` prints them as one
line) that keep their builtin kinds, so code catching FileNotFoundError or ValueError still does.
"""

from memjax.errors import CheckpointError


class WeightsError(CheckpointError, ValueError):
    """Weights that cannot be read or do not fit the model: a corrupt file, a bad tensor."""


class WeightsNotFoundError(CheckpointError, FileNotFoundError):
    """A model source, weights file, config.json or tokenizer that does not exist."""


__all__ = ["WeightsError", "WeightsNotFoundError"]
