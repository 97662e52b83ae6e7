"""Probes and distributed alignment search: where a variable is readable, and where causal (probe, das, over a run's history)."""
