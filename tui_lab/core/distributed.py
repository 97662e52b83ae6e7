"""Data-parallel training under torchrun: who this process is, and the collectives used.

`tfx-lab train` runs unchanged under ``torchrun --nproc_per_node=N``: torchrun
sets RANK/WORLD_SIZE/LOCAL_RANK and a rendezvous address, and each process
joins the group here (NCCL on CUDA, gloo on CPU). Without those variables this
is a single process and nothing here talks to anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .errors import LabError


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


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
