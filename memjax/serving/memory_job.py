"""The `memory.serve` job: the Mem0-compatible memory service (configs/memory_serve.py).

    python -m memjax.launch --config=configs/memory_serve.py --config.server.port=8765 \
        --config.memory.manager.source=/runs/mr1_grpo_s0_manager

The config becomes typed settings here (ServerSettings, MemoryConfig), checked before any
model or bank loads; each bad field is one ConfigError naming it. The banks live in
`config.memory.root`, or in <workdir>/memories when that is empty.
"""

from __future__ import annotations

from pathlib import Path

from memjax.errors import ConfigError
from memjax.memory_layer import MemoryConfig
from memjax.serving.memory_server import ServerSettings


def serve_settings(config, workdir) -> tuple[ServerSettings, MemoryConfig]:
    s = config.server
    host, port, max_body = str(s.host), int(s.port), int(s.max_body_bytes)
    if not host:
        raise ConfigError("config.server.host is empty (127.0.0.1 serves this machine only)")
    if not 0 <= port <= 65535:
        raise ConfigError(f"config.server.port={port}: expected 0..65535")
    if max_body < 1:
        raise ConfigError(f"config.server.max_body_bytes={max_body}: must be >= 1")
    section = config.memory.to_dict()
    if not section.get("root"):
        if not workdir:
            raise ConfigError("config.memory.root is empty and no --workdir: where do banks live?")
        section["root"] = str(Path(workdir) / "memories")
    return ServerSettings(host, port, max_body), MemoryConfig.from_dict(section)


def serve_job(config, workdir) -> None:
    import uvicorn

    from memjax.memory_layer import Memory
    from memjax.serving.memory_server import make_app

    settings, memory_config = serve_settings(config, workdir)
    memory = Memory.from_config(memory_config)
    app = make_app(memory, settings)
    print(
        f"memory service over {memory_config.root} (manager: {memory_config.manager.source}) "
        f"on http://{settings.host}:{settings.port}",
        flush=True,
    )
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=str(config.log_level))
