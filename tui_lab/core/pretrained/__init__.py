"""Pretrained models from local files: find them, read their config, weights and tokenizer."""
