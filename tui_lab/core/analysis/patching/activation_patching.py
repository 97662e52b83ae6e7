"""Activation patching (denoising): the clean run's activations put into the corrupted
run, one cell at a time, and the logit difference each patch gives back.

Sites (``SITES``), as TransformerLens's ``patching`` module names them:

- ``resid_pre``, ``attn_out``, ``mlp_out``: layer x position;
- ``z`` (each head's output over all positions): layer x head; ``z_pos``: every
  head (``L1H2``) x position;
- ``pattern``, ``q``, ``k``, ``v``: layer x head (``k`` and ``v`` by key/value
  head, before a grouped model repeats them);
- ``resid_final``: the final norm's output (what the unembedding reads) x position.

Every shape: a decoder-only model's answer is read at its last position, an
encoder-only model's at its mask, an encoder-decoder's at its decoder's last
position (``patch_pair``); an encoder-decoder's rows are its encoder's and its
decoder's layers, cross-attention included (``patch_rows``).

**Batched.** Many patched runs share one forward pass: the batch starts as the
corrupted input alone (row 0) and, at ``blocks.{L}.hook_resid_pre``, grows by a
copy of the corrupted rows for every cell patched in layer L; that cell's hook
then writes the clean activation into its own rows. Layers before L are computed
once for all of them, not once per cell, and the last hook before the
unembedding keeps only the last position (the metric reads no other). Each row
is an independent run of the corrupted input with exactly one patch, so the
result is that of one forward pass per cell. ``run_cells`` is that engine;
causal tracing drives it too, with several noisy rows per cell. An
encoder-decoder's decoder reads the source through cross-attention, so its
batch cannot grow halfway: there every row is a copy of the corrupted input
from the start, still many patched runs to one forward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tui_lab.core.analysis.patching.patch_pair import (
    Metric,
    PatchError,
    PatchPair,
    logit_diff,
    model_shape,
)
from tui_lab.core.analysis.patching.patch_rows import (
    Row,
    answer_stack,
    final_hook,
    site_rows,
    stack_layers,
)
from tui_lab.core.config.shape import Shape
from tui_lab.core.errors import LabError

if TYPE_CHECKING:
    from tui_lab.core.opening.model_in_hand import ModelInHand

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


def require_decoder_only(model: ModelInHand, what: str = "patching") -> None:
    """PatchError (one line) unless ``model`` is a decoder-only stack (what direct logit
    attribution decomposes: an encoder's MLM head and a decoder's cross-attention are
    read otherwise)."""
    shape = model_shape(model)
    if shape is not Shape.DECODER_ONLY:
        raise PatchError(f"{what} works on decoder-only models; this one is {shape.value} "
                         "(activation and attribution patching and causal tracing take it)")


def n_layers(model: ModelInHand) -> int:
    """The blocks of a one-stack model."""
    return stack_layers(model, "blocks")


def layer_rows(model: ModelInHand, site: Site, stack: str | None = None) -> list[Row]:
    """The rows a site has (the final norm: one row, after the last layer)."""
    if site.name == "resid_final":
        last = answer_stack(model)
        return [Row("final", final_hook(model), stack_layers(model, last), last)]
    rows = site_rows(model, site.hook, site.layout in ("pos", "head_pos"), stack)
    if not rows:
        what = "no MLP (attention-only)" if site.name == "mlp_out" else f"no {site.hook} hook"
        raise PatchError(f"this model has {what}: nothing to patch at {site.name}")
    return rows


# --- the engine ----------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One patched run: at ``hook`` (in layer ``layer``, or after the last layer),
    ``write(rows)`` changes the cell's own rows in place (a view of the batch)."""

    layer: int
    hook: str
    write: Callable[[Tensor], None]


