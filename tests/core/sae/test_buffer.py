"""The shuffled activation buffer: bounded, lazy, and mixing new rows with old ones."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from tui_lab.core.sae.buffer import ActivationBuffer


def _numbered(rows: int, chunk: int, read: list[int]) -> Iterator[torch.Tensor]:
    """Rows whose single value is their index, in chunks; ``read`` records how far it was read."""
    for start in range(0, rows, chunk):
        read.append(start + chunk)
        yield torch.arange(start, start + chunk, dtype=torch.float32)[:, None].repeat(1, 2)


def test_reads_lazily_and_holds_at_most_its_capacity() -> None:
    read: list[int] = []
    batches = iter(ActivationBuffer(_numbered(100_000, 100, read), capacity=1000, batch_size=50))
    first = next(batches)
    assert first.shape == (50, 2)
    assert read[-1] == 1000  # only the first fill was read, not the whole source


def test_every_row_served_once_and_shuffled() -> None:
    read: list[int] = []
    served = torch.cat(list(ActivationBuffer(_numbered(4000, 100, read), capacity=1000, batch_size=50)))
    values = served[:, 0]
    assert sorted(values.tolist()) == list(range(4000))  # nothing lost, nothing twice
    assert not torch.equal(values, torch.arange(4000.0))


def test_refills_mix_new_rows_with_old() -> None:
    """After the first refill, batches hold rows read before it and rows read after it."""
    read: list[int] = []
    batches = list(ActivationBuffer(_numbered(4000, 100, read), capacity=1000, batch_size=50))
    second_round = torch.cat(batches[10:20])[:, 0]  # served after one refill
    assert (second_round < 1000).any() and (second_round >= 1000).any()


def test_unshuffled_keeps_order() -> None:
    batches = ActivationBuffer(_numbered(1000, 100, []), capacity=400, batch_size=50, shuffle=False)
    assert torch.cat(list(batches))[:200, 0].tolist() == list(range(200))


def test_leading_dims_are_flattened_and_too_small_refused() -> None:
    source = [torch.zeros(4, 25, 3)]
    assert [b.shape for b in ActivationBuffer(source, capacity=100, batch_size=50)] == [(50, 3), (50, 3)]
    with pytest.raises(ValueError, match="two batches"):
        ActivationBuffer(source, capacity=60, batch_size=50)
