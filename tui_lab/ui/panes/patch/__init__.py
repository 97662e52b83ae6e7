"""The Patch pane: activation patching, attribution patching and direct logit attribution."""
