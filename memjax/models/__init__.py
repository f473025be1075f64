"""Model families: the decoder (Llama 3.x, Qwen2/2.5), the BERT-family encoder, KV caches."""
