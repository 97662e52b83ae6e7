"""The lab's Muon (training/muon.py): its update against Muon written here from its
formula (momentum, Nesterov, Newton-Schulz in float64, decay, rate scale), in float32
tightly and in bfloat16 against ``torch.optim.Muon``; the dtype it picks per device;
and a checkpoint made while ``torch.optim.Muon`` did the work, resumed by the lab's."""

from __future__ import annotations

import functools
import math

import pytest
import torch

from tests.conftest import tiny_config
from tests.core.training.test_optimizers import newton_schulz
from tui_lab.core.training import muon as muon_module
from tui_lab.core.training import schedule
from tui_lab.core.training.distributed import data_rng
from tui_lab.core.training.muon import Muon, ns_dtype, orthogonalise
from tui_lab.core.training.optimizers import MuonAdamW, make_muon_adamw
from tui_lab.core.training.train import StepEvent, TrainingRun, open_run

# Two tall 4 x 3 (stacked with each other after transposing, and with the wide 3 x 4),
# a square 5 x 5 alone: every bucket shape the batching makes.
SHAPES = [(4, 3), (3, 4), (4, 3), (5, 5)]


def _grads(step: int) -> list[torch.Tensor]:
    """Hand-made gradients (cubes of a ramp plus a diagonal), different each step."""
    out = []
    for k, (r, c) in enumerate(SHAPES):
        ramp = torch.linspace(-1.0, 1.0, r * c).reshape(r, c) ** 3
        out.append(ramp * (1 + k + step) + 0.3 * torch.eye(r, c) * (-1) ** (k + step))
    return out


def _reference_steps(steps: int, lr: float, momentum: float, wd: float) -> list[torch.Tensor]:
    """Muon's update by hand in float64: buf <- m buf + (1-m) g; u <- (1-m) g + m buf;
    W <- W (1 - lr wd) - lr sqrt(max(1, rows/cols)) NS(u)."""
    weights = [torch.ones(s, dtype=torch.float64) * 0.1 for s in SHAPES]
    bufs = [torch.zeros(s, dtype=torch.float64) for s in SHAPES]
    for t in range(steps):
        for i, g in enumerate(_grads(t)):
            g = g.double()
            bufs[i] = momentum * bufs[i] + (1 - momentum) * g
            u = (1 - momentum) * g + momentum * bufs[i]
            rows, cols = SHAPES[i]
            weights[i] = weights[i] * (1 - lr * wd) - lr * math.sqrt(max(1.0, rows / cols)) * newton_schulz(u)
    return weights


def _run(opt_class: object, steps: int, lr: float, momentum: float, wd: float) -> list[torch.nn.Parameter]:
    params = [torch.nn.Parameter(torch.ones(s) * 0.1) for s in SHAPES]
    opt = opt_class(params, lr=lr, momentum=momentum, weight_decay=wd, nesterov=True)  # type: ignore[operator]
    for t in range(steps):
        for p, g in zip(params, _grads(t), strict=True):
            p.grad = g
        opt.step()
    return params


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double() - b).norm() / b.norm())


def test_float32_path_is_muon_by_hand() -> None:
    """Three steps with momentum and decay: each matrix within 1e-5 of the float64 formula."""
    got = _run(functools.partial(Muon, dtype=torch.float32), 3, lr=0.1, momentum=0.9, wd=0.05)
    want = _reference_steps(3, lr=0.1, momentum=0.9, wd=0.05)
    for g, w in zip(got, want, strict=True):
        assert _relative(g, w) < 1e-5
    # The reference itself is sharp: one momentum term dropped moves it by far more.
    plain = _reference_steps(3, lr=0.1, momentum=0.0, wd=0.05)
    assert min(_relative(p.float(), w) for p, w in zip(plain, want, strict=True)) > 1e-3


def test_bfloat16_path_is_torch_muon_to_bfloat16_rounding() -> None:
    """In bfloat16 (torch.optim.Muon's dtype) the lab's step and torch's agree to bf16's
    rounding, and both are the float64 formula to the 3 digits bf16 keeps."""
    ours = _run(functools.partial(Muon, dtype=torch.bfloat16), 3, lr=0.1, momentum=0.9, wd=0.05)
    torchs = _run(torch.optim.Muon, 3, lr=0.1, momentum=0.9, wd=0.05)
    want = _reference_steps(3, lr=0.1, momentum=0.9, wd=0.05)
    for o, t, w in zip(ours, torchs, want, strict=True):
        assert _relative(o, t.detach().double()) < 0.01
        assert _relative(o, w) < 0.03 and _relative(t, w) < 0.03


def test_orthogonalise_keeps_each_matrix_orientation_and_order() -> None:
    mats = [g.clone() for g in _grads(0)]
    out = orthogonalise(mats, torch.float32)
    assert [tuple(o.shape) for o in out] == SHAPES
    for o, g in zip(out, mats, strict=True):
        assert _relative(o, newton_schulz(g)) < 1e-5


