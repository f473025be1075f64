"""memjax: reinforcement learning for LLM memory agents in JAX."""

__version__ = "0.1.0"
