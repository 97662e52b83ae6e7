"""The residual stream at every labelled slot: what probes are fitted on and DAS swaps.

A task variable (``core/tasks/variables.py``) labels slots of the task's own
examples, collated as training collates them (one batch, so DAS can run any row
again); a user's label file labels tokens of its lines. Either way the result is a
``SlotData``: per slot its example, position class, position in the stream and
value, and the residual stream there at every layer.

Layer l of a stream of n blocks is ``{stream}.{l}.hook_resid_pre`` for l < n and
``{stream}.{n-1}.hook_resid_post`` for l = n (TransformerLens's accumulated
residual: layer 0 is the embeddings). An input slot is read in the input's stream
(an encoder-decoder's encoder), an answer slot where that answer character is
predicted (its decoder's position j; a decoder-only model's position after the
separator's j-th step). ``stack="encoder"`` reads an encoder-decoder's answer slots in
its encoder instead, at every input position (``encoder_slots``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tui_lab.core.analysis.probes.encoder_slots import encoder_reads
from tui_lab.core.config.shape import Shape
from tui_lab.core.errors import LabError
from tui_lab.core.tasks.base import TaskBase
from tui_lab.core.tasks.variables import ANSWER, INPUT

if TYPE_CHECKING:
    from tui_lab.core.analysis.probes.labels import LabelLine
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.tasks.variables import Variable

CHUNK = 512  # examples per forward pass while collecting
ALL = "all"  # the position class that pools every slot
STACKS = ("encoder", "decoder")


@dataclass
class SlotData:
    """Every slot of every example, and the residual stream there at each layer hook."""

    stream: str  # "encoder", "decoder" or "blocks"
    hooks: list[str]  # layer 0..n's hook (see the module docstring)
    texts: list[str]
    answers: list[str]
    cls: list[str]  # per slot: its position class
    example: Tensor  # (S,) long: the slot's example
    position: Tensor  # (S,) long: its position in the stream
    value: Tensor  # (S,) long: the variable's value (label ids for a label file)
    resid: dict[str, Tensor] = field(default_factory=dict)  # hook -> (S, d_model)
    rows: tuple[Tensor | None, Tensor] | None = None  # (src, tgt_in) of the examples: DAS reruns them
    answer_start: Tensor | None = None  # (N,) long: where answer position 0 is in each row
    value_names: list[str] | None = None  # a label file's labels, by value
    index: Tensor | None = None  # (S,) long: a task slot's own index (``Slot.index``)
    slot_cls: list[str] | None = None  # per slot: the variable's own class, where ``cls`` adds the read site

    def classes(self) -> list[str]:
        """The position classes in first-seen order (``column 1``, ``column 2``...)."""
        return list(dict.fromkeys(self.cls))

    def mask(self, position: str) -> Tensor:
        """(S,) bool: the slots of ``position`` (``all``: every one)."""
        if position == ALL:
            return torch.ones(len(self.cls), dtype=torch.bool)
        return torch.tensor([c == position for c in self.cls], dtype=torch.bool)


def stream_of(model: ModelInHand, site: str, stack: str | None = None) -> str:
    """The stream an input or answer slot is read in (``stack``: an encoder-decoder's
    ``encoder`` or ``decoder``, None: the site's own); LabError where the model has none."""
    if stack is not None:
        check_stack(model, site, stack)
        if stack == "encoder":
            return "encoder"
    if model.shape is Shape.ENCODER_DECODER:
        return "encoder" if site == INPUT else "decoder"
    if site == ANSWER and model.shape is Shape.ENCODER_ONLY:
        raise LabError("an encoder-only model writes no answer: this variable is read where one is predicted")
    return "blocks"


def check_stack(model: ModelInHand, site: str | None, stack: str | None) -> None:
    """LabError (one line) for a stack the model lacks or the site (None: any) cannot be read in."""
    if stack is None:
        return
    if stack not in STACKS:
        raise LabError(f"--stack {stack}: choose encoder or decoder")
    if stack == "encoder" and model.shape is not Shape.ENCODER_DECODER:
        raise LabError(f"--stack encoder: this model is {model.shape.value}; only an encoder-decoder has an encoder")
    if stack == "decoder" and site == INPUT and model.shape is Shape.ENCODER_DECODER:
        raise LabError("--stack decoder: this variable is read at the input, which only the encoder sees")


def layer_hooks(model: ModelInHand, stream: str) -> list[str]:
    """Layer 0..n's residual hook of ``stream`` (n blocks: n + 1 hooks)."""
    names = model.hook_names()
    pre = [n for n in names if n.startswith(f"{stream}.") and n.endswith(".hook_resid_pre") and n.count(".") == 2]
    post = [n for n in names if n.startswith(f"{stream}.") and n.endswith(".hook_resid_post") and n.count(".") == 2]
    if not pre or not post:
        raise LabError(f"this model has no residual-stream hooks in its {stream} stream")
    return [*pre, post[-1]]


def resolve_position(data: SlotData, position: str | None) -> str:
    """``position`` as one of ``data``'s classes (``all`` when None; ``2`` finds ``column 2``)."""
    if position is None or position == ALL:
        return ALL
    classes = data.classes()
    wanted = " ".join(position.split())
    for cls in classes:
        if wanted == cls or (data.slot_cls is None and wanted == cls.split()[-1]):  # "2": column 2
            return cls
    raise LabError(f"no position {position!r}: this variable's positions are {', '.join(classes)} (or all)")


def lab_task(model: ModelInHand) -> TaskBase:
    """The run's own task (a lab task): what declares variables and collates examples."""
    task = model.task
    if not isinstance(task, TaskBase):
        raise LabError(f"{model.config.name}: its task {task.name} declares no variables (give --labels FILE)")
    return task


def variable_slots(model: ModelInHand, variable: Variable, n: int, seed: int,
                   stack: str | None = None) -> SlotData:
    """``variable`` at every slot of ``n`` of the task's examples (the same for a seed), with
    the residual stream there (``capture`` fills it), read in ``stack`` (``stream_of``)."""
    task = lab_task(model)
    rng = random.Random(f"probe:{seed}")
    texts = list(dict.fromkeys(task.sample_inputs(rng, n)))
    answers = [task.solve(t) for t in texts]
    batch = task.collate(list(zip(texts, answers, strict=True)), model.shape)
    stream = stream_of(model, variable.site, stack)
    if stream == "encoder" and variable.site == ANSWER:
        return _encoder_slots(model, task, variable, texts, answers, (batch.src, batch.tgt_in))
    one_stack = model.shape.one_stack
    starts = [len(task.vocab.encode(t)) if one_stack else 0 for t in texts]
    cls: list[str] = []
    example: list[int] = []
    position: list[int] = []
    value: list[int] = []
    index: list[int] = []
    for e, text in enumerate(texts):
        for slot in variable.slots(task, text):
            cls.append(slot.cls)
            index.append(slot.index)
            example.append(e)
            position.append(slot.index + (starts[e] if variable.site == ANSWER else 0))
            value.append(slot.value)
    if len(set(value)) < 2:
        raise LabError(f"{variable.name} takes one value only on these examples: nothing to probe")
    data = SlotData(stream, layer_hooks(model, stream), texts, answers, cls, torch.tensor(example),
                    torch.tensor(position), torch.tensor(value), rows=(batch.src, batch.tgt_in),
                    answer_start=torch.tensor(starts), index=torch.tensor(index))
    return data


def _encoder_slots(model: ModelInHand, task: TaskBase, variable: Variable, texts: list[str],
                   answers: list[str], rows: tuple[Tensor | None, Tensor]) -> SlotData:
    """An answer variable's slots read at every encoder position (``encoder_slots``)."""
    cls: list[str] = []
    slot_cls: list[str] = []
    example: list[int] = []
    position: list[int] = []
    value: list[int] = []
    index: list[int] = []
    for e, text in enumerate(texts):
        for name, p, slot in encoder_reads(task, variable, text):
            cls.append(name)
            slot_cls.append(slot.cls)
            example.append(e)
            position.append(p)
            value.append(slot.value)
            index.append(slot.index)
    if len(set(value)) < 2:
        raise LabError(f"{variable.name} takes one value only on these examples: nothing to probe")
    return SlotData("encoder", layer_hooks(model, "encoder"), texts, answers, cls, torch.tensor(example),
                    torch.tensor(position), torch.tensor(value), rows=rows,
                    answer_start=torch.zeros(len(texts), dtype=torch.long), index=torch.tensor(index),
                    slot_cls=slot_cls)


def forward_rows(model: ModelInHand, data: SlotData, rows: Tensor,
                 hooks: list[tuple[str, object]] | None = None) -> Tensor:
    """Logits (B, T, V) of ``data``'s examples ``rows``, with ``hooks`` (name, fn) applied."""
    assert data.rows is not None  # a task variable's data (label files are not rerun)
    src, tgt = data.rows
    device = model.device
    fns = list(hooks or [])
    if src is None:
        return model.run_with_hooks(tgt[rows].to(device), fns)  # type: ignore[arg-type]
    return model.run_with_hooks(src[rows].to(device), fns, target=tgt[rows].to(device))  # type: ignore[arg-type]


def capture(model: ModelInHand, data: SlotData, extra: list[str] | None = None) -> SlotData:
    """Fill ``data.resid`` at every layer hook (and ``extra`` hooks) at every slot, in chunks."""
    names = list(dict.fromkeys([*data.hooks, *(extra or [])]))  # an SAE may read a layer hook
    if data.rows is None:
        raise LabError("a label file's slots are captured line by line (label_slots)")
    src, tgt = data.rows
    n = tgt.size(0)
    parts: dict[str, list[Tensor]] = {h: [] for h in names}
    with torch.no_grad():
        for lo in range(0, n, CHUNK):
            rows = torch.arange(lo, min(n, lo + CHUNK))
            ids = (tgt if src is None else src)[rows].to(model.device)
            target = None if src is None else tgt[rows].to(model.device)
            _, cache = model.run_with_cache(ids, names, target=target)
            pick = (data.example >= lo) & (data.example < lo + CHUNK)
            for h in names:
                parts[h].append(cache[h][data.example[pick] - lo, data.position[pick]].float().cpu())
    data.resid = {h: torch.cat(parts[h]) for h in names}
    return data


def label_slots(model: ModelInHand, lines: list[LabelLine], extra: list[str] | None = None) -> SlotData:
    """A label file's slots (one label: the line's last token; one per token: each token),
    read in the input's stream line by line, with the residual stream captured."""
    stream = stream_of(model, INPUT)
    hooks = layer_hooks(model, stream)
    names = list(dict.fromkeys([*hooks, *(extra or [])]))
    value_names = sorted({label for line in lines for label in line.labels})
    index = {label: i for i, label in enumerate(value_names)}
    cls: list[str] = []
    example: list[int] = []
    position: list[int] = []
    value: list[int] = []
    parts: dict[str, list[Tensor]] = {h: [] for h in names}
    with torch.no_grad():
        for e, line in enumerate(lines):
            ids = model.to_tokens(line.text)
            n = ids.size(1)
            where = [n - 1] if len(line.labels) == 1 else list(range(n))
            _, cache = model.run_with_cache(ids, names)
            for h in names:
                parts[h].append(cache[h][0, where].float().cpu())
            for p, label in zip(where, line.labels, strict=True):
                cls.append("last token" if len(line.labels) == 1 else f"token {p}")
                example.append(e)
                position.append(p)
                value.append(index[label])
    data = SlotData(stream, hooks, [line.text for line in lines], ["" for _ in lines], cls,
                    torch.tensor(example), torch.tensor(position), torch.tensor(value),
                    value_names=value_names)
    data.resid = {h: torch.cat(parts[h]) for h in names}
    return data
