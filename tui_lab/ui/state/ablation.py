"""Which attention heads and SAE features the lab's decodes run with switched off (Textual-free).

The Attention pane toggles heads (``x``) and cycles the mode (``m``); the
Features pane toggles SAE features (``a``: the hook's activation becomes the
SAE's reconstruction without the feature plus its reconstruction error). The
Decode pane applies both to every decode until they are restored.
The heads are never switched off on the Train pane's model: ``apply`` works on
a private copy and leaves ``core.ablation``'s hook on that copy only, so the
copy's later replays (the walkthrough, the logit lens) see the same ablation,
and training, a resumed run or a new model never meet a hook.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

from tui_lab.core.opening.model_handle import opened_from_files

MODES = ("zero", "mean")


@dataclass(frozen=True, eq=False)
class FeatureSwitch:
    """One SAE feature switched off in the lab's decodes."""

    sae: Any
    hook: str
    index: int
    source: str  # the SAE's folder name, for labels

    def hooks(self) -> list[Any]:
        from tui_lab.core.sae.interventions import ablation_hooks

        return ablation_hooks(self.sae, self.index, self.hook)

    def __str__(self) -> str:
        return f"feature {self.index} of {self.source}"
PROBE_PAIRS = 200  # held-out examples the mean mode averages each head's output over


class AblationState:
    """The heads switched off (core names, ``decoder.0.cross:2``), the mode, and per-decode labels."""

    def __init__(self) -> None:
        self.heads: list[str] = []
        self.features: list[FeatureSwitch] = []
        self.mode = "zero"
        self._lock = threading.Lock()
        self._means: tuple[Any, Any] | None = None  # ((model id, step, text), means)
        # id(result) -> (a weak reference to it, label); results compare by value, so no dict keys.
        self._labels: dict[int, tuple[weakref.ref[Any], str]] = {}

    @property
    def active(self) -> bool:
        """Whether any head or feature is switched off."""
        return bool(self.heads or self.features)

    def toggle_feature(self, sae: Any, hook: str, index: int, source: str) -> bool:
        """Switch feature ``index`` of ``sae`` (at ``hook``) off, or back on; True if off now."""
        for switch in self.features:
            if switch.sae is sae and switch.index == index:
                self.features.remove(switch)
                return False
        self.features.append(FeatureSwitch(sae, hook, index, source))
        return True

    def feature_off(self, sae: Any, index: int) -> bool:
        return any(s.sae is sae and s.index == index for s in self.features)

    def toggle(self, head: str) -> bool:
        """Switch ``head`` off, or back on if it was off; True if it is off now."""
        if head in self.heads:
            self.heads.remove(head)
            return False
        self.heads.append(head)
        return True

    def clear(self) -> None:
        """Restore every head and feature."""
        self.heads = []
        self.features = []

    def cycle_mode(self) -> str:
        """zero -> mean -> zero; returns the new mode."""
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        return self.mode

    def label(self) -> str:
        """``decoder.0.cross:2, encoder.0.self:1 (zero), feature 12 of sae-x``; empty when
        nothing is ablated."""
        parts = [f"{', '.join(self.heads)} ({self.mode})"] if self.heads else []
        return ", ".join(parts + [str(f) for f in self.features])

    # ---- applying it (worker threads) ------------------------------------------------

    def apply(
        self, model: Any, run: Any, copied: bool = False, text: str | None = None
    ) -> tuple[Any, str]:
        """(a view of ``model`` whose calls run with the heads switched off, its label);
        ``model`` itself if none (``hook_points.bind_hooks``: no weights are copied, so
        ``copied`` no longer matters).
        Heads the model does not have (another architecture) are dropped. ``text``:
        what is decoded (a real model's mean mode averages each head over it).
        """
        heads, mode, features = list(self.heads), self.mode, list(self.features)
        if not heads and not features:
            return model, ""
        from tui_lab.core.analysis.heads.ablation import AblationError, ablation_hooks, parse_head
        from tui_lab.core.model.hook_points import bind_hooks

        refs = []
        for name in heads:
            try:
                refs.append(parse_head(name, model))
            except AblationError:
                continue
        hooks = []
        if refs:
            means = self.means(model, run, text) if mode == "mean" else None
            hooks += ablation_hooks(model, refs, mode, means)
        hooks += [spec for f in features for spec in f.hooks()]
        if not hooks:
            return model, ""
        # A view of the model whose every call runs with these switched off: the model
        # itself (shared with Train, time travel, the other panes) is untouched.
        labels = [f"{', '.join(str(r) for r in refs)} ({mode})"] if refs else []
        return bind_hooks(model, hooks), ", ".join(labels + [str(f) for f in features])

    def means(self, model: Any, run: Any, text: str | None = None) -> Any:
        """Each head's mean output over the task's held-out probe pairs (once per model and step);
        for a real model (no task to draw pairs from), over ``text`` (once per text)."""
        real = opened_from_files(run)
        key = (id(run), run.step, text if real else None)
        with self._lock:
            if self._means is not None and self._means[0] == key:
                return self._means[1]
        config = run.config
        if real:
            from tui_lab.core.analysis.heads.text_ablation import text_ids, text_means

            ids = text_ids(run.task, text or "", config.model.max_len)
            means = text_means(model, ids)
        else:
            from tui_lab.core.analysis.heads.head_importance import probe_means
            from tui_lab.core.training.evaluate import held_out_pairs

            pairs = held_out_pairs(run.task, config.train, PROBE_PAIRS)
            device = next(model.parameters()).device
            means = probe_means(model, run.task, config.model.arch, pairs, device)
        with self._lock:
            self._means = (key, means)
        return means

    def mark(self, result: Any, label: str) -> None:
        """Remember that ``result`` was decoded with ``label``'s heads switched off."""
        if label:
            key = id(result)
            with self._lock:
                self._labels[key] = (
                    weakref.ref(result, lambda _: self._labels.pop(key, None)),
                    label,
                )

    def label_of(self, result: Any) -> str:
        """The heads ``result`` was decoded without (``mark``), or empty."""
        with self._lock:
            ref, label = self._labels.get(id(result), (None, ""))
        return label if ref is not None and ref() is result else ""
