"""The Python face over a model's hook points: ``open_model`` and its handle (``handle.py``)."""
