"""Serve a memjax model over an OpenAI-compatible API on 127.0.0.1 (docs/serving.md).

    python -m memjax.launch --config=configs/serve.py \
        --config.model.source=packaged:smollm2 --config.server.port=8000

`model.source` is any memjax model source: packaged:smollm2, an HF directory, a .gguf file, or
a training workdir (its exported policy/).
"""

from ml_collections import ConfigDict


def get_config() -> ConfigDict:
    config = ConfigDict()
    config.job = "serve.openai"
    config.seed = 0  # the server's key for unseeded sampling
    config.model = ConfigDict({"source": "packaged:smollm2", "param_dtype": "float32"})
    config.server = ConfigDict()
    config.server.host = "127.0.0.1"  # loopback only; set 0.0.0.0 deliberately to expose it
    config.server.port = 8000
    config.server.model_name = ""  # the name clients send; empty: from the source
    config.server.max_body_bytes = 1 << 20
    config.server.max_prompt_tokens = 4096
    config.server.max_tokens = 1024  # the most one request may ask for
    config.server.default_max_tokens = 256  # a chat request that names no max_tokens
    config.server.max_n = 8
    # The continuous-batching engine: a request joins the ones decoding as it arrives.
    config.server.engine = True
    config.server.slots = 8  # requests decoding at once
    config.server.max_len = 0  # prompt + max_tokens per slot; 0: max_prompt_tokens + max_tokens
    # engine=False: the lock-step sampler; requests arriving within this window of each other
    # share one sampler call.
    config.server.batch_window_ms = 5.0
    config.server.max_batch_rows = 32
    return config
