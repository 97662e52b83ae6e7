"""Named hook points: one way into every activation of every model.

Each activation a model computes passes through ``fire(hooks, name, x)`` under a
name as TransformerLens names it (``blocks.0.hook_resid_pre``,
``blocks.1.attn.hook_pattern``, ``decoder.0.cross_attn.hook_z``...). Capture,
ablation, the logit lens, the walkthrough, patching, sparse autoencoders and
steering all read and write activations there and nowhere else.

A hook lives for one call. The hooks of a call are a ``HookSet`` made active
with ``using_hooks`` in a context variable: nothing is set on the model's
modules, so two threads running one model object each see only their own hooks
(every thread has its own context), and nothing is left behind when a hook
raises. With no set active, a block pays one context-variable read per forward
and attention stays on the fused kernel.

A hook is ``fn(activation, name) -> replacement or None``. Shapes follow
TransformerLens: (batch, pos, d_model) for the residual stream and sub-layer
outputs, (batch, pos, head, d_head) for q, k, v and z, (batch, head, query,
key) for attention scores and patterns.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch

HookFn = Callable[[torch.Tensor, str], "torch.Tensor | None"]
# A hook's target is one exact name or a predicate over names.
HookSpec = tuple[str | Callable[[str], bool], HookFn]


class HookSet:
    """The hooks of one call, by exact name or by a filter over names.

    ``outer``: the set that was active when this one was made; its hooks run
    first, so a capture inside an ablation sees the ablated activations.
    """

    def __init__(self, hooks: Iterable[HookSpec] = (), outer: HookSet | None = None) -> None:
        self.outer = outer
        self._exact: dict[str, list[HookFn]] = {}
        self._filters: list[tuple[Callable[[str], bool], HookFn]] = []
        for target, fn in hooks:
            if isinstance(target, str):
                self._exact.setdefault(target, []).append(fn)
            else:
                self._filters.append((target, fn))
        # name -> the hooks that apply to it, worked out once per name and call.
        self._resolved: dict[str, tuple[HookFn, ...]] = {}

    def hooks_for(self, name: str) -> tuple[HookFn, ...]:
        found = self._resolved.get(name)
        if found is None:
            own = [*self._exact.get(name, ()), *(fn for ok, fn in self._filters if ok(name))]
            found = (*(self.outer.hooks_for(name) if self.outer else ()), *own)
            self._resolved[name] = found
        return found

    def wants(self, name: str) -> bool:
        """Whether any hook applies to ``name`` (attention computes its pattern only then)."""
        return bool(self.hooks_for(name))

    def fire(self, name: str, x: torch.Tensor) -> torch.Tensor:
        for fn in self.hooks_for(name):
            out = fn(x, name)
            if out is not None:
                x = out
        return x


_ACTIVE: ContextVar[HookSet | None] = ContextVar("tfx_lab_hooks", default=None)


def active_hooks() -> HookSet | None:
    """The hooks of the call running in this thread, or None (the fast path)."""
    return _ACTIVE.get()


def fire(hooks: HookSet | None, name: str, x: torch.Tensor) -> torch.Tensor:
    """``x`` through the hooks on ``name``; ``x`` itself when none are active."""
    return x if hooks is None else hooks.fire(name, x)


@contextmanager
def using_hooks(hooks: Iterable[HookSpec]) -> Iterator[HookSet]:
    """Make ``hooks`` active in this thread (on top of any already active) until the
    block ends, however it ends."""
    hook_set = HookSet(hooks, outer=_ACTIVE.get())
    token = _ACTIVE.set(hook_set)
    try:
        yield hook_set
    finally:
        _ACTIVE.reset(token)


def names_filter(names: Iterable[str] | Callable[[str], bool] | str | None) -> Callable[[str], bool]:
    """A predicate from what a caller gives: None (every name), one name, a list, or a predicate."""
    if names is None:
        return lambda _name: True
    if callable(names):
        return names
    wanted = {names} if isinstance(names, str) else set(names)
    return wanted.__contains__


# model class -> its subclass whose entry points run under the view's own hooks
_BOUND_CLASSES: dict[type, type] = {}
_ENTRY_POINTS = ("forward", "encode", "decode")


def _bound_class(cls: type) -> type:
    """``cls`` with each entry point wrapped in ``using_hooks(self._bound_hooks)``."""
    found = _BOUND_CLASSES.get(cls)
    if found is not None:
        return found

    def wrap(name: str) -> Callable[..., object]:
        method = getattr(cls, name)

        def entry(self: torch.nn.Module, *args: object, **kwargs: object) -> object:
            with using_hooks(self.__dict__["_bound_hooks"]):
                return method(self, *args, **kwargs)

        entry.__name__ = name
        entry.__doc__ = method.__doc__
        return entry

    methods = {name: wrap(name) for name in _ENTRY_POINTS if hasattr(cls, name)}
    found = type(f"HooksBound{cls.__name__}", (cls,), methods)
    _BOUND_CLASSES[cls] = found
    return found


def bind_hooks(model: torch.nn.Module, hooks: Iterable[HookSpec]) -> torch.nn.Module:
    """A view of ``model`` (its modules and tensors shared, nothing copied) whose every
    call (``forward``, ``encode``, ``decode``), in any thread, runs under ``hooks``.

    For an ablated model the lab keeps across calls (Decode, then the lens and the
    walkthrough on the same result): ``model`` itself is untouched, so other callers
    and other threads never see these hooks. The view is still a ``type(model)``.
    """
    view = copy.copy(model)  # a new object over the same submodules, parameters and buffers
    view.__dict__["_bound_hooks"] = list(hooks)
    view.__class__ = _bound_class(type(model))
    return view
