"""``tfx-lab ablate`` on the committed model that learned to copy (99.4% exact match).

Its heads matter, so a wrong drop, a wrong ranking or an ablation that switches off
nothing shows up. The figures are checked against ``tfx-lab eval`` and, for the top
heads, against this file's own measurement: the head's columns of ``w_o`` edited on a
freshly loaded model, exact match by a plain greedy loop over ``encode``/``decode``.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import torch

from tests.cli.helpers import LEARNED_RUN, assert_one_line_error, tfx

N = 200  # held-out examples: 1 example = 0.005 of exact match
TOLERANCE = 2 / N  # own loop vs the command: float rounding may flip an example or two


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("ablate") / "learned-copy"
    shutil.copytree(LEARNED_RUN, dest)
    (dest / "ablation.json").unlink(missing_ok=True)  # measure, do not read figures back
    return dest


@pytest.fixture(scope="module")
def table(run: Path) -> dict:
    proc = tfx("ablate", "--run", str(run), "--n", str(N), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def ablate_json(run: Path, *args: str) -> dict:
    proc = tfx("ablate", "--run", str(run), "--n", str(N), *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# --- this file's own measurement -------------------------------------------------------

def fresh_model(run: Path):  # type: ignore[no-untyped-def]
    from tui_lab.core import load_for_inference

    return load_for_inference(str(run), "cpu")


def held_out(loaded) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """The examples the command measures on (the run's held-out set for its seed)."""
    from tui_lab.core.training.evaluate import held_out_pairs

    pairs = held_out_pairs(loaded.task, loaded.config.train, N)
    assert all(answer == text for text, answer in pairs)  # a copy task
    return pairs


def padded(rows: list[list[int]], first: int | None = None) -> torch.Tensor:
    pad = 0  # the vocabulary's PAD id
    rows = [([first] if first is not None else []) + r for r in rows]
    out = torch.full((len(rows), max(map(len, rows))), pad, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


@torch.no_grad()
def own_exact_match(loaded, pairs: list[tuple[str, str]]) -> float:  # type: ignore[no-untyped-def]
    """Greedy decoding by hand: the whole target re-decoded each step (no KV cache)."""
    from tui_lab.core.tasks.vocab import BOS, EOS

    model, vocab = loaded.model.eval(), loaded.task.vocab
    src = padded([vocab.encode(x) for x, _ in pairs])
    memory = model.encode(src)
    tgt = torch.full((len(pairs), 1), BOS, dtype=torch.long)
    longest = max(len(y) for _, y in pairs)
    for _ in range(longest + 1):  # every answer and its EOS
        nxt = model.decode(tgt, memory, src)[:, -1].argmax(-1)  # (B,)
        tgt = torch.cat([tgt, nxt[:, None]], dim=1)
    right = 0
    for row, (_, answer) in zip(tgt[:, 1:].tolist(), pairs, strict=True):
        if EOS in row and row[: row.index(EOS)] == vocab.encode(answer):
            right += 1
    return right / len(pairs)


def attention(model, name: str):  # type: ignore[no-untyped-def]
    from tui_lab.core.model.attention import MultiHeadAttention

    (module,) = [m for m in model.modules()
                 if isinstance(m, MultiHeadAttention) and m.lab_name == name]
    return module


def head_columns(module, head: int) -> slice:  # type: ignore[no-untyped-def]
    d_head = module.w_o.in_features // module.n_heads
    return slice(head * d_head, (head + 1) * d_head)


@torch.no_grad()
def zero_head(loaded, label: str) -> None:  # type: ignore[no-untyped-def]
    """Switch a head off by its weights: its slice of ``w_o``'s input columns set to 0."""
    name, head = label.rsplit(":", 1)
    module = attention(loaded.model, name)
    module.w_o.weight[:, head_columns(module, int(head))] = 0.0


@torch.no_grad()
def mean_head(loaded, label: str, pairs: list[tuple[str, str]]) -> None:  # type: ignore[no-untyped-def]
    """Replace a head by its mean output over the probe batch (teacher forced, real tokens
    only), by its weights: ``w_o``'s columns for it zeroed, their product with the mean
    added to ``w_o``'s bias."""
    from tui_lab.core.tasks.vocab import BOS

    name, head = label.rsplit(":", 1)
    module = attention(loaded.model, name)
    cols = head_columns(module, int(head))
    vocab = loaded.task.vocab
    src = padded([vocab.encode(x) for x, _ in pairs])
    tgt_in = padded([vocab.encode(y) for _, y in pairs], first=BOS)
    seen: list[torch.Tensor] = []
    hook = module.w_o.register_forward_pre_hook(lambda _m, args: seen.append(args[0][..., cols]))
    loaded.model.eval()(src, tgt_in)
    hook.remove()
    real = (src if name.startswith("encoder") else tgt_in) != 0  # (B, T): not padding
    mean = seen[0][real].mean(0)  # (d_head,)
    module.w_o.bias += module.w_o.weight[:, cols] @ mean
    module.w_o.weight[:, cols] = 0.0


# --- the table --------------------------------------------------------------------------

def test_baseline_is_what_eval_reports_and_what_greedy_decoding_gives(run: Path, table: dict) -> None:
    proc = tfx("eval", "--run", str(run), "--n", str(N), "--json")
    assert proc.returncode == 0, proc.stderr
    evaluated = json.loads(proc.stdout)
    assert evaluated["n"] == table["n"] == N
    assert table["baseline"] == pytest.approx(evaluated["exact_match"], abs=0.5 / N)  # same count
    loaded = fresh_model(run)
    assert own_exact_match(loaded, held_out(loaded)) == pytest.approx(table["baseline"], abs=TOLERANCE)
    assert table["baseline"] > 0.95


def test_every_head_once_each_drop_is_baseline_minus_its_exact_match_sorted(table: dict) -> None:
    rows = table["rows"]
    assert sorted(r["head"] for r in rows) == sorted(
        f"{m}:{h}" for m in ("encoder.0.self", "decoder.0.self", "decoder.0.cross",
                             "decoder.1.self", "decoder.1.cross") for h in (0, 1))
    for r in rows:
        assert r["drop"] == pytest.approx(table["baseline"] - r["exact_match"], abs=1e-9)
    drops = [r["drop"] for r in rows]
    assert drops == sorted(drops, reverse=True)


def test_the_head_that_does_the_copying_leads_by_a_wide_margin(table: dict) -> None:
    first, second = table["rows"][:2]
    assert first["drop"] > 0.5
    assert first["drop"] - second["drop"] > 0.15


@pytest.mark.parametrize("rank", [0, 1])
def test_a_top_head_switched_off_by_hand_gives_the_same_exact_match(run: Path, table: dict,
                                                                    rank: int) -> None:
    row = table["rows"][rank]
    loaded = fresh_model(run)
    pairs = held_out(loaded)
    zero_head(loaded, row["head"])
    assert own_exact_match(loaded, pairs) == pytest.approx(row["exact_match"], abs=TOLERANCE)


def test_the_table_is_cached_for_the_same_weights(run: Path, table: dict) -> None:
    assert table["cached"] is False and (run / "ablation.json").is_file()
    again = ablate_json(run)
    assert again["cached"] is True and again["rows"] == table["rows"]


def test_the_table_as_text(run: Path, table: dict) -> None:
    proc = tfx("ablate", "--run", str(run), "--n", str(N))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"{run}: step 400, {N} held-out, mode zero, baseline exact match ")
    assert lines[0].endswith(f"{table['baseline']:.1%} (cached)")
    assert lines[1].split() == ["head", "exact", "drop"]
    body = [line.split() for line in lines[2:]]
    assert [b[0] for b in body] == [r["head"] for r in table["rows"]]  # the same order
    for cells, r in zip(body, table["rows"], strict=True):
        assert cells[1:] == [f"{r['exact_match']:.1%}", f"{r['drop']:+.1%}"]


# --- one head, mean mode ------------------------------------------------------------------

def test_one_head_by_name_is_the_tables_row(run: Path, table: dict) -> None:
    row = table["rows"][1]
    out = ablate_json(run, "--head", row["head"])
    assert out["heads"] == [row["head"]] and out["mode"] == "zero" and out["n"] == N
    assert out["baseline"] == pytest.approx(table["baseline"], abs=1e-9)
    assert out["exact_match"] == pytest.approx(row["exact_match"], abs=1e-9)
    assert out["drop"] == pytest.approx(out["baseline"] - out["exact_match"], abs=1e-9)
    text = tfx("ablate", "--run", str(run), "--n", str(N), "--head", row["head"])
    assert text.returncode == 0
    assert f"with {row['head']} ablated {row['exact_match']:.1%}" in text.stdout


def test_mean_mode_replaces_the_head_by_its_mean_output(run: Path, table: dict) -> None:
    top = table["rows"][0]["head"]
    out = ablate_json(run, "--head", top, "--mode", "mean")
    assert out["mode"] == "mean" and out["heads"] == [top]
    assert out["drop"] == pytest.approx(out["baseline"] - out["exact_match"], abs=1e-9)
    loaded = fresh_model(run)
    pairs = held_out(loaded)
    mean_head(loaded, top, pairs)
    assert own_exact_match(loaded, pairs) == pytest.approx(out["exact_match"], abs=TOLERANCE)
    assert out["drop"] > 0.5  # the mean output carries no copy of the input either


def test_mean_mode_table(run: Path) -> None:
    out = ablate_json(run, "--mode", "mean")
    assert out["mode"] == "mean" and len(out["rows"]) == 10
    drops = [r["drop"] for r in out["rows"]]
    assert drops == sorted(drops, reverse=True) and drops[0] > 0.5


# --- progress and mistakes ----------------------------------------------------------------

class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_counts_heads_in_place_on_a_terminal_only(learned_run: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    args = ("ablate", "--run", str(learned_run), "--n", "20")
    piped = tfx(*args)
    assert piped.returncode == 0 and piped.stderr == ""  # a log gets no carriage returns
    (learned_run / "ablation.json").unlink()
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    from tui_lab.cli import main

    assert main(list(args)) == 0
    shown = terminal.getvalue()
    assert shown == "".join(f"\rablating head {i}/10" for i in range(1, 11)) + "\n"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--head", "decoder.0.cross:5"], "heads 0..1"),
        (["--head", "decoder.4.cross:0"], "no attention module"),
        (["--head", "cross"], "NAME:HEAD"),
        (["--mode", "half"], "mode 'half'"),
        (["--n", "0"], "--n: must be > 0"),
    ],
)
def test_ablate_bad_heads_are_one_line(learned_run: Path, args: list[str], fragment: str) -> None:
    proc = tfx("ablate", "--run", str(learned_run), *args)
    assert_one_line_error(proc, fragment)
    assert proc.returncode == 2
