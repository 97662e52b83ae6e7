"""Data-parallel training: two gloo processes under torchrun write a run that loads."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import tiny_config
from tui_lab.core.errors import LabError
from tui_lab.core.model.models import build_model
from tui_lab.core.runs.folder import load_run
from tui_lab.core.tasks.vocab import PAD
from tui_lab.core.training import distributed
from tui_lab.core.training.distributed import split_batch
from tui_lab.core.training.train import TrainingRun, open_run

ROOT = Path(__file__).resolve().parents[3]


def test_batch_split_keeps_the_effective_batch():
    train = tiny_config(train={"batch_size": 32}).train
    assert split_batch(train, 1) == (32, 1)
    assert split_batch(train, 2) == (16, 1)
    micro = tiny_config(train={"batch_size": 32, "micro_batch": 8}).train
    assert split_batch(micro, 1) == (8, 4)
    assert split_batch(micro, 2) == (8, 2)
    with pytest.raises(LabError, match="not divisible"):
        split_batch(train, 3)


def _as_rank(monkeypatch, rank: int) -> None:  # type: ignore[no-untyped-def]
    """This process as rank ``rank`` of 2, as torchrun starts it, without a process group:
    joining one and wrapping in DDP are the parts these tests do not need."""
    monkeypatch.setattr(distributed, "init", lambda info, device: device)
    monkeypatch.setattr("torch.nn.parallel.DistributedDataParallel", lambda model, device_ids=None: model)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("LOCAL_RANK", str(rank))


def test_ranks_of_a_resumed_run_draw_different_batches(tmp_path, monkeypatch):
    """After ``train --resume`` under torchrun each rank still draws its own examples."""
    out = tmp_path / "run"
    cfg = tiny_config(train={"steps": 4, "batch_size": 16, "eval_every": 4})
    TrainingRun(cfg, out).run()
    batches = []
    for rank in (0, 1):
        _as_rank(monkeypatch, rank)
        run = open_run(out, device="cpu")
        assert run.step == 4 and run.dist.rank == rank  # every rank restores the checkpoint
        batches.append([run.task.batch(run._rng, 8, run.arch).examples for _ in range(3)])
    assert batches[0] != batches[1]
    # Still determined by the seed: the same rank resumed again draws the same examples.
    again = open_run(out, device="cpu")
    assert [again.task.batch(again._rng, 8, again.arch).examples for _ in range(3)] == batches[1]


def test_ranks_that_end_together_meet_before_leaving_and_a_failed_one_does_not_wait(monkeypatch):
    """A run that ends at its last step leaves the group at a barrier with the others;
    one that fails alone leaves at once (its peers never come to the barrier)."""
    shutdowns: list[bool] = []
    _as_rank(monkeypatch, 1)
    monkeypatch.setattr(distributed, "any_rank", lambda flag, info, device: flag)  # all report alike
    monkeypatch.setattr(distributed, "shutdown", lambda info, agreed=True: shutdowns.append(agreed))
    cfg = tiny_config(train={"steps": 3, "batch_size": 8, "eval_every": 3})
    TrainingRun(cfg, None).run()
    failing = TrainingRun(cfg, None)

    def device_fault():  # type: ignore[no-untyped-def]
        raise RuntimeError("a device fault on this rank alone")

    failing._train_step = device_fault  # type: ignore[method-assign]
    assert failing.run()["reason"] == "error"
    assert shutdowns == [True, False]


def test_shutdown_meets_the_others_only_when_they_agreed(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(distributed.dist, "barrier", lambda: calls.append("barrier"))
    monkeypatch.setattr(distributed.dist, "destroy_process_group", lambda: calls.append("destroy"))
    two = distributed.DistInfo(rank=1, world_size=2, local_rank=1)
    distributed.shutdown(two)
    distributed.shutdown(two, agreed=False)
    distributed.shutdown(distributed.DistInfo())  # a single process has no group
    assert calls == ["barrier", "destroy", "destroy"]


def test_accumulated_gradients_equal_the_whole_batchs():
    """4 micro-batches of 4 leave the gradients one backward over all 16 examples leaves.

    Every example has the same length, so each micro-batch scores the same number of
    tokens and the mean of their mean losses is the whole batch's mean loss.
    """
    cfg = tiny_config(model={"dropout": 0.0}, task={"min_len": 4, "max_len": 4},
                      train={"batch_size": 16, "micro_batch": 4, "clip": 0.0})
    run = TrainingRun(cfg, None)
    start = copy.deepcopy(run.model.state_dict())
    drawn: list = []
    draw = run._next_batch

    def recording_draw(size: int):  # type: ignore[no-untyped-def]
        batch = draw(size)
        drawn.append(batch.examples)
        return batch

    accumulated: dict[str, torch.Tensor] = {}

    def keep_gradients() -> None:  # in place of the optimizer's update
        accumulated.update({n: p.grad.clone() for n, p in run.model.named_parameters()})

    run._next_batch = recording_draw  # type: ignore[method-assign]
    run.optimizer.step = keep_gradients  # type: ignore[method-assign]
    run._train_step()
    assert [len(examples) for examples in drawn] == [4, 4, 4, 4]

    whole = build_model(cfg.model, vocab_size=len(run.vocab), pad_id=PAD)
    whole.load_state_dict(start)
    whole.train()
    batch = run.task.collate([e for examples in drawn for e in examples], cfg.model.arch)
    logits = whole(batch.src, batch.tgt_in)
    F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=-100).backward()
    expected = {n: p.grad for n, p in whole.named_parameters()}
    assert set(accumulated) == set(expected)
    for name, grad in expected.items():
        assert grad.abs().sum() > 0, name
        assert torch.allclose(accumulated[name], grad, rtol=1e-4, atol=1e-6), name


@pytest.mark.skipif(shutil.which("torchrun", path=str(Path(sys.executable).parent)) is None,
                    reason="torchrun not installed beside this Python")
def test_two_gloo_processes_write_a_loadable_run(tmp_path):
    cfg = tiny_config(train={"steps": 8, "batch_size": 16, "eval_every": 8})
    preset = tmp_path / "tiny.yaml"
    preset.write_text(cfg.to_yaml())
    out = tmp_path / "ddp"
    torchrun = str(Path(sys.executable).parent / "torchrun")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [torchrun, "--standalone", "--nproc_per_node=2", "-m", "tui_lab.cli", "train",
         "--preset", str(preset), "--device", "cpu", "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path,
    )
    # The ranks' own errors come first; torchrun's report of their exit codes last.
    assert proc.returncode == 0, proc.stderr[:3000] + "\n[...]\n" + proc.stderr[-1500:]
    summaries = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(summaries) == 1  # rank 0 alone reports
    assert summaries[0]["step"] == 8
    loaded = load_run(out)
    assert loaded.state["world_size"] == 2
    assert loaded.config.to_dict() == cfg.to_dict()
    ddp_run = open_run(out, device="cpu")
    single = TrainingRun(cfg, None)
    assert {k: v.shape for k, v in ddp_run.model.state_dict().items()} == {
        k: v.shape for k, v in single.model.state_dict().items()
    }
    assert ddp_run.evaluate(n=16).exact_match is not None
