"""Interventions on activations: activation and attribution patching, causal tracing, feature patching, steering."""
