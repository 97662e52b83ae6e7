"""The Transformer itself: attention, positions, layers, models, capture, parameter counts, device."""
