"""Model families: the decoder (Llama 3.x, Qwen2/2.5), the BERT-family encoder, KV caches.

    from memjax.models import DecoderConfig, decoder, init_cache
    logits = decoder.forward(params, tokens, positions, cfg)

Names load on first use.
"""

from memjax.lazy_exports import lazy_exports

_EXPORTS = {
    "decoder": "memjax.models.decoder:",
    "encoder": "memjax.models.encoder:",
    "DecoderConfig": "memjax.models.config",
    "RopeScaling": "memjax.models.config",
    "decoder_config": "memjax.models.presets",
    "decoder_abstract": "memjax.models.decoder",
    "init_params": "memjax.models.params",
    "EncoderConfig": "memjax.models.encoder_config",
    "EmbeddingRecipe": "memjax.models.encoder_config",
    "KVCache": "memjax.models.kv_cache",
    "init_cache": "memjax.models.kv_cache",
    "cache_bytes": "memjax.models.kv_cache",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
