"""Decoding a model in hand: greedy and sampled with a KV cache, fill-mask, attention text."""
