"""The `serve.openai` job: a memjax model behind an OpenAI-compatible API (configs/serve.py).

    python -m memjax.launch --config=configs/serve.py \
        --config.model.source=packaged:smollm2 --config.server.port=8000

The config becomes typed settings here, checked before the weights load; the model is any
memjax model source (packaged:..., an HF directory, a .gguf, a training workdir).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from memjax.errors import ConfigError
from memjax.serving.openai_app import ServerSettings, make_app


@dataclasses.dataclass(frozen=True)
class ServeConfig:
    source: str
    param_dtype: str
    host: str
    port: int
    api: ServerSettings
    log_level: str = "warning"


def model_name(source: str) -> str:
    """The served model's default name: a packaged model's name, else the path's last part."""
    if source.startswith("packaged:"):
        return source.split(":", 1)[1]
    path = Path(source).expanduser()
    return path.stem if path.suffix == ".gguf" else path.name


def serve_config(config) -> ServeConfig:
    """Typed settings from the config; each bad field is one ConfigError naming it."""
    source = str(config.model.source)
    if not source:
        raise ConfigError("config.model.source is empty: name a memjax model source")
    s = config.server
    port = int(s.port)
    if not 0 <= port <= 65535:
        raise ConfigError(f"config.server.port={port}: expected 0..65535")
    positive = (
        "max_body_bytes",
        "max_prompt_tokens",
        "max_tokens",
        "default_max_tokens",
        "max_n",
        "max_batch_rows",
    )
    for name in positive:
        if int(s[name]) < 1:
            raise ConfigError(f"config.server.{name}={s[name]!r}: must be >= 1")
    if int(s.default_max_tokens) > int(s.max_tokens):
        raise ConfigError(
            f"config.server.default_max_tokens={s.default_max_tokens}: over max_tokens "
            f"({s.max_tokens})"
        )
    if float(s.batch_window_ms) < 0:
        raise ConfigError(f"config.server.batch_window_ms={s.batch_window_ms}: must be >= 0")
    if not isinstance(s.engine, bool):
        raise ConfigError(f"config.server.engine={s.engine!r}: expected True or False")
    if int(s.slots) < 1:
        raise ConfigError(f"config.server.slots={s.slots!r}: must be >= 1")
    if int(s.max_len) != 0 and int(s.max_len) < 2:
        raise ConfigError(
            f"config.server.max_len={s.max_len!r}: must be >= 2, or 0 for max_prompt_tokens "
            "+ max_tokens"
        )
    api = ServerSettings(
        model_name=str(s.model_name or model_name(source)),
        max_body_bytes=int(s.max_body_bytes),
        max_prompt_tokens=int(s.max_prompt_tokens),
        max_tokens=int(s.max_tokens),
        default_max_tokens=int(s.default_max_tokens),
        max_n=int(s.max_n),
        batch_window_ms=float(s.batch_window_ms),
        max_batch_rows=int(s.max_batch_rows),
        seed=int(config.seed),
        engine=bool(s.engine),
        slots=int(s.slots),
        max_len=int(s.max_len),
    )
    return ServeConfig(source, str(config.model.param_dtype), str(s.host), port, api)


def serve_job(config, workdir) -> None:
    import uvicorn

    from memjax.checkpoints import load_model

    settings = serve_config(config)
    model = load_model(settings.source, param_dtype=settings.param_dtype)
    app = make_app(model, settings.api)
    print(
        f"serving {settings.api.model_name!r} ({settings.source}) on "
        f"http://{settings.host}:{settings.port}/v1",
        flush=True,
    )
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level)
