"""The CPU default: the packaged SmolLM2-135M-Instruct answers chat prompts greedily."""

from ml_collections import ConfigDict


def get_config() -> ConfigDict:
    config = ConfigDict()
    config.job = "model.generate"
    config.seed = 0
    config.model = ConfigDict({"source": "packaged:smollm2", "param_dtype": "float32"})
    config.prompts = [
        "What is the capital of France?",
        "Give me one tip for remembering people's names.",
    ]
    config.max_new_tokens = 48
    return config
