"""How the lab decodes a text with the model in hand, whatever its shape (Textual-free).

An encoder-only model does not continue a text: it fills the masks typed in it
(``core.decoding.fill_mask``); every other model decodes greedily or by sampling
(``core.decoding.decode.generate``). The decode verb (``core.verbs.decode``) holds
that dispatch for the command line and the lab alike; Decode's worker and time
travel's replay both go through ``decode_text``, so a history snapshot of a masked-LM run is
filled the way the live model was. The two results differ in one field the
panes read: a greedy decode labels each capture's axes (``labels[name]`` is
(queries, keys): a cross attention's differ), fill-mask has one label per token
for every self-attention; ``axis_labels`` reads either.
"""

from __future__ import annotations

from typing import Any

from tui_lab.core.config.shape import Shape

FILL_TOP_K = 5  # fillers shown per mask: the Decode pane's top-k columns


def is_fill_mask_model(model: Any) -> bool:
    """Whether ``model`` decodes by filling masks (an encoder-only model); the decode verb decides.
    Only asked with a model in hand, so torch is loaded already."""
    from tui_lab.core.verbs.decode import is_fill_mask_model as fills

    return fills(model)


def fills_masks(run: Any) -> bool:
    """Whether the run or opened model ``run`` decodes by filling masks, from its config alone
    (a training run's ``model`` is fetched from its process: not on the UI thread)."""
    return run is not None and run.config.model.shape is Shape.ENCODER_ONLY


def is_fill_result(result: Any) -> bool:
    """Whether ``result`` is a fill-mask result (``masks`` per mask) rather than a greedy decode."""
    return hasattr(result, "masks")


def decode_text(model: Any, task: Any, text: str, options: dict[str, Any] | None = None) -> Any:
    """``text`` decoded by ``model`` through the decode verb (``core.verbs.decode.decoded``): its
    masks filled (attention captured; a bare encoder's attention alone), else ``generate`` with
    ``options`` (its keyword arguments). One-line errors come from the core."""
    from tui_lab.core.verbs.decode import decoded

    return decoded(model, task, request_for(text, options))


def request_for(text: str, options: dict[str, Any] | None = None) -> Any:
    """The decode verb's request for ``text`` with the pane's ``options`` (``generate``'s
    keyword arguments); LabError (one line) for a number the request refuses."""
    from tui_lab.core.verbs.decode import Request

    given = dict(options or {})
    return Request(
        text,
        temperature=float(given.get("temperature", 0.0)),
        top_k=int(given.get("top_k", 0)),
        top_p=float(given.get("top_p", 1.0)),
        seed=int(given.get("seed", 0)),
        max_new=given.get("max_new_tokens"),
        capture=bool(given.get("capture", True)),
        report_k=int(given.get("report_k", FILL_TOP_K)),
        bare_attention=True,
    )


def axis_labels(result: Any, name: str) -> tuple[list[str], list[str]]:
    """(query labels, key labels) of capture ``name`` in ``result``, of either kind."""
    labels = result.labels
    if isinstance(labels, dict):
        rows, cols = labels.get(name, ([], []))
        return list(rows), list(cols)
    return list(labels), list(labels)  # fill-mask: bidirectional self-attention, one axis
