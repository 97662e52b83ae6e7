"""Fixtures, not tests: random-weight Hugging Face model folders (``hf_factory``), a local hub
cache (``hf_cache``) and a guard against the network (``no_network``), for the real-model tests."""
