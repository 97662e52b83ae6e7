"""Which features fire: tokens since each last fired (dead features) and how often (density)."""

from __future__ import annotations

import torch

from tui_lab.core.sae.metrics import dead_fraction

# SAELens's sparsity.safetensors holds log10(density + 1e-10): a feature that never
# fired reads −10, not −inf.
LOG_EPS = 1e-10


def fired_counts(features: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(how many tokens each feature fired on (d_sae,), the tokens) of ``features`` (..., d_sae)."""
    fired = features.reshape(-1, features.shape[-1]) > 0
    return fired.sum(dim=0), fired.shape[0]


class FeatureActivity:
    """Counts, over the tokens seen in training, when and how often each feature fired."""

    def __init__(self, d_sae: int, window: int, device: torch.device | str = "cpu") -> None:
        self.window = window  # a feature silent this many tokens is dead
        self.since_fired = torch.zeros(d_sae, dtype=torch.long, device=device)
        self.fired = torch.zeros(d_sae, dtype=torch.float64, device=device)
        self.tokens = 0

    @torch.no_grad()
    def update(self, features: torch.Tensor) -> None:
        """Count the tokens of ``features`` (..., d_sae)."""
        self.add(*fired_counts(features))

    @torch.no_grad()
    def add(self, counts: torch.Tensor, n: int) -> None:
        """Count ``n`` tokens on which feature i fired ``counts[i]`` times (d_sae,)."""
        self.since_fired += n
        self.since_fired.masked_fill_(counts > 0, 0)
        self.fired += counts
        self.tokens += n

    def dead_mask(self) -> torch.Tensor:
        """True for each feature silent for the last ``window`` tokens (none before then)."""
        return self.since_fired >= self.window

    def dead_fraction(self) -> float:
        return dead_fraction(self.since_fired, self.window)

    def log10_density(self) -> torch.Tensor:
        """log10 of each feature's firing rate, as SAELens's ``sparsity.safetensors`` holds it."""
        density = self.fired / max(self.tokens, 1)
        return torch.log10(density + LOG_EPS).float()

    def state(self) -> dict[str, torch.Tensor]:
        """The counts as tensors, for a checkpoint."""
        return {"since_fired": self.since_fired.clone(), "fired": self.fired.clone(),
                "tokens": torch.tensor([self.tokens], dtype=torch.long)}

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        self.since_fired.copy_(state["since_fired"])
        self.fired.copy_(state["fired"])
        self.tokens = int(state["tokens"][0])
