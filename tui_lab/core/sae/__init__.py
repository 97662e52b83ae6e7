"""Sparse autoencoders on a model's activations, in SAELens's on-disk format.

One module per concept: ``config`` (cfg.json's keys), ``sae`` (the module:
encode/decode for ``standard``, ``topk`` and ``jumprelu``), ``jumprelu`` (its
straight-through estimators), ``losses`` (each architecture's training loss),
``geometric_median`` (``b_dec``'s start), ``buffer`` (the shuffled activation
buffer), ``metrics``, ``activity`` (dead features), ``folder`` (SAELens's files
both ways), ``source`` (a folder or a release in the local Hugging Face cache),
``trainer`` (the Adam loop, its events and checkpoints).

Pure PyTorch + safetensors + numpy: nothing here knows a model's internals;
activations arrive as iterators and the model's cross-entropy as callables.
"""