def default_rows(model: ModelInHand, length: int) -> int:
    """How many rows one pass may hold: about 2**26 floats per activation at most."""
    cfg = model.config.model
    width = max(int(cfg.d_model), int(cfg.d_ff or 0), int(cfg.n_heads) * length)
    return max(2, min(1024, 2**26 // max(1, length * width)))


@dataclass(frozen=True)
class Reading:
    """Where each row's number is read: the logits at ``position`` (the last, or a mask's),
    and the decoder input an encoder-decoder runs every row with (None: one stack)."""

    position: int = -1
    target: Tensor | None = None


Hooks = Sequence[tuple[str, Callable[[Tensor, str], Tensor | None]]]
AT_THE_END = Reading()  # the last position, one stack


def run_cells(
    model: ModelInHand,
    ids: Tensor,
    cells: Sequence[Cell],
    reduce: Callable[[Tensor], Tensor],
    *,
    base_hooks: Hooks = (),
    reading: Reading = AT_THE_END,
    max_rows: int | None = None,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
) -> tuple[Tensor, Tensor]:
    """Run ``ids`` (B0, T) once unpatched and once per cell, batched.

    ``reduce(logits (B, V)) -> (B,)`` turns each row's logits at ``reading.position``
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
    two_stacks = not model_shape(model).one_stack
    base: Tensor | None = None
    out = torch.empty(len(cells), b0)
    done = 0
    for start in range(0, max(1, len(order)), per_pass):
        if cancelled is not None and cancelled():
            raise PatchingCancelled("patching cancelled")
        chunk = [cells[i] for i in order[start : start + per_pass]]
        if two_stacks:
            b_logits = _run_copies(model, ids, chunk, base_hooks, reading)
        else:
            b_logits = _run_chunk(model, ids, chunk, base_hooks, reading.position)
        values = reduce(b_logits).float().cpu()  # (B0 * (1 + len(chunk)),)
        if base is None:
            base = values[:b0]
        out[torch.tensor(order[start : start + per_pass], dtype=torch.long)] = values[b0:].view(len(chunk), b0)
        done += len(chunk)
        if progress is not None:
            progress(done, len(cells))
    assert base is not None
    return base, out


def _run_chunk(model: ModelInHand, ids: Tensor, chunk: list[Cell], base_hooks: Hooks, position: int) -> Tensor:
    """One forward pass: the base rows, then b0 rows per cell of ``chunk`` (in order),
    each added where its layer starts; logits (B, V) at ``position``."""
    b0 = ids.size(0)
    top, last = n_layers(model), final_hook(model)
    grow: dict[str, int] = {}  # hook -> cells whose rows are added there
    patches: dict[str, list[tuple[int, Cell]]] = {}  # hook -> (first row, cell)
    for i, cell in enumerate(chunk):
        where = f"blocks.{cell.layer}.hook_resid_pre" if cell.layer < top else cell.hook
        grow[where] = grow.get(where, 0) + 1
        patches.setdefault(cell.hook, []).append((b0 * (1 + i), cell))
    keep = slice(position, None) if position == -1 else slice(position, position + 1)

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
            x = x[:, keep]  # (B, 1, d_model): the unembedding (and an MLM head) read one position
            fresh = True
        return x if fresh else None

    names = {*grow, *patches, last}
    hooks = [*base_hooks, *((n, hook) for n in names)]
    with torch.no_grad():
        return model.run_with_hooks(ids, hooks)[:, -1]  # (B, V)


def _run_copies(model: ModelInHand, ids: Tensor, chunk: list[Cell], base_hooks: Hooks, reading: Reading) -> Tensor:
    """One forward pass of an encoder-decoder over 1 + len(chunk) copies of ``ids``, each
    cell writing into its own copy; logits (B, V) at ``reading.position``."""
    b0, copies = ids.size(0), 1 + len(chunk)
    patches: dict[str, list[tuple[int, Cell]]] = {}
    for i, cell in enumerate(chunk):
        patches.setdefault(cell.hook, []).append((b0 * (1 + i), cell))

    def hook(x: Tensor, name: str) -> Tensor:
        x = x.clone()
        for row, cell in patches[name]:
            cell.write(x[row : row + b0])
        return x

    target = None if reading.target is None else reading.target.repeat(copies, 1)
    with torch.no_grad():
        logits = model.run_with_hooks(ids.repeat(copies, 1), [*base_hooks, *((n, hook) for n in patches)],
                                      target=target)
    return logits[:, reading.position]


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

    def to_dict(self) -> dict[str, object]:
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
    """A site's rows and columns, and each cell's (row, col, index); ``hooks[r]`` and
    ``layers[r]``: row r's hook and its layer."""

    rows: list[str]
    cols: list[str]
    cells: list[tuple[int, int, tuple[int, ...]]]
    hooks: list[str]
    layers: list[int]


def site_grid(model: ModelInHand, site: Site, rows: list[Row], clean_cache: dict[str, Tensor], tokens: list[str]) -> Grid:
    """The cells of ``site`` over ``rows``: positions (``tokens``) or heads (from the shapes)."""
    positions = list(range(len(tokens)))
    cells: list[tuple[int, int, tuple[int, ...]]]
    hooks, layers = [r.hook for r in rows], [r.layer for r in rows]
    if site.layout == "pos":
        cells = [(r, p, (p,)) for r in range(len(rows)) for p in positions]
        return Grid([r.label for r in rows], list(tokens), cells, hooks, layers)
    heads = [int(clean_cache[r.hook].size(1 if site.layout == "pattern" else 2)) for r in rows]
    if site.layout == "head_pos":
        pairs = [(r, h) for r, n in enumerate(heads) for h in range(n)]
        cells = [(k, p, (h, p)) for k, (_r, h) in enumerate(pairs) for p in positions]
        labels = [f"{rows[r].label}{' ' if ' ' in rows[r].label else ''}H{h}" for r, h in pairs]
        return Grid(labels, list(tokens), cells, [hooks[r] for r, _ in pairs], [layers[r] for r, _ in pairs])
    cells = [(r, h, (h,)) for r, n in enumerate(heads) for h in range(n)]
    return Grid([r.label for r in rows], [f"H{h}" for h in range(max(heads))], cells, hooks, layers)


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


def clean_run(model: ModelInHand, pair: PatchPair, names: list[str]) -> tuple[float, dict[str, Tensor]]:
    """The clean logit difference and the clean activations at ``names``."""
    clean_ids, _ = pair.ids(model.device)
    with torch.no_grad():
        logits, cache = model.run_with_cache(clean_ids, names=names, target=pair.target_ids(1, model.device))
    return float(logit_diff(logits, pair.answer, pair.wrong, pair.position)[0]), cache


def row_tokens(model: ModelInHand, pair: PatchPair, rows: list[Row]) -> list[str]:
    """The columns' tokens: the decoder's input for a decoder's rows, else the input."""
    ids = pair.target if rows and rows[0].stack == "decoder" and pair.target else pair.clean
    return [model.task.vocab.label(int(i)) for i in ids]


def grid_values(grid: Grid, values: Tensor, fill: float) -> list[list[float]]:
    """Cell values (in ``grid.cells`` order) laid out as rows x cols (``fill`` where a
    layer has fewer heads)."""
    out = [[fill] * len(grid.cols) for _ in grid.rows]
    for (r, c, _index), v in zip(grid.cells, values.tolist(), strict=True):
        out[r][c] = float(v)
    return out


def activation_patch(
    model: ModelInHand,
    pair: PatchPair,
    site: str = "resid_pre",
    *,
    stack: str | None = None,
    max_rows: int | None = None,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
) -> PatchResult:
    """Denoising patching of ``site``: each cell's clean activation in the corrupted run.
    ``stack``: an encoder-decoder's ``encoder`` (the default for sites by position) or
    ``decoder``."""
    where = site_named(site)
    rows = layer_rows(model, where, stack)
    clean, cache = clean_run(model, pair, sorted({r.hook for r in rows}))
    tokens = row_tokens(model, pair, rows)
    grid = site_grid(model, where, rows, cache, tokens)
    cells = [Cell(grid.layers[r], grid.hooks[r], writer(where.layout, cache[grid.hooks[r]], index))
             for r, _c, index in grid.cells]
    _, corrupt_ids = pair.ids(model.device)
    reading = Reading(pair.position, pair.target_ids(1, model.device))
    base, patched = run_cells(
        model, corrupt_ids, cells, lambda logits: logit_diff(logits[:, None], pair.answer, pair.wrong),
        reading=reading, max_rows=max_rows, progress=progress, cancelled=cancelled,
    )
    metric = Metric(clean, float(base[0]))
    raw = patched[:, 0]
    return PatchResult(
        where.name, "exact", "denoising", metric.clean, metric.corrupt, grid.rows, grid.cols,
        grid_values(grid, raw, metric.corrupt), grid_values(grid, metric.normalise(raw), 0.0), tokens,
    )
