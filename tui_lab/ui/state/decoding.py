"""How the lab decodes a text with the model in hand, whatever its shape (Textual-free).

An encoder-only model does not continue a text: it fills the masks typed in it
(``core.decoding.fill_mask``); every other model decodes greedily or by sampling
(``core.decoding.decode.generate``). Decode's worker and time travel's replay
both go through ``decode_text``, so a history snapshot of a masked-LM run is
filled the way the live model was. The two results differ in one field the
panes read: a greedy decode labels each capture's axes (``labels[name]`` is
(queries, keys): a cross attention's differ), fill-mask has one label per token
for every self-attention; ``axis_labels`` reads either.
"""

from __future__ import annotations

from typing import Any

FILL_TOP_K = 5  # fillers shown per mask: the Decode pane's top-k columns


def is_fill_mask_model(model: Any) -> bool:
    """Whether ``model`` decodes by filling masks (an encoder-only model); the core decides.
    Only asked with a model in hand, so torch is loaded already."""
    if model is None:
        return False
    from tui_lab.core.decoding.fill_mask import is_fill_mask

    return is_fill_mask(model)


def fills_masks(run: Any) -> bool:
    """Whether the run or opened model ``run`` decodes by filling masks, from its config alone
    (a training run's ``model`` is fetched from its process: not on the UI thread)."""
    return run is not None and run.config.model.arch == "encoder-only"


def is_fill_result(result: Any) -> bool:
    """Whether ``result`` is a fill-mask result (``masks`` per mask) rather than a greedy decode."""
    return hasattr(result, "masks")


def decode_text(model: Any, task: Any, text: str, options: dict[str, Any] | None = None) -> Any:
    """``text`` decoded by ``model``: its masks filled (attention captured), else ``generate``
    with ``options`` (its keyword arguments). One-line errors come from the core."""
    if is_fill_mask_model(model):
        from tui_lab.core.decoding.fill_mask import attention_only, fill_mask
        from tui_lab.core.model.encoder_only import mlm_head_note

        if mlm_head_note(model) is not None:  # a bare encoder: its attention, and why no fills
            return attention_only(model, task, text)
        top_k = int((options or {}).get("report_k", FILL_TOP_K))
        return fill_mask(model, task, text, top_k=top_k, capture=True)
    from tui_lab.core.decoding.decode import generate

    return generate(model, task, text, **dict(options or {}))


def axis_labels(result: Any, name: str) -> tuple[list[str], list[str]]:
    """(query labels, key labels) of capture ``name`` in ``result``, of either kind."""
    labels = result.labels
    if isinstance(labels, dict):
        rows, cols = labels.get(name, ([], []))
        return list(rows), list(cols)
    return list(labels), list(labels)  # fill-mask: bidirectional self-attention, one axis
