"""memjax.serving: HTTP services over memjax models (FastAPI + uvicorn on 127.0.0.1 by default)."""
