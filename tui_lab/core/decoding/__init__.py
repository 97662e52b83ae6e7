"""Loading a run for inference and decoding it: greedy and sampled, with a KV cache."""
