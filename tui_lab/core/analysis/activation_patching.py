"""Activation patching (denoising): the clean run's activations put into the corrupted
run, one cell at a time, and the logit difference each patch gives back.

Sites (``SITES``), as TransformerLens's ``patching`` module names them:

- ``resid_pre``, ``attn_out``, ``mlp_out``: layer x position;
- ``z`` (each head's output over all positions): layer x head; ``z_pos``: every
  head (``L1H2``) x position;
- ``pattern``, ``q``, ``k``, ``v``: layer x head (``k`` and ``v`` by key/value
  head, before a grouped model repeats them);
- ``resid_final``: the final norm's output (what the unembedding reads) x position.

**Batched.** Many patched runs share one forward pass: the batch starts as the
corrupted input alone (row 0) and, at ``blocks.{L}.hook_resid_pre``, grows by a
copy of the corrupted rows for every cell patched in layer L; that cell's hook
then writes the clean activation into its own rows. Layers before L are computed
once for all of them, not once per cell, and the last hook before the
unembedding keeps only the last position (the metric reads no other). Each row
is an independent run of the corrupted input with exactly one patch, so the
result is that of one forward pass per cell. ``run_cells`` is that engine;
causal tracing drives it too, with several noisy rows per cell.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from tui_lab.core.analysis.patch_pair import Metric, PatchError, PatchPair, logit_diff
from tui_lab.core.errors import LabError

Progress = Callable[[int, int], None]  # (cells done, cells in all)
Cancelled = Callable[[], bool]


class PatchingCancelled(LabError):
    """The caller's ``cancelled()`` said stop; nothing is returned."""


@dataclass(frozen=True)
class Site:
    """What a site patches: its hook under ``blocks.{L}.`` and the cells' layout.

    ``layout``: ``pos`` (layer x position over (B, T, d)), ``head`` (layer x head over
    (B, T, H, d_head)), ``head_pos`` (head x position over (B, T, H, d_head)),
    ``pattern`` (layer x head over (B, H, Tq, Tk)).
    """

    name: str
    hook: str
    layout: str


SITES: dict[str, Site] = {
    s.name: s
    for s in (
        Site("resid_pre", "hook_resid_pre", "pos"),
        Site("attn_out", "hook_attn_out", "pos"),
        Site("mlp_out", "hook_mlp_out", "pos"),
        Site("z", "attn.hook_z", "head"),
        Site("z_pos", "attn.hook_z", "head_pos"),
        Site("pattern", "attn.hook_pattern", "pattern"),
        Site("q", "attn.hook_q", "head"),
        Site("k", "attn.hook_k", "head"),
        Site("v", "attn.hook_v", "head"),
        Site("resid_final", "", "pos"),
    )
}


def site_named(name: str) -> Site:
    """The site called ``name``; PatchError listing them when there is none."""
    site = SITES.get(name)
    if site is None:
        raise PatchError(f"unknown site {name!r}: one of {', '.join(SITES)}")
    return site


# --- the model's shape, as patching sees it ------------------------------------------


def require_decoder_only(model: Any, what: str = "patching") -> None:
    """PatchError (one line) unless ``model`` is a decoder-only stack.

    An encoder-decoder's answer is read through cross-attention from a second stack, and
    its layers would need two grids; the lab refuses rather than show half of it.
    """
    if not model.decoder_only:
        raise PatchError(
            f"{what} works on decoder-only models; this one is an encoder-decoder "
            "(train a decoder-only preset, or open a GPT-style model)"
        )


def n_layers(model: Any) -> int:
    return len(model.model.decoder.layers)


def final_hook(model: Any) -> str:
    """The last hook point before the unembedding: the final norm's output, or the last
    block's output when the stack has no final norm (post-LN)."""
    names = model.hook_names()
    return "ln_final.hook_normalized" if "ln_final.hook_normalized" in names else f"blocks.{n_layers(model) - 1}.hook_resid_post"


def site_hook(model: Any, site: Site, layer: int) -> str:
    return final_hook(model) if site.name == "resid_final" else f"blocks.{layer}.{site.hook}"


def site_layers(model: Any, site: Site) -> list[int]:
    """The layers a site has (the final norm: one row, after the last layer)."""
    if site.name == "resid_final":
        return [n_layers(model)]
    names = set(model.hook_names())
    layers = [i for i in range(n_layers(model)) if site_hook(model, site, i) in names]
    if not layers:
        what = "no MLP (attention-only)" if site.name == "mlp_out" else f"no {site.hook} hook"
        raise PatchError(f"this model has {what}: nothing to patch at {site.name}")
    return layers


# --- the engine ----------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One patched run: at ``hook`` (in layer ``layer``, or after the last layer),
    ``write(rows)`` changes the cell's own rows in place (a view of the batch)."""

    layer: int
    hook: str
    write: Callable[[Tensor], None]


