"""The head atlas's scores: what each attention head does, as numbers in [0, 1].

Every score is the same measurement: the attention mass a head puts on a
*target set* of keys, averaged over the queries that have one. Only the
target sets differ (``head_targets``):

- ``diagonal``: the query's own position (self-attention);
- ``previous``: the position before it (self-attention; only queries t >= 1,
  which have one);
- ``first``: position 0, an "attention sink" (in a decoder, queries t >= 1:
  query 0 can only attend to itself);
- ``alignment``: where the task says the output comes from (copy: output i
  from input i; reverse: from n-1-i; sort: every input position holding that
  digit; addition: the digits of the same column), for cross attention, and
  for a decoder-only model's self-attention from its answer to its input;
- ``duplicate``: on a repeated block, from a token's second occurrence to its
  first;
- ``induction``: on a repeated block, from a token's second occurrence to the
  token right after its first occurrence (Olsson et al. 2022, "In-context
  Learning and Induction Heads").

An encoder-only model's heads (``score_atlas_encoder``) read both ways and
are scored on text: ``self`` (diagonal), ``previous``, ``next``, ``first``
(``[CLS]``), ``separator`` (``[SEP]``/``</s>``, where the tokenizer adds one)
and ``broad`` (a row's entropy over the log of its keys, 1 for an even spread;
its chance is a fixed 0.5, ``BROAD_CHANCE``).

Each score says which probe it was taken on (``head_probes``: ``task``, a lab
run's own task; ``repeat``, random tokens from the vocabulary repeated once;
``task-repeats``, the induction task's own repeats).
``score_atlas`` scores a lab run's model on its task (the repeat patterns on
repeats); ``score_atlas_on_repeats`` scores any decoder-only model, with no
task, on the standard probe alone; ``atlas_for`` picks between them. ``entropy`` (mean over queries, in nats) is
reported beside the scores but is not a pattern.

A head's best-fitting pattern is its highest score, and it is the head's
label only if it clears the floor (``head_floor``); otherwise the head is
shown as "no clear pattern".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from tui_lab.core.analysis.heads.atlas import (
    BROAD_CHANCE,
    Atlas,
    HeadScore,
)
from tui_lab.core.analysis.heads.head_floor import clears_floor
from tui_lab.core.analysis.heads.head_probes import (
    TASK,
    Probe,
    RepeatProbe,
    Tokenized,
    ValidationWindows,
    make_probe,
    standard_probe,
)
from tui_lab.core.analysis.heads.head_targets import (
    allowed_keys,
    duplicate_targets,
    first_targets,
    induction_targets,
    offset_targets,
    uniform_attention,
)
from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.eval_mode import evaluating
from tui_lab.core.model.capture import capture_attention
from tui_lab.core.model.models import EmbeddingsAndHead
from tui_lab.core.tasks.base import TaskBase
from tui_lab.core.tasks.protocol import Task


def mass_on(weights: torch.Tensor, targets: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Per head: mean over scored queries of the weight on the target keys.

    ``weights`` (B, H, Tq, Tk); ``targets`` (B, Tq, Tk) bool; ``queries``
    (B, Tq) bool, the queries that count (a query with no target never counts).
    Returns (H,); 0 for every head when no query counts.
    """
    queries = queries & targets.any(-1)  # (B, Tq)
    mass = (weights.float() * targets[:, None].float()).sum(-1)  # (B, H, Tq)
    n = queries.sum()
    if n == 0:
        return torch.zeros(weights.size(1))
    return (mass * queries[:, None].float()).sum((0, 2)) / n  # (H,)


