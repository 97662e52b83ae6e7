"""A feature drawn as Rich text: its numbers, histogram, logit effects and shaded contexts.

Shading: each token's background grows darker with its activation (five levels,
as ``feature_table.shade_levels`` says), and the strongest token of a context
is bold, underlined and bracketed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:
    from tui_lab.ui.panes.features.browser import Card

# what ``t`` can train (``A`` cycles): tfx-lab sae train's --arch names and their titles
ARCHS = {"topk": "TopK", "batchtopk": "BatchTopK", "matryoshka": "Matryoshka BatchTopK"}
SHADE_STYLES = ("", "on #3a2a10", "on #6b4a12", "on #a86b12", "bold black on #f0a020")
BAR = "█"
SPARKS = "▁▂▃▄▅▆▇█"


def shown(token: str) -> str:
    """A token as printable cells (newline and tab made visible)."""
    return token.replace("\n", "⏎").replace("\t", "⇥").replace("\r", "␍") or "∅"


def context_text(tokens: list[str], activations: list[float], peak_at: int, peak: float,
                 width: int = 70) -> Text:
    """One context around its peak, each token shaded by its activation, the peak marked."""
    from tui_lab.core.sae.feature_table import shade_levels

    levels = shade_levels(activations, peak)
    lo = max(0, peak_at - width * 2 // 3)
    out = Text(no_wrap=True, overflow="ellipsis")
    used = 0
    for j in range(lo, len(tokens)):
        piece = shown(tokens[j])
        if j == peak_at:
            out.append("[", style="bold")
            out.append(piece, style=SHADE_STYLES[4] + " underline")
            out.append("]", style="bold")
        else:
            out.append(piece, style=SHADE_STYLES[levels[j]])
        used += len(piece)
        if used >= width:
            break
    return out


def histogram_text(rows: list[tuple[float, float, int]], width: int = 24, height: int = 6) -> Text:
    """Bars of the log-binned histogram, one line per bin (at most ``height``, merged)."""
    out = Text()
    if not rows:
        return Text("never fired on this text", style="dim")
    step = max(1, -(-len(rows) // height))
    merged = [(rows[i][0], rows[min(i + step, len(rows)) - 1][1], sum(n for _, _, n in rows[i:i + step]))
              for i in range(0, len(rows), step)]
    most = max(n for _, _, n in merged) or 1
    for lo, hi, n in merged:
        out.append(f"{lo:7.3g}–{hi:<7.3g} ", style="dim")
        out.append(BAR * max(1 if n else 0, round(width * n / most)), style="cyan")
        out.append(f" {n}\n", style="dim")
    out.rstrip()
    return out


def card_text(card: Card, width: int = 70) -> Text:
    """The whole card: header, logit effects, histogram, contexts."""
    out = Text()
    out.append(f"feature {card['feature']}", style="bold")
    out.append(f"   density {card['density']:.3%} of {card['tokens']:,} tokens   max {card['max']:.3g}\n",
               style="dim")
    effects = card["effects"]
    if effects is not None:
        for kind, style, pairs in (("promoted", "green", effects["promoted"]),
                                   ("suppressed", "red", effects["suppressed"])):
            out.append(f"{kind:<11}", style="dim")
            for token, value in pairs[:8]:
                out.append(shown(token), style=f"bold {style}")
                out.append(f" {value:+.2f}  ", style="dim")
            out.append("\n")
    out.append("activations (log-spaced bins)\n", style="dim italic")
    out.append_text(histogram_text(card["histogram"]))
    out.append("\ntop contexts (darker: stronger; [x] the strongest)\n", style="dim italic")
    if not card["contexts"]:
        out.append("none: the feature never fired on this text\n", style="dim")
    for c in card["contexts"]:
        out.append(f"{c['peak']:7.3g} ", style="dim")
        out.append_text(context_text(c["tokens"], c["activations"], c["peak_at"], c["peak"], width))
        out.append("\n")
    return out


def matryoshka_widths(d_sae: int) -> list[int]:
    """The nested prefix sizes ``tfx-lab sae train --arch matryoshka`` takes by default (a sixteenth,
    a quarter and all of ``d_sae``; ``core/sae/recipe.py``, which imports torch)."""
    return sorted({w for w in (d_sae // 16, d_sae // 4, d_sae) if w >= 1})


def arch_text(arch: str, d_sae: int, k: int) -> str:
    """What ``t`` trains: the architecture, its features and its k, as ``tfx-lab sae train --arch``."""
    per = "per token" if arch == "topk" else "per token on average over a batch"
    nested = f", nested prefixes {'/'.join(str(w) for w in matryoshka_widths(d_sae))}" if arch == "matryoshka" else ""
    return f"{ARCHS[arch]}, {d_sae:,} features, k = {k} {per}{nested}"


def hint_text(arch: str = "topk", d_sae: int = 1024, k: int = 16) -> Text:
    """What the pane says before it has an SAE: how to get one, then the keys."""
    text = Text()
    text.append("Sparse autoencoder features\n\n", style="bold")
    prefixes = "/".join(str(w) for w in matryoshka_widths(d_sae))
    text.append(
        f"t  train an SAE on the model in hand: {ARCHS[arch]}, {d_sae:,} features, k = {k},\n"
        "   on the residual stream after its last block, from its own text (curves below)\n"
        "A  what t trains: TopK, BatchTopK (k a token on average over a batch, after a\n"
        f"   first half at k each) or Matryoshka BatchTopK (nested prefixes {prefixes})\n"
        "o  open an SAE folder in SAELens's format\n\n"
        "Then: up/down move between features, s sorts (density, largest activation,\n"
        "activation on the typed text), / types text to see which features fire on each token;\n"
        "x decodes it without the feature on show, v steered along it.\n",
        style="dim",
    )
    return text


def sparkline(values: list[float], width: int = 40) -> str:
    """The last ``width`` values as one line of eighth blocks, scaled to their range."""
    values = [v for v in values[-width:] if v == v]  # drop NaN
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return "".join(SPARKS[min(7, int((v - lo) / span * 7.999))] for v in values)


def curves_text(history: dict[str, list[float]], done: int, total: int) -> Text:
    """Live training: a progress bar and one sparkline per curve with its last value."""
    out = Text()
    frac = done / max(total, 1)
    out.append("training  ", style="bold")
    out.append(BAR * int(30 * frac) + "·" * (30 - int(30 * frac)), style="cyan")
    out.append(f" {done:,}/{total:,} tokens\n", style="dim")
    for name, fmt in (("mse", ".4g"), ("l0", ".1f"), ("explained_variance", ".3f"), ("dead_fraction", ".1%")):
        values = history.get(name, [])
        last = format(values[-1], fmt) if values else "–"
        label = {"explained_variance": "expl. var.", "dead_fraction": "dead"}.get(name, name.upper())
        out.append(f"{label:<11}", style="dim")
        out.append(f"{sparkline(values):<40}", style="magenta")
        out.append(f" {last}\n")
    out.rstrip()
    return out