def default_rows(model: Any, length: int) -> int:
    """How many rows one pass may hold: about 2**26 floats per activation at most."""
    cfg = model.config.model
    width = max(int(cfg.d_model), int(cfg.d_ff or 0), int(cfg.n_heads) * length)
    return max(2, min(1024, 2**26 // max(1, length * width)))


def run_cells(
    model: Any,
    ids: Tensor,
    cells: Sequence[Cell],
    reduce: Callable[[Tensor], Tensor],
    *,
    base_hooks: Sequence[tuple[str, Callable[[Tensor, str], Tensor | None]]] = (),
    max_rows: int | None = None,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
) -> tuple[Tensor, Tensor]:
    """Run ``ids`` (B0, T) once unpatched and once per cell, batched.

    ``reduce(last_logits (B, V)) -> (B,)`` turns each row's last-position logits
    into the number kept. ``base_hooks`` apply to every row (before any cell's
    rows exist, at the embeddings: the noise of causal tracing). Returns
    (base (B0,), per cell (n_cells, B0)).
    """
    b0 = ids.size(0)
    rows = max_rows or default_rows(model, ids.size(1))
    per_pass = max(1, rows // b0 - 1)
    if cancelled is not None or progress is not None:
        # A caller that shows progress or may cancel (the lab's worker) gets at least
        # eight passes: a few more forward passes, and escape is heard between them.
        per_pass = min(per_pass, max(8, -(-len(cells) // 8)))
    order = sorted(range(len(cells)), key=lambda i: cells[i].layer)
    top = n_layers(model)
    last = final_hook(model)
    base: Tensor | None = None
    out = torch.empty(len(cells), b0)
    done = 0
    for start in range(0, max(1, len(order)), per_pass):
        if cancelled is not None and cancelled():
            raise PatchingCancelled("patching cancelled")
        chunk = [cells[i] for i in order[start : start + per_pass]]
        b_logits = _run_chunk(model, ids, chunk, top, last, base_hooks)
        values = reduce(b_logits[:, -1]).float().cpu()  # (B0 * (1 + len(chunk)),)
        if base is None:
            base = values[:b0]
        out[torch.tensor(order[start : start + per_pass], dtype=torch.long)] = values[b0:].view(len(chunk), b0)
        done += len(chunk)
        if progress is not None:
            progress(done, len(cells))
    assert base is not None
    return base, out


def _run_chunk(
    model: Any,
    ids: Tensor,
    chunk: list[Cell],
    top: int,
    last: str,
    base_hooks: Sequence[tuple[str, Callable[[Tensor, str], Tensor | None]]],
) -> Tensor:
    """One forward pass: the base rows, then b0 rows per cell of ``chunk`` (in order)."""
    b0 = ids.size(0)
    grow: dict[str, int] = {}  # hook -> cells whose rows are added there
    patches: dict[str, list[tuple[int, Cell]]] = {}  # hook -> (first row, cell)
    for i, cell in enumerate(chunk):
        where = f"blocks.{cell.layer}.hook_resid_pre" if cell.layer < top else cell.hook
        grow[where] = grow.get(where, 0) + 1
        patches.setdefault(cell.hook, []).append((b0 * (1 + i), cell))

    def hook(x: Tensor, name: str) -> Tensor | None:
        fresh = False
        n_new = grow.get(name, 0)
        if n_new:
            base_rows = x[:b0]
            x = torch.cat([x, base_rows.repeat(n_new, *([1] * (x.dim() - 1)))])  # (B + n*b0, ...)
            fresh = True
        for row, cell in patches.get(name, ()):
            if not fresh:
                x, fresh = x.clone(), True
            cell.write(x[row : row + b0])
        if name == last:
            x = x[:, -1:]  # (B, 1, d_model): the unembedding reads only the last position
            fresh = True
        return x if fresh else None

    names = {*grow, *patches, last}
    hooks = [*base_hooks, *((n, hook) for n in names)]
    with torch.no_grad():
        return model.run_with_hooks(ids, hooks)  # (B, 1, V)


# --- activation patching -------------------------------------------------------------


@dataclass
class PatchResult:
    """A site's grid: ``raw`` patched logit differences, ``values`` normalised (0: the
    corrupted run, 1: the clean run), rows and columns labelled."""

    site: str
    method: str
    direction: str
    clean: float
    corrupt: float
    rows: list[str]
    cols: list[str]
    raw: list[list[float]]
    values: list[list[float]] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "site": self.site, "method": self.method, "direction": self.direction,
            "clean": self.clean, "corrupt": self.corrupt, "rows": self.rows, "cols": self.cols,
            "values": self.values, "raw": self.raw, "tokens": self.tokens,
        }

    def tensor(self) -> Tensor:
        """(rows, cols) normalised values."""
        return torch.tensor(self.values)


@dataclass(frozen=True)
class Grid:
    """A site's rows and columns, and each cell's (row, col, layer, index)."""

    rows: list[str]
    cols: list[str]
    cells: list[tuple[int, int, int, tuple[int, ...]]]


def site_grid(model: Any, site: Site, clean_cache: dict[str, Tensor], tokens: list[str]) -> Grid:
    """The cells of ``site``: positions or heads (from the activations' shapes)."""
    layers = site_layers(model, site)
    positions = list(range(len(tokens)))
    cells: list[tuple[int, int, int, tuple[int, ...]]]
    if site.layout == "pos":
        rows = ["final"] if site.name == "resid_final" else [f"L{i}" for i in layers]
        cells = [(r, p, layer, (p,)) for r, layer in enumerate(layers) for p in positions]
        return Grid(rows, list(tokens), cells)
    heads = [int(clean_cache[site_hook(model, site, layer)].size(1 if site.layout == "pattern" else 2)) for layer in layers]
    if site.layout == "head_pos":
        pairs = [(layer, h) for layer, n in zip(layers, heads, strict=True) for h in range(n)]
        cells = [(r, p, layer, (h, p)) for r, (layer, h) in enumerate(pairs) for p in positions]
        return Grid([f"L{layer}H{h}" for layer, h in pairs], list(tokens), cells)
    width = max(heads)
    cells = [(r, h, layer, (h,)) for r, (layer, n) in enumerate(zip(layers, heads, strict=True)) for h in range(n)]
    return Grid([f"L{i}" for i in layers], [f"H{h}" for h in range(width)], cells)


def writer(layout: str, clean: Tensor, index: tuple[int, ...]) -> Callable[[Tensor], None]:
    """What one cell writes into its rows: the clean activation at its index."""
    if layout == "pos":
        (p,) = index

        def write(rows: Tensor) -> None:
            rows[:, p] = clean[0, p]  # (B, T, d)
    elif layout == "head":
        (h,) = index

        def write(rows: Tensor) -> None:
            rows[:, :, h] = clean[0, :, h]  # (B, T, H, d_head)
    elif layout == "head_pos":
        h, p = index

        def write(rows: Tensor) -> None:
            rows[:, p, h] = clean[0, p, h]
    else:
        (h,) = index

        def write(rows: Tensor) -> None:
            rows[:, h] = clean[0, h]  # (B, H, Tq, Tk)
    return write


def clean_run(model: Any, pair: PatchPair, names: list[str]) -> tuple[float, dict[str, Tensor]]:
    """The clean logit difference and the clean activations at ``names``."""
    clean_ids, _ = pair.ids(model.device)
    with torch.no_grad():
        logits, cache = model.run_with_cache(clean_ids, names=names)
    return float(logit_diff(logits, pair.answer, pair.wrong)[0]), cache


def grid_values(grid: Grid, values: Tensor, fill: float) -> list[list[float]]:
    """Cell values (in ``grid.cells`` order) laid out as rows x cols (``fill`` where a
    layer has fewer heads)."""
    out = [[fill] * len(grid.cols) for _ in grid.rows]
    for (r, c, _layer, _index), v in zip(grid.cells, values.tolist(), strict=True):
        out[r][c] = float(v)
    return out


def activation_patch(
    model: Any,
    pair: PatchPair,
    site: str = "resid_pre",
    *,
    max_rows: int | None = None,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
) -> PatchResult:
    """Denoising patching of ``site``: each cell's clean activation in the corrupted run."""
    require_decoder_only(model)
    where = site_named(site)
    layers = site_layers(model, where)
    names = sorted({site_hook(model, where, layer) for layer in layers})
    clean, cache = clean_run(model, pair, names)
    tokens = [model.task.vocab.label(int(i)) for i in pair.clean]
    grid = site_grid(model, where, cache, tokens)
    cells = [
        Cell(layer, site_hook(model, where, layer), writer(where.layout, cache[site_hook(model, where, layer)], index))
        for _r, _c, layer, index in grid.cells
    ]
    _, corrupt_ids = pair.ids(model.device)
    base, patched = run_cells(
        model, corrupt_ids, cells, lambda last: logit_diff(last[:, None], pair.answer, pair.wrong),
        max_rows=max_rows, progress=progress, cancelled=cancelled,
    )
    metric = Metric(clean, float(base[0]))
    raw = patched[:, 0]
    return PatchResult(
        where.name, "exact", "denoising", metric.clean, metric.corrupt, grid.rows, grid.cols,
        grid_values(grid, raw, metric.corrupt), grid_values(grid, metric.normalise(raw), 0.0), tokens,
    )
