"""Weight matrices laid out for the matrix-vector products of decoding.

A decoded token multiplies one vector by every weight matrix of the model, so its
time is the time it takes to stream the weights from memory. How fast the CPU's
BLAS streams an (out, in) matrix depends on which of its two dimensions lies
contiguous in memory: read along its longer dimension it streams markedly faster
than along its shorter one. Measured on one core of this project's machine (AMD
EPYC, torch's MKL; ``python -m bench --only real_models``): GPT-2's 50,257 x 768
head 12.4 ms as stored (rows of 768) against 7.1 ms transposed; a 3,072 x 768
expansion 13 against 18 GB/s; a 768 x 3,072 projection 19 against 14 GB/s.

Checkpoints store each matrix one way for every shape (a Linear's (out, in), GPT-2's
Conv1D's (in, out)), so about half of them are the slow way round. ``lay_out``
copies those into the other layout once, at open, and hands the model a transposed
view of the copy: the parameter keeps its shape and its values, only its strides
change, and torch picks the matching BLAS call. The copied bytes' pages of the
mapped file are then handed back (``TensorSource.release``), so the weights are
still held once: the rest stay memory-mapped. A tied head is laid out for the head
(its rows are also the token embedding, which reads a handful of them a step).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
from torch import nn

# Below this many elements a matrix lies in the CPU's caches and its layout does not matter.
MIN_ELEMENTS = 1 << 16


def preferred(weight: torch.Tensor) -> bool:
    """Whether an (out, in) matrix already lies contiguous along its longer dimension
    (or is square, or too small to matter, or not a plain matrix, or not float32).

    Only float32 matrices are re-laid: bfloat16 matrix-vector kernels want the stored
    (out, in) layout, and run slower the other way round (a 4,864 x 896 matrix: 6.0
    ms as stored, 12.4 ms transposed, one core of this project's machine)."""
    if weight.dim() != 2 or weight.numel() < MIN_ELEMENTS or weight.dtype != torch.float32:
        return True
    out_dim, in_dim = weight.shape
    if out_dim == in_dim:
        return True
    along = 0 if out_dim > in_dim else 1  # the dimension to read along
    return weight.stride(along) == 1 and weight.stride(1 - along) == weight.size(along)


def relaid(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` (out, in) with the same values, contiguous along its longer dimension."""
    out_dim, in_dim = weight.shape
    if out_dim > in_dim:
        return weight.t().contiguous().t()  # (out, in) view of an (in, out) copy
    return weight.contiguous()


def lay_out(model: nn.Module, release: Callable[[torch.Tensor], int] | None = None) -> int:
    """Re-lay every Linear weight of ``model`` that is the slow way round (see the module
    docstring); a parameter shared by several modules (a tied head) stays shared.
    ``release`` hands back a replaced tensor's file pages. Returns the bytes copied."""
    fresh: dict[int, nn.Parameter] = {}
    for module in model.modules():
        if isinstance(module, nn.Linear) and id(module.weight) not in fresh:
            weight = module.weight
            if not preferred(weight):
                fresh[id(weight)] = nn.Parameter(relaid(weight.detach()), weight.requires_grad)
    if not fresh:
        return 0
    old = {id(p): p for p in model.parameters() if id(p) in fresh}
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is not None and id(param) in fresh:
                module._parameters[name] = fresh[id(param)]
    copied = 0
    for param in old.values():
        copied += param.numel() * param.element_size()
        if release is not None:
            release(param.detach())
    return copied


class PendingLayout:
    """``lay_out(model, release)`` left for later: run once, by whichever thread asks first.

    The lab opens a model without re-laying it, so that it is usable sooner, and
    re-lays it in the background (``ModelInHand.settle``). Code that runs or copies
    the model, or counts its parameters by identity (a tied head is one tensor), calls
    it first, and waits for it if it runs: a released page of a file is read back from
    the file, but one of the float32 copies widened ahead of torch (``widening.py``)
    would read back as zeros.
    """

    def __init__(self, model: nn.Module, release: Callable[[torch.Tensor], int] | None) -> None:
        self._model: nn.Module | None = model
        self._release = release
        self._lock = threading.Lock()
        self.copied = 0

    def __call__(self) -> int:
        """Re-lay the model now unless done already; the bytes copied."""
        with self._lock:
            if self._model is not None:
                self.copied = lay_out(self._model, self._release)
                self._model = self._release = None
            return self.copied
