"""The Mem0-compatible memory service on 127.0.0.1 (memjax.serving.memory_server).

    python -m memjax.launch --config=configs/memory_serve.py --workdir=/tmp/memsvc \
        --config.server.port=8765 --config.memory.manager.source=packaged:smollm2

Each role (facts, manager, answer) is "scripted" (no model), a memjax model source
('packaged:smollm2', an HF directory, a .gguf) or a training workdir (its exported policy/);
`trained` points a role at trained weights over its source's tokenizer. Banks live in
memory.root, or <workdir>/memories when it is empty.
"""

from ml_collections import ConfigDict


def _role(source: str = "scripted") -> ConfigDict:
    return ConfigDict(
        {
            "source": source,
            "trained": "",
            "max_new_tokens": 0,  # 0: the role's default (facts 96, manager 256, answer 64)
            "param_dtype": "float32",
            "batch_size": 16,
            "max_prompt_tokens": 4096,
        }
    )


def get_config() -> ConfigDict:
    config = ConfigDict()
    config.job = "memory.serve"
    config.log_level = "warning"
    config.server = ConfigDict(
        {
            "host": "127.0.0.1",  # loopback only; 0.0.0.0 exposes every user's memories
            "port": 8765,
            "max_body_bytes": 1 << 20,
        }
    )
    config.memory = ConfigDict(
        {
            "root": "",
            "facts": _role(),
            "manager": _role(),
            "answer": _role(),
            "embedder": "packaged:minilm",
            "embedder_layout": "",
            "related_k": 10,
        }
    )
    return config
