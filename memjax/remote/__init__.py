"""memjax.remote: models memjax calls over HTTP (any OpenAI-compatible endpoint)."""
