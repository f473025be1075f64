"""memjax: reinforcement learning for LLM memory agents in JAX.

    import memjax
    memory = memjax.Memory.from_config(memjax.MemoryConfig(root="/tmp/mem"))  # Mem0's API
    model = memjax.load_model("packaged:smollm2")                             # params, cfg, tokenizer
    embedder = memjax.Embedder.load("packaged:minilm")

Subpackages: memjax.models (decoder, encoder, KV cache), memjax.sampling (the sampler and its
chat API), memjax.memory (bank, op log, embedder, indexes), memjax.rl (advantages, losses,
rollouts, the trainer), memjax.memory_layer (the Mem0-compatible memory layer). Names here
load on first use.
"""

from memjax.lazy_exports import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Memory": "memjax.memory_layer",
    "MemoryConfig": "memjax.memory_layer",
    "RoleSpec": "memjax.memory_layer",
    "load_model": "memjax.checkpoints",
    "LoadedModel": "memjax.checkpoints",
    "Embedder": "memjax.memory.embedder",
    "MemoryBank": "memjax.memory.bank",
    "SamplingParams": "memjax.sampling.sampling_params",
    "generate_chat": "memjax.sampling.chat",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["__version__", *_EXPORTS]
