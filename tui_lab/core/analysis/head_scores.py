"""The head atlas's scores: what each attention head does, as numbers in [0, 1].

Every score is the same measurement: the attention mass a head puts on a
*target set* of keys, averaged over the queries that have one. Only the
target sets differ:

- ``diagonal``: the query's own position (self-attention);
- ``previous``: the position before it (self-attention, queries from 1 on);
- ``first``: position 0, an "attention sink";
- ``alignment``: where the task says the output comes from (copy: output i
  from input i; reverse: from n-1-i; sort: every input position holding that
  digit; addition: the digits of the same column), for cross attention, and
  for a decoder-only model's self-attention from its answer to its input;
- ``induction``: on a repeated random sequence, from a token's second
  occurrence to the token right after its first occurrence (Olsson et al.
  2022, "In-context Learning and Induction Heads").

``entropy`` (mean over queries, in nats) is reported beside them but is not a
pattern. A head's best-fitting pattern is its highest score. The functions at
the top take plain weight tensors, so they can be tested on hand-built
patterns; ``score_heads`` runs a model on its task's fixed probe batch
(``head_probes``) through ``capture_attention``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from tui_lab.core.analysis.head_probes import Probe, make_probe
from tui_lab.core.model.capture import capture_attention

PATTERNS = ("diagonal", "previous", "first", "alignment", "induction")


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


def offset_targets(batch: int, t_q: int, t_k: int, offset: int) -> torch.Tensor:
    """(B, Tq, Tk) bool: query q targets key q - offset (0: diagonal, 1: previous)."""
    q = torch.arange(t_q)[:, None]
    k = torch.arange(t_k)[None, :]
    return (k == q - offset).expand(batch, t_q, t_k)


def first_targets(batch: int, t_q: int, t_k: int) -> torch.Tensor:
    """(B, Tq, Tk) bool: every query targets key 0."""
    out = torch.zeros(batch, t_q, t_k, dtype=torch.bool)
    out[:, :, 0] = True
    return out


def induction_targets(lengths: torch.Tensor, t_q: int) -> torch.Tensor:
    """(B, Tq, Tq) for sequences whose first ``lengths[b]`` tokens repeat right after.

    The query at q = L + k holds the prefix's token k again; its target is
    the token after the first occurrence, k + 1 = q - L + 1, for k in 0..L-2.
    """
    q = torch.arange(t_q)[None, :, None]  # (1, Tq, 1)
    k = torch.arange(t_q)[None, None, :]  # (1, 1, Tk)
    length = lengths[:, None, None]  # (B, 1, 1)
    in_repeat = (q >= length) & (q <= 2 * length - 2)
    return in_repeat & (k == q - length + 1)


@dataclass(frozen=True)
class HeadScore:
    """One head: ``name`` the attention module (``decoder.1.self``), ``head`` its index."""

    name: str
    head: int
    scores: dict[str, float]  # pattern -> score in [0, 1]; only the patterns that apply
    entropy: float
    best: str
    best_score: float

    @property
    def label(self) -> str:
        """``decoder.1.self:2``, the form ``--head`` options take."""
        return f"{self.name}:{self.head}"

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, **asdict(self)}


def scores_for(
    weights: torch.Tensor, name: str, probe: Probe, induction: dict[str, torch.Tensor] | None = None
) -> list[HeadScore]:
    """Every head of one attention module on its probe (``weights`` (B, H, Tq, Tk)).

    ``induction``: module name -> (H,) induction scores measured on the
    repeated sequences, added to that module's heads.
    """
    b, h, t_q, t_k = weights.shape
    queries = probe.queries_for(name)[:, :t_q].clone()
    if name.startswith("decoder.") and name.endswith(".self"):
        queries[:, 0] = False  # causal: the first query can only attend to itself
    found: dict[str, torch.Tensor] = {}
    if name.endswith(".self"):
        found["diagonal"] = mass_on(weights, offset_targets(b, t_q, t_k, 0), queries)
        found["previous"] = mass_on(weights, offset_targets(b, t_q, t_k, 1), queries)
    found["first"] = mass_on(weights, first_targets(b, t_q, t_k), queries)
    align = probe.alignment_for(name)
    if align is not None:
        found["alignment"] = mass_on(weights, align[:, :t_q, :t_k], queries)
    ent = entropy(weights, queries)
    out: list[HeadScore] = []
    for i in range(h):
        scores = {k: round(float(v[i]), 4) for k, v in found.items()}
        if induction is not None and name in induction:
            scores["induction"] = round(float(induction[name][i]), 4)
        best = max(scores, key=lambda k: scores[k])
        out.append(HeadScore(name, i, scores, round(float(ent[i]), 4), best, scores[best]))
    return out


@torch.no_grad()
def score_heads(model: nn.Module, task: Any, arch: str, n: int = 64, seed: int = 0) -> list[HeadScore]:
    """Score every head of ``model`` on ``task``'s fixed probe; best first.

    The same ``n`` and ``seed`` give the same probe at every step of a run,
    so scores from two snapshots are comparable.
    """
    was_training = model.training
    model.eval()
    try:
        config = getattr(model, "config", None)
        probe = make_probe(task, arch, n, seed, max_len=config.max_len if config else 64)
        with capture_attention(model) as store:
            model(*probe.inputs)
        induction: dict[str, torch.Tensor] | None = None
        if probe.repeated is not None:  # decoder-only models only
            tokens, lengths = probe.repeated
            with capture_attention(model) as rep_store:
                model(tokens)
            induction = {}
            for name, w in rep_store.matrices().items():
                t = w.size(-1)
                every = torch.ones(w.size(0), t, dtype=torch.bool)
                induction[name] = mass_on(w.cpu(), induction_targets(lengths, t), every)
        heads: list[HeadScore] = []
        for name, w in store.matrices().items():
            heads.extend(scores_for(w.cpu(), name, probe, induction))
    finally:
        model.train(was_training)
    return sorted(heads, key=lambda s: -s.best_score)
