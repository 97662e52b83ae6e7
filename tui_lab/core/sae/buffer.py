"""The shuffled activation buffer: batches of rows drawn from many contexts at once.

Activations come from a model in context order: neighbouring tokens of one text
share their features, so training on them as they come would show the SAE one
topic at a time, and its features would chase each topic and forget the last.
The buffer holds ``capacity`` rows (never the whole set), shuffles them, serves
half as batches, refills that half from the source, and shuffles again: new
rows always mix with old ones, as in SAELens's mixing buffer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch


class ActivationBuffer:
    """Iterate for shuffled (batch_size, d_in) batches of the rows ``source`` yields.

    ``source`` yields activation tensors of shape (..., d_in), any number of rows
    each; it is read lazily, as the buffer drains. The last rows that do not fill a
    batch are dropped when the source ends.
    """

    def __init__(
        self,
        source: Iterable[torch.Tensor],
        capacity: int,
        batch_size: int,
        seed: int = 0,
        device: torch.device | str = "cpu",
        shuffle: bool = True,
    ) -> None:
        if capacity < 2 * batch_size:
            raise ValueError(f"buffer capacity {capacity} must hold two batches of {batch_size}")
        self._source = iter(source)
        self.capacity = capacity
        self.batch_size = batch_size
        self.device = torch.device(device)
        self.shuffle = shuffle
        self._gen = torch.Generator().manual_seed(seed)
        self._rows: torch.Tensor | None = None  # (capacity, d_in), allocated on the first rows
        self._size = 0  # rows of _rows in use
        self._pending: torch.Tensor | None = None  # rows read but not yet room for
        self.rows_read = 0

    def _next_rows(self) -> torch.Tensor | None:
        """The next (n, d_in) rows from the source (or what is pending), None when it ends."""
        if self._pending is not None:
            rows, self._pending = self._pending, None
            return rows
        for chunk in self._source:
            rows = chunk.detach().reshape(-1, chunk.shape[-1])
            if rows.shape[0]:
                self.rows_read += rows.shape[0]
                return rows.to(device=self.device, dtype=torch.float32)
        return None

    def _fill(self, start: int, stop: int) -> int:
        """Write source rows into _rows[start:stop]; the index after the last row written."""
        at = start
        while at < stop:
            rows = self._next_rows()
            if rows is None:
                break
            if self._rows is None:
                self._rows = torch.empty(self.capacity, rows.shape[-1], device=self.device)
            take = min(stop - at, rows.shape[0])
            self._rows[at : at + take] = rows[:take]
            if take < rows.shape[0]:
                self._pending = rows[take:]
            at += take
        return at

    def __iter__(self) -> Iterator[torch.Tensor]:
        self._size = self._fill(0, self.capacity)
        while self._rows is not None and self._size >= self.batch_size:
            rows = self._rows
            if self.shuffle:
                rows[: self._size] = rows[torch.randperm(self._size, generator=self._gen).to(self.device)]
            # Serve about half, so what stays is mixed with what comes in next.
            served = max(self.batch_size, (self._size // 2) // self.batch_size * self.batch_size)
            for at in range(0, served, self.batch_size):
                yield rows[at : at + self.batch_size].clone()  # the slot is refilled later
            refilled = self._fill(0, served)
            if refilled < served:  # the source ended: close the gap the served rows left
                kept = rows[served : self._size].clone()
                rows[refilled : refilled + kept.shape[0]] = kept
                self._size = refilled + kept.shape[0]
