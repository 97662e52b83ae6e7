"""The head atlas's records: one head's scores (``HeadScore``) and every head's (``Atlas``).

The patterns and the records live here, apart from the scoring (``head_scores.py``), so
the alignment atlas of a translator (``alignment.py``) builds the same records without
importing the module that dispatches to it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from tui_lab.core.analysis.heads.head_floor import LABEL_FLOOR

PATTERNS = (
    "diagonal", "previous", "first", "alignment", "duplicate", "induction", "sharp", "monotonic",
    # an encoder's (bidirectional) heads: score_atlas_encoder
    "self", "next", "separator", "broad",
)
# broad's score is a row's entropy over log(its keys); its "chance" is a fixed midpoint,
# so a head needs a normalised entropy of 0.5 + 0.3 x 0.5 = 0.65 to be called broad.
BROAD_CHANCE = 0.5
NO_PATTERN = "no clear pattern"


@dataclass(frozen=True)
class HeadScore:
    """One head: ``name`` the attention module (``decoder.1.self``), ``head`` its index."""

    name: str
    head: int
    scores: dict[str, float]  # pattern -> score in [0, 1]; only the patterns that apply
    entropy: float
    best: str  # the highest-scoring pattern
    best_score: float
    probes: dict[str, str] = field(default_factory=dict)  # pattern -> the probe it was scored on
    chance: dict[str, float] = field(default_factory=dict)  # pattern -> a uniform head's score
    pattern: str | None = None  # ``best`` if it clears the floor, else None

    @property
    def label(self) -> str:
        """``decoder.1.self:2``, the form ``--head`` options take."""
        return f"{self.name}:{self.head}"

    @property
    def shown(self) -> str:
        """What the atlas calls the head: its pattern, or "no clear pattern"."""
        return self.pattern or NO_PATTERN

    def to_dict(self) -> dict[str, object]:
        return {"label": self.label, **asdict(self)}


@dataclass(frozen=True)
class Atlas:
    """Every head's scores, best first; ``probes``: probe kind -> what its rows are."""

    heads: list[HeadScore]
    probes: dict[str, str]
    floor: float = LABEL_FLOOR

    def to_dict(self) -> dict[str, object]:
        return {"floor": self.floor, "probes": self.probes, "heads": [h.to_dict() for h in self.heads]}

    def probe_lines(self) -> list[str]:
        """One line per probe (the patterns scored on it, what its rows are), then the floor."""
        return probe_lines(self.heads, self.probes, self.floor)


def probe_lines(heads: list[HeadScore], probes: dict[str, str], floor: float = LABEL_FLOOR) -> list[str]:
    """One line per probe the ``heads`` were scored on (with ``probes``' description when
    given): the patterns scored on it and what its rows are; then a line stating the floor."""
    on: dict[str, set[str]] = {kind: set() for kind in probes}
    for h in heads:
        for pattern, kind in h.probes.items():
            on.setdefault(kind, set()).add(pattern)
    lines = []
    for kind, patterns in on.items():
        names = ", ".join(p for p in PATTERNS if p in patterns)
        about = probes.get(kind)
        lines.append(f"probe {kind} ({names})" + (f": {about}" if about else ""))
    lines.append(f"label floor: lift over chance ≥ {floor:.2f}, else {NO_PATTERN}")
    return lines
