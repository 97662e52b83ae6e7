"""Attention heads: the atlas's probes and scores, their curves over history, ablation and importance."""