def entropy(weights: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Per head: mean over ``queries`` (B, Tq) of the row entropy, in nats; (H,)."""
    w = weights.float()
    rows = -(w * torch.log(w.clamp_min(1e-12))).sum(-1)  # (B, H, Tq)
    n = queries.sum().clamp_min(1)
    return (rows * queries[:, None].float()).sum((0, 2)) / n


@dataclass(frozen=True)
class Measured:
    """One pattern on one module: (H,) scores, a uniform head's score, and the probe."""

    scores: torch.Tensor
    chance: float
    probe: str


def measure(
    weights: torch.Tensor, targets: torch.Tensor, queries: torch.Tensor, allowed: torch.Tensor, probe: str
) -> Measured:
    """``mass_on`` for every head, and for a head spreading evenly over the ``allowed`` keys."""
    targets = targets.expand(weights.size(0), -1, -1)
    chance = float(mass_on(uniform_attention(allowed.expand_as(targets)), targets, queries)[0])
    return Measured(mass_on(weights, targets, queries), chance, probe)


def head_scores(name: str, found: dict[str, Measured], ent: torch.Tensor) -> list[HeadScore]:
    """One ``HeadScore`` per head of module ``name`` from its measured patterns."""
    out: list[HeadScore] = []
    for i in range(ent.numel()):
        scores = {k: round(float(m.scores[i]), 4) for k, m in found.items()}
        chance = {k: round(m.chance, 4) for k, m in found.items()}
        best = max(scores, key=lambda k: scores[k])
        pattern = best if clears_floor(scores[best], chance[best]) else None
        probes = {k: m.probe for k, m in found.items()}
        out.append(HeadScore(name, i, scores, round(float(ent[i]), 4), best, scores[best], probes, chance, pattern))
    return out


def task_patterns(
    weights: torch.Tensor, name: str, probe: Probe, window: int = 0
) -> tuple[dict[str, Measured], torch.Tensor]:
    """The task probe's patterns of one module (``weights`` (B, H, Tq, Tk)), and its queries."""
    b, _, t_q, t_k = weights.shape
    queries = probe.queries_for(name)[:, :t_q].clone()
    decoder_self = name.startswith("decoder.") and name.endswith(".self")
    if decoder_self:
        queries[:, 0] = False  # causal: the first query can only attend to itself
    key_valid = None if decoder_self else probe.src_valid
    allowed = allowed_keys(decoder_self, t_q, t_k, key_valid, window)
    task = TASK
    found: dict[str, Measured] = {}
    if name.endswith(".self"):
        found["diagonal"] = measure(weights, offset_targets(b, t_q, t_k, 0), queries, allowed, task)
        found["previous"] = measure(weights, offset_targets(b, t_q, t_k, 1), queries, allowed, task)
    found["first"] = measure(weights, first_targets(b, t_q, t_k), queries, allowed, task)
    align = probe.alignment_for(name)
    if align is not None:
        found["alignment"] = measure(weights, align[:, :t_q, :t_k], queries, allowed, task)
    return found, queries


def repeat_patterns(
    weights: torch.Tensor, repeats: RepeatProbe, every: bool, window: int = 0
) -> dict[str, Measured]:
    """Duplicate and induction on causal self-attention over ``repeats`` (and, with ``every``,
    previous and first over queries t >= 1); ``window``: the layer's local window (0: none)."""
    b, _, t_q, t_k = weights.shape
    allowed = allowed_keys(True, t_q, t_k, None, window)
    queries = torch.ones(b, t_q, dtype=torch.bool)
    queries[:, 0] = False  # the first query can only attend to itself
    kind = repeats.kind
    found: dict[str, Measured] = {}
    if every:
        found["previous"] = measure(weights, offset_targets(b, t_q, t_k, 1), queries, allowed, kind)
        found["first"] = measure(weights, first_targets(b, t_q, t_k), queries, allowed, kind)
    found["duplicate"] = measure(weights, duplicate_targets(repeats.lengths, t_q, t_k), queries, allowed, kind)
    found["induction"] = measure(weights, induction_targets(repeats.lengths, t_q, t_k), queries, allowed, kind)
    return found


def _ranked(heads: list[HeadScore]) -> list[HeadScore]:
    return sorted(heads, key=lambda s: -s.best_score)


@torch.no_grad()
def _attention(model: nn.Module, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every attention module's weights (B, H, Tq, Tk) on one forward pass, on the CPU."""
    with capture_attention(model) as store:
        model(*inputs)
    return {name: w.cpu() for name, w in store.matrices().items()}


def model_config(model: nn.Module) -> ModelConfig | None:
    """The config a model the lab builds or opens was made from (None for any other module)."""
    return model.config if isinstance(model, EmbeddingsAndHead) else None


def layer_window(model: nn.Module, name: str) -> int:
    """The local attention window of decoder self-attention ``name`` (0: global or none)."""
    config = model_config(model)
    windows = config.attention_windows if config is not None else ()
    parts = name.split(".")
    if not windows or parts[0] != "decoder" or parts[-1] != "self":
        return 0
    return int(windows[int(parts[1])])


def score_atlas(model: nn.Module, task: Task, arch: Shape | str, n: int = 64, seed: int = 0) -> Atlas:
    """Score every head of a lab run's ``model`` on ``task``'s fixed probe (and its repeats).

    The same ``n`` and ``seed`` give the same probe at every step of a run,
    so scores from two snapshots are comparable.
    """
    with evaluating(model):
        config = model_config(model)
        probe = make_probe(task, arch, n, seed, max_len=config.max_len if config else 64)
        on_repeats = _attention(model, probe.repeated.tokens) if probe.repeated is not None else {}
        heads: list[HeadScore] = []
        for name, w in _attention(model, *probe.inputs).items():
            window = layer_window(model, name)
            found, queries = task_patterns(w, name, probe, window)
            if probe.repeated is not None and name in on_repeats:
                found.update(repeat_patterns(on_repeats[name], probe.repeated, False, window))
            heads.extend(head_scores(name, found, entropy(w, queries)))
    probes = {TASK: probe.description}
    if probe.repeated is not None:
        probes[probe.repeated.kind] = probe.repeated.description
    return Atlas(_ranked(heads), probes)


def score_heads(model: nn.Module, task: Task, arch: Shape | str, n: int = 64, seed: int = 0) -> list[HeadScore]:
    """``score_atlas``'s heads: every head of ``model`` on ``task``'s fixed probe, best first."""
    return score_atlas(model, task, arch, n, seed).heads


def score_atlas_on_repeats(
    model: nn.Module,
    vocab_size: int,
    special_ids: Iterable[int],
    n: int = 8,
    length: int = 32,
    seed: int = 0,
) -> Atlas:
    """Score every head of a decoder-only ``model`` on the standard probe alone (no task needed).

    Previous-token, first-token, duplicate-token and induction scores, all on
    ``standard_probe(vocab_size, special_ids, n, length, seed)``; ``length`` is
    cut to fit the model's context (``model.config.max_len``) twice over. The
    default 8 rows of 2 x 32 tokens give each repeat pattern 256 scored queries;
    on a GPT-2-small-shaped model they take about 10 s on one busy CPU thread.
    """
    config = model_config(model)
    if config is not None:
        length = max(2, min(length, config.max_len // 2))
    repeats = standard_probe(vocab_size, special_ids, n, length, seed)
    with evaluating(model):
        heads: list[HeadScore] = []
        for name, w in _attention(model, repeats.tokens).items():
            queries = torch.ones(w.size(0), w.size(2), dtype=torch.bool)
            queries[:, 0] = False
            found = repeat_patterns(w, repeats, True, layer_window(model, name))
            heads.extend(head_scores(name, found, entropy(w, queries)))
    return Atlas(_ranked(heads), {repeats.kind: repeats.description})


def encoder_probe(task: Task, n: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, int | None, str]:
    """(tokens (B, T), real keys (B, T), the separator id or None, what the rows are) for an
    encoder-only model: a lab run's masked validation windows, or a real model's example
    sentences with the tokens its tokenizer adds ([CLS] ... [SEP]), right-padded."""
    if isinstance(task, ValidationWindows):
        tokens = task.val_batches(n, 1)[0].tgt_in[:n]
        return tokens, torch.ones_like(tokens, dtype=torch.bool), None, f"{len(tokens)} masked windows of its text"
    rows = [task.vocab.encode(t) for t in task.examples_for_display(n, seed)]
    width = max(map(len, rows))
    pad = special_id(task, "pad_id")
    pad = 0 if pad is None else pad
    tokens = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    valid = torch.tensor([[True] * len(r) + [False] * (width - len(r)) for r in rows])
    ends = task.vocab.encode("")  # [CLS] [SEP] or <s> </s>: the last is the separator
    sep = int(ends[-1]) if len(ends) == 2 else None
    return tokens, valid, sep, f"{len(rows)} example sentences with the tokens the tokenizer adds"


def encoder_patterns(
    weights: torch.Tensor, valid: torch.Tensor, sep_keys: torch.Tensor | None, probe: str
) -> tuple[dict[str, Measured], torch.Tensor]:
    """Bidirectional self-attention's patterns (``weights`` (B, H, T, T), ``valid`` (B, T) real
    tokens, ``sep_keys`` (B, T) separator positions or None), and the scored queries."""
    b, _, t_q, t_k = weights.shape
    allowed = allowed_keys(False, t_q, t_k, valid)
    keys = valid[:, None, :t_k]  # a target on padding does not count
    queries = valid[:, :t_q]
    found = {
        "self": measure(weights, offset_targets(b, t_q, t_k, 0) & keys, queries, allowed, probe),
        "previous": measure(weights, offset_targets(b, t_q, t_k, 1) & keys, queries, allowed, probe),
        "next": measure(weights, offset_targets(b, t_q, t_k, -1) & keys, queries, allowed, probe),
        "first": measure(weights, first_targets(b, t_q, t_k), queries, allowed, probe),
    }
    if sep_keys is not None:
        found["separator"] = measure(weights, sep_keys[:, None, :t_k].expand(b, t_q, t_k), queries, allowed, probe)
    n_keys = allowed.sum(-1).clamp_min(2).float()  # (B, Tq)
    w = weights.float()
    rows = -(w * torch.log(w.clamp_min(1e-12))).sum(-1) / torch.log(n_keys)[:, None]  # (B, H, Tq)
    broad = (rows * queries[:, None].float()).sum((0, 2)) / queries.sum().clamp_min(1)
    found["broad"] = Measured(broad.clamp(0.0, 1.0), BROAD_CHANCE, probe)
    return found, queries


def score_atlas_encoder(model: nn.Module, task: Task, n: int = 8, seed: int = 0) -> Atlas:
    """Score every head of an encoder-only model: self, previous, next, first ([CLS]),
    separator ([SEP], where the tokenizer adds one) and broad, with the label floor."""
    tokens, valid, sep, about = encoder_probe(task, n, seed)
    sep_keys = None if sep is None else (tokens == sep) & valid
    kind = "text"
    with evaluating(model):
        heads: list[HeadScore] = []
        for name, w in _attention(model, tokens).items():
            found, queries = encoder_patterns(w, valid, sep_keys, kind)
            heads.extend(head_scores(name, found, entropy(w, queries)))
    return Atlas(_ranked(heads), {kind: about})


def special_id(task: Task, which: str) -> int | None:
    """The id ``which`` (``eos_id``, ``bos_id``, ``pad_id``) of a task's tokenizer; None
    when the task has no tokenizer or the tokenizer no such id (not every one has a pad)."""
    if not isinstance(task, Tokenized):
        return None
    found = getattr(task.tokenizer, which, None)
    return found if isinstance(found, int) else None


def special_ids_of(task: Task) -> list[int]:
    """The ids a task's tokenizer reserves (EOS, BOS, pad), for the probe to leave out."""
    found = [special_id(task, which) for which in ("eos_id", "bos_id", "pad_id")]
    return sorted({i for i in found if i is not None})


def atlas_for(model: nn.Module, task: Task, arch: Shape | str) -> Atlas:
    """A lab task's probes (``score_atlas``); a task with no examples of its own (a real
    model's text) gets the standard probe over its vocabulary, its special ids left out; so
    does a run fine-tuned from one (token-lm), to be read beside its source's atlas."""
    config = model_config(model)
    if config is not None and config.shape is Shape.ENCODER_ONLY:  # bidirectional heads
        return score_atlas_encoder(model, task)
    if task.name == "translation":  # a translator: scored on its translations
        from tui_lab.core.analysis.heads.alignment import alignment_atlas

        return alignment_atlas(model, task)
    if isinstance(task, TaskBase):  # a lab task: examples of its own, no tokenizer
        return score_atlas(model, task, arch)
    return score_atlas_on_repeats(model, len(task.vocab), special_ids_of(task))
