"""A small padded batch for the masks and scaling pictures, and the q, k the model makes of it.

``example_batch`` puts the typed input (if any) beside a few of the task's
examples, so rows have different lengths and the shorter ones are padded on
the right, as in training: for a lab task through the task's own ``collate``
(decoder-only: ``input SEP answer``; encoder-decoder: the decoder's ``BOS +
answer``, the source beside it), for a real model's text by its tokenizer.
``self_attention_qk`` runs the model once on it and reads each
self-attention module's q, k and v at its hook points (after RoPE).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.errors import LabError
from tui_lab.core.eval_mode import evaluating
from tui_lab.core.model.attention import MultiHeadAttention, causal_mask, padding_mask
from tui_lab.core.model.hook_points import using_hooks
from tui_lab.core.tasks.base import TaskBase
from tui_lab.core.tasks.protocol import Task

N_EXAMPLES = 3  # task examples beside the typed input
MARK = -1  # the id pad positions carry in ``marked``: no real token has it


@dataclass(frozen=True)
class ExampleBatch:
    """Rows of token ids padded on the right, with where each row's real tokens end."""

    texts: list[str]
    tokens: torch.Tensor  # (B, T) long: what the self-attention with a causal mask reads
    lengths: list[int]  # real tokens in each row of ``tokens``
    labels: list[list[str]]  # a short label per token of each row ("" at padding)
    src: torch.Tensor | None = None  # (B, S) for an encoder-decoder model, PAD (0) padded
    src_lengths: list[int] | None = None  # real tokens in each row of ``src``

    @property
    def marked(self) -> torch.Tensor:
        """``tokens`` with ``MARK`` at every padded position (B, T)."""
        t = self.tokens.size(1)
        real = torch.arange(t)[None, :] < torch.tensor(self.lengths)[:, None]  # (B, T)
        return torch.where(real, self.tokens, MARK)

    def masks(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(padding (B, 1, 1, T), causal (T, T), combined (B, 1, T, T)), True = may attend,
        from the core's own ``padding_mask`` and ``causal_mask``."""
        padding = padding_mask(self.marked, MARK)  # (B, 1, 1, T)
        causal = causal_mask(self.tokens.size(1))  # (T, T)
        return padding, causal, padding & causal  # (B, 1, T, T)


def _texts(task: Task, text: str | None) -> list[str]:
    texts = [text] if text else []
    for example in task.examples_for_display(N_EXAMPLES + 2):
        if example not in texts and len(texts) < N_EXAMPLES + (1 if text else 0):
            texts.append(example)
    if not texts:
        raise LabError("this task offers no example: type an input")
    return texts


def example_batch(task: Task, arch: Shape | str, text: str | None = None) -> ExampleBatch:
    """The typed ``text`` (checked by the task) and a few task examples as one padded batch,
    for a model of shape ``arch`` (a ``Shape`` or its spelling in a preset)."""
    if text:
        problem = task.validate_input(text)
        if problem:
            raise LabError(f"the input: {problem}")
    texts = _texts(task, text)
    vocab = task.vocab
    if isinstance(task, TaskBase):  # a lab task: the rows it trains on, PAD (0) padded
        pairs = [(t, task.solve(t)) for t in texts]
        batch = task.collate(pairs, Shape(arch).value)
        tokens = batch.tgt_in
        lengths = [int(n) for n in (tokens != 0).sum(dim=1)]
        src = batch.src
        src_lengths = None if src is None else [int(n) for n in (src != 0).sum(dim=1)]
    else:  # a real model's text: its tokenizer's ids; the pad id never reaches a real row
        rows = [vocab.encode(t) for t in texts]
        lengths = [len(r) for r in rows]
        width = max(lengths)
        tokens = torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.long)
        src, src_lengths = None, None
    labels = [
        [vocab.label(int(i)) if j < n else "" for j, i in enumerate(row)]
        for row, n in zip(tokens.tolist(), lengths, strict=True)
    ]
    return ExampleBatch(texts, tokens, lengths, labels, src, src_lengths)


@dataclass(frozen=True)
class HeadsQK:
    """One self-attention module's queries and keys on the batch, split into heads."""

    name: str  # capture name: "decoder.0.self"
    q: torch.Tensor  # (B, H, T, d_head), after RoPE when the module rotates
    k: torch.Tensor  # (B, H, T, d_head): a shared key head repeated for each query head
    v: torch.Tensor  # (B, H, T, d_head)
    score_scale: float | None  # what multiplies q.k; None: 1/sqrt(d_head)
    causal: bool  # the module masks the future (decoder self-attention)
    window: int = 0  # > 0: a query sees only its last ``window`` keys (a local layer)


def self_attention_modules(model: nn.Module) -> list[MultiHeadAttention]:
    """The model's self-attention modules, in order (the decoder's causal ones first)."""
    found = [
        m for m in model.modules()
        if isinstance(m, MultiHeadAttention) and m.lab_name.endswith(".self")
    ]
    return sorted(found, key=lambda m: (not m.lab_name.startswith("decoder"), m.lab_name))


def _heads(x: torch.Tensor, group: int) -> torch.Tensor:
    """A hook's (B, T, heads, d_head) as (B, H, T, d_head), a shared key/value head
    repeated for each of the ``group`` query heads it serves."""
    x = x.detach().float().transpose(1, 2)
    return x.repeat_interleave(group, dim=1) if group > 1 else x


def self_attention_qk(model: nn.Module, batch: ExampleBatch) -> list[HeadsQK]:
    """Run ``model`` on ``batch``; each self-attention module's q, k, v (decoder's first),
    read at its ``hook_q``, ``hook_k`` and ``hook_v`` (after rotary)."""
    modules = self_attention_modules(model)
    seen: dict[str, torch.Tensor] = {}
    names = {n for m in modules for n in (m.hook_names.q, m.hook_names.k, m.hook_names.v)}
    device = next(model.parameters()).device
    tokens = batch.tokens.to(device)
    with evaluating(model):
        with torch.no_grad(), using_hooks([(names.__contains__, lambda x, n: seen.setdefault(n, x))]):
            if batch.src is not None:
                model(batch.src.to(device), tokens)
            else:
                model(tokens)
    out = []
    for module in modules:
        hooked = module.hook_names
        if hooked.q not in seen:
            continue
        group = module.n_heads // module.n_kv_heads
        q, k, v = _heads(seen[hooked.q], 1), _heads(seen[hooked.k], group), _heads(seen[hooked.v], group)
        out.append(HeadsQK(
            module.lab_name, q.cpu(), k.cpu(), v.cpu(), module.score_scale,
            causal=module.lab_name.startswith("decoder"), window=module.window,
        ))
    return out


def fresh_model(config: LabConfig) -> tuple[nn.Module, TaskBase]:
    """A preset's model as training would start it (seeded, untrained, eval mode) and its task."""
    from tui_lab.core.model.models import build_run_model
    from tui_lab.core.tasks import make_task

    task = make_task(config.task)
    with torch.random.fork_rng(devices=[]):  # seeded like training, the caller's stream untouched
        torch.manual_seed(config.train.seed)
        model = build_run_model(config, len(task.vocab), "cpu")
    return model.eval(), task
