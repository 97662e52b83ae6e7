"""Data-parallel training under torchrun: who this process is, its share of the data, the collectives.

`tfx-lab train` runs unchanged under ``torchrun --nproc_per_node=N``: torchrun
sets RANK/WORLD_SIZE/LOCAL_RANK and a rendezvous address, and each process
joins the group here (NCCL on CUDA, gloo on CPU). Without those variables this
is a single process and nothing here talks to anything.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import torch
import torch.distributed as dist

from tui_lab.core.config.lab_config import TrainConfig
from tui_lab.core.errors import LabError

RANK_SEED_STRIDE = 7919  # each data-parallel rank draws its own stream of examples


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0 alone logs, evaluates and writes checkpoints."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def from_environment() -> DistInfo:
    """Rank and world size as torchrun sets them (a single process otherwise)."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError as exc:
        raise LabError(f"torchrun environment: {exc}") from None
    return DistInfo(rank, world, local)


def data_rng(seed: int, rank: int, step: int) -> random.Random:
    """The stream one rank draws training examples from, for the updates after ``step``.

    Every data-parallel rank draws its own examples. A fresh run (step 0)
    seeds with ``seed + 7919 * rank``; a resumed run starts a new stream, so
    it does not replay its first steps' examples, still fixed by the seed, the
    rank and the step (a string seed: Python hashes it with SHA-512, the same
    in every process).
    """
    if step == 0:
        return random.Random(seed + RANK_SEED_STRIDE * rank)
    return random.Random(f"tfx-lab data: seed {seed}, rank {rank}, from step {step}")


def split_batch(train: TrainConfig, world_size: int) -> tuple[int, int]:
    """(micro-batch, accumulation steps) so ranks x micro x steps = train.batch_size."""
    if train.batch_size % world_size:
        raise LabError(
            f"train.batch_size: {train.batch_size} is not divisible by the {world_size} "
            f"processes torchrun started"
        )
    per_rank = train.batch_size // world_size
    micro = min(per_rank, train.micro_batch or per_rank)
    if per_rank % micro:
        raise LabError(
            f"train.micro_batch: {micro} does not divide the {per_rank} examples "
            f"each of {world_size} processes takes"
        )
    return micro, per_rank // micro


def init(info: DistInfo, device: torch.device) -> torch.device:
    """Join the process group; returns this rank's device (cuda:LOCAL_RANK on GPUs)."""
    if not info.enabled:
        return device
    if device.type == "cuda":
        device = torch.device("cuda", info.local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
    return device


def any_rank(flag: bool, info: DistInfo, device: torch.device) -> bool:
    """True on every rank if ``flag`` is true on any (stop, NaN, target reached)."""
    if not info.enabled:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def shutdown(info: DistInfo, agreed: bool = True) -> None:
    """Leave the process group.

    ``agreed``: every rank left the loop at the same step (its last, or an end that
    ``any_rank`` told them all), so all of them meet at a barrier first, after rank
    0's closing evaluation and save. Without it a rank whose peer closed its sockets
    while its own gloo thread still read from them could abort (SIGABRT) at exit,
    seen once in a loaded test run. A rank that failed alone skips the barrier: its
    peers are not coming to it.
    """
    if info.enabled and dist.is_initialized():
        if agreed:
            dist.barrier()
        dist.destroy_process_group()