def test_dtype_is_bfloat16_only_where_the_hardware_multiplies_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)
    assert ns_dtype(torch.device("cpu")) == torch.bfloat16
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE")  # oneDNN kept below bf16 instructions
    assert ns_dtype(torch.device("cpu")) == torch.float32
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    assert ns_dtype(torch.device("cpu")) == torch.float32
    assert ns_dtype(torch.device("meta")) == torch.float32


def test_muon_refuses_a_vector() -> None:
    with pytest.raises(ValueError, match="2-D"):
        Muon([torch.nn.Parameter(torch.zeros(3))])


def _model_and_train() -> tuple[torch.nn.Module, object]:
    cfg = tiny_config(train={"optimizer": "muon", "muon_lr": 0.05, "lr": 0.01, "weight_decay": 0.1})
    torch.manual_seed(0)
    run = TrainingRun(cfg, None)
    return run.model, cfg.train


def test_a_torch_muon_state_loads_and_the_next_step_continues_it() -> None:
    """The state torch.optim.Muon left (groups and momentum buffers) loads into the lab's;
    the next step uses those buffers, as the formula with them says."""
    model, train = _model_and_train()
    old = make_muon_adamw(model, train, torch.optim.Muon)  # type: ignore[arg-type]
    gen = torch.Generator().manual_seed(1)
    for _ in range(2):
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=gen)
        old.step()
    saved = old.state_dict()
    new = make_muon_adamw(model, train, functools.partial(Muon, dtype=torch.float32))  # type: ignore[arg-type]
    new.load_state_dict(saved)
    assert isinstance(new, MuonAdamW) and isinstance(new._muon, Muon)
    assert [sorted(g) for g in new.param_groups] == [sorted(g) for g in old.param_groups]
    (muon_group,) = [g for g in new.param_groups if g["kind"] == "muon"]
    w = muon_group["params"][0]
    buf = new.state[w]["momentum_buffer"].clone()
    assert torch.equal(buf, old.state[w]["momentum_buffer"]) and buf.abs().sum() > 0
    g = torch.randn(w.shape, generator=gen)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    w.grad = g.clone()
    before = w.detach().double().clone()
    muon_group["lr"] = 0.05
    new.step()
    m = muon_group["momentum"]
    b = m * buf.double() + (1 - m) * g.double()
    u = (1 - m) * g.double() + m * b
    rows, cols = w.shape
    expected = before * (1 - 0.05 * 0.1) - 0.05 * math.sqrt(max(1.0, rows / cols)) * newton_schulz(u)
    assert _relative(w, expected) < 1e-5


def test_a_run_made_with_torch_muon_resumes_with_the_labs(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run folder whose optimizer.pt torch.optim.Muon wrote: the lab's Muon picks it up; the
    next loss (the saved weights') is the uninterrupted run's to rounding, the later ones
    differ by the arithmetic only (bf16 per matrix there, batched here)."""
    cfg = tiny_config(train={"optimizer": "muon", "steps": 8, "eval_every": 100, "history": False})
    old_maker = functools.partial(make_muon_adamw, muon_class=torch.optim.Muon)
    monkeypatch.setattr(schedule, "make_muon_adamw", old_maker)
    losses: dict[int, float] = {}

    def note(event: object) -> None:
        if isinstance(event, StepEvent):
            losses[event.step] = event.loss
            if event.step == 4:  # a resumed run draws a new stream of examples: this one too
                whole._rng = data_rng(cfg.train.seed, 0, 4)

    whole = TrainingRun(cfg, None, on_event=note)
    whole.run()
    first = TrainingRun(cfg, tmp_path / "run")
    first.on_event = lambda e: first.stop() if isinstance(e, StepEvent) and e.step == 4 else None
    assert first.run()["step"] == 4
    monkeypatch.undo()
    again: dict[int, float] = {}
    second = open_run(tmp_path / "run", device="cpu",
                      on_event=lambda e: isinstance(e, StepEvent) and again.__setitem__(e.step, e.loss))
    assert isinstance(second.optimizer, MuonAdamW) and isinstance(second.optimizer._muon, Muon)
    momentum = [s["momentum_buffer"] for s in second.optimizer.state.values() if "momentum_buffer" in s]
    assert momentum and all(bool(m.abs().sum() > 0) for m in momentum)
    second.run()
    assert sorted(again) == [5, 6, 7, 8]
    assert again[5] == pytest.approx(losses[5], rel=1e-5)
    assert [again[s] for s in (6, 7, 8)] == pytest.approx([losses[s] for s in (6, 7, 8)], rel=2e-2)


def test_module_constants_are_torch_muons() -> None:
    assert muon_module.NS_COEFFICIENTS == (3.4445, -4.7750, 2.0315) and muon_module.NS_STEPS == 5
