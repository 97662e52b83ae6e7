"""Fixtures, not tests: a local hub cache (``hf_cache``) and a guard against the network
(``no_network``), for the real-model tests. The random-weight Hugging Face model folders they
open come from ``bench/hf_factory.py``, which the benchmarks and screenshot scripts share."""
