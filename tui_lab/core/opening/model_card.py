"""What an opened model is and where each part of it came from: the Build pane's card."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ModelCard:
    """What an opened model is and where each part of it came from (read-only, for display)."""

    name: str  # what the user typed: a folder or a hub name
    family: str  # config.json's model_type
    origin: str  # "folder" or "cache"
    folder: Path
    revision: str | None
    commit: str | None
    n_params: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_model: int
    d_ff: int
    context: int
    vocab_size: int
    tokenizer_size: int
    stored_dtype: str  # the weights' dtype in the files
    files: dict[str, list[str]] = field(default_factory=dict)  # role -> file names read
    notes: list[str] = field(default_factory=list)
    dtype: str = "float32"  # what the model computes in (``--dtype``)
    held_bytes: int = 0  # the weights as held, tied ones once

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) rows of the card, in reading order."""
        kv = f" ({self.n_kv_heads} key/value)" if self.n_kv_heads != self.n_heads else ""
        if self.origin == "folder":
            where = "a folder"
        else:
            where = "the local Hugging Face cache" + (f" @ {self.commit[:12]}" if self.commit else "")
        rows = [
            ("model", self.name),
            ("family", self.family),
            ("from", where),
            ("folder", str(self.folder)),
            ("parameters", f"{self.n_params:,}"),
            ("layers", str(self.n_layers)),
            ("heads", f"{self.n_heads}{kv}"),
            ("d_model / d_ff", f"{self.d_model} / {self.d_ff}"),
            ("context", f"{self.context:,} tokens"),
            ("vocabulary", f"{self.vocab_size:,} (tokenizer: {self.tokenizer_size:,})"),
            ("weights", self.stored_dtype),
            ("runs in", f"{self.dtype}, {self.held_bytes / 2**20:,.1f} MiB of weights held"),
        ]
        # "weights" above is the stored dtype: each file row says which role it was read for.
        rows += [(f"{role} from", ", ".join(names)) for role, names in self.files.items()]
        return rows
