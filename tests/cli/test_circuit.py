"""`tfx-lab circuit`: the JSON keys the issue names on the trained induction run, the same
numbers as the Python functions, the text view, and bad input as one line each (unequal
lengths, a two-token answer, a head pair out of range, --top 0, an encoder-decoder run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import INDUCTION_RUN, LEARNED_RUN, assert_one_line_error, tfx
from tui_lab.core import edge_attribution, faithfulness, open_model
from tui_lab.core.analysis.patching.patch_pair import ready_pair


def _json(*args: str) -> dict:
    result = tfx("circuit", "--run", INDUCTION_RUN, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_json_has_the_issues_keys_and_the_functions_numbers() -> None:
    out = _json("--method", "eap", "--top", "5", "--path", "a0.h3->a1.h1<k>")
    assert {"edges", "faithfulness", "cpr", "cmd", "pair", "method", "n_edges", "path"} <= set(out)
    assert out["pair"] == "induction-key" and out["method"] == "eap" and out["n_edges"] == 81  # the default
    assert len(out["edges"]) == 5 and set(out["edges"][0]) == {"from", "to", "score"}
    assert [p["percent"] for p in out["faithfulness"]] == [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100]
    lab = open_model(INDUCTION_RUN)
    pair = ready_pair(lab, "induction-key")
    scores = edge_attribution(lab, pair, method="eap")
    want = [e.to_dict() for e in scores.top(5)]
    assert [(e["from"], e["to"]) for e in out["edges"]] == [(e["from"], e["to"]) for e in want]
    assert [e["score"] for e in out["edges"]] == pytest.approx([e["score"] for e in want], abs=1e-5)
    assert out["cpr"] == pytest.approx(faithfulness(lab, pair, scores).cpr, abs=1e-5)
    assert out["path"]["edge"] == "a0.h3->a1.h1<k>"
    assert out["path"]["recovered"] == pytest.approx(
        (out["path"]["patched"] - out["corrupt"]) / (out["clean"] - out["corrupt"]), abs=1e-5)


def test_a_mean_ablation_says_so_and_starts_from_its_empty_circuit() -> None:
    out = _json("--method", "eap", "--mean", "4")
    assert out["ablation"] == "mean of 4 held-out inputs"
    assert out["faithfulness"][-1]["recovered"] == pytest.approx(1.0, abs=1e-5)
    assert _json("--method", "eap")["ablation"] == "corrupt"


def test_path_equals_the_exact_edge_score() -> None:
    out = _json("--method", "exact", "--top", "81", "--path", "a0.h0->a1.h2<k>")
    exact = {f"{e['from']}->{e['to']}": e["score"] for e in out["edges"]}
    assert out["path"]["patched"] - out["corrupt"] == pytest.approx(exact["a0.h0->a1.h2<k>"], abs=1e-5)


def test_eap_ig_by_default_and_a_typed_pair_in_text() -> None:
    result = tfx("circuit", "--run", INDUCTION_RUN, "--clean", "abcdefgabc", "--corrupt", "uvwxyzgabc",
                 "--answer", "d", "--wrong", "x", "--top", "3", "--ig-steps", "3")
    assert result.returncode == 0, result.stderr
    assert "eap-ig scores of 81 edges over the custom pair" in result.stdout
    assert "CPR" in result.stdout and "100% (   81 edges) +1.000" in result.stdout


def test_the_check_on_the_key_pair() -> None:
    """``--pair induction-key --check``: the list's top is the key path's ends, then a key edge; the
    check (over 8 such pairs) says so, in JSON and in text."""
    out = _json("--pair", "induction-key", "--check", "--top", "9")
    assert out["pair"] == "induction-key"
    ends = [e for e in out["edges"][:8] if (e["from"] == "input" and e["to"].startswith("a0.") and e["to"].endswith("<v>"))
            or (e["from"].startswith("a1.") and e["to"] == "logits")]
    assert len(ends) == 8 and out["edges"][8]["to"].endswith("<k>") and out["edges"][8]["score"] > 0
    check = out["known_circuit"]
    assert check["found"] and check["ends_above"] == check["rank"] - 1 and check["rank"] <= check["top"] == 16
    assert check["edge"].split("->")[0] in check["previous"] and check["scored_over"] == "8 induction-key pairs (eap-ig)"
    text = tfx("circuit", "--run", INDUCTION_RUN, "--pair", "induction-key", "--check", "--top", "3")
    assert text.returncode == 0 and "known circuit found: " in text.stdout


def test_history_follows_the_final_circuit_back_over_the_snapshots() -> None:
    """``--history`` on induction-mlp (snapshots at 100, 400, 1,200; the last is the final model):
    the smallest top k% recovering 0.8 at the end, measured at each; the last equals the curve's."""
    result = tfx("circuit", "--run", str(Path(INDUCTION_RUN).parent / "induction-mlp-run"), "--pair",
                 "induction-key", "--history", "--top", "2", "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    h, curve = out["history"], {p["percent"]: p["recovered"] for p in out["faithfulness"]}
    assert h["percent"] == min(p for p, r in curve.items() if r >= 0.8)
    assert h["steps"] == [100, 400, 1200] and h["recovered"][-1] == pytest.approx(curve[h["percent"]], abs=1e-5)
    assert h["final_gap"] == pytest.approx(out["clean"] - out["corrupt"], abs=1e-4)
    assert h["gap"][0] < 0.05 * h["final_gap"] < h["gap"][1]  # step 100 does not tell the pair apart yet


def test_history_on_a_run_without_snapshots_is_one_line() -> None:
    assert_one_line_error(tfx("circuit", "--run", INDUCTION_RUN, "--history"), "no history snapshots")


def test_the_check_on_a_run_without_an_induction_head_is_one_line() -> None:
    control = str(Path(INDUCTION_RUN).parent / "induction-control")  # one layer
    assert_one_line_error(tfx("circuit", "--run", control, "--pair", "induction", "--check"), "two layers")


@pytest.mark.parametrize(("args", "says"), [
    (["--clean", "abcdefgabc", "--corrupt", "uvwxyzgab", "--answer", "d", "--wrong", "x"], "10 tokens"),
    (["--clean", "abcdefgabc", "--corrupt", "uvwxyzgabc", "--answer", "de", "--wrong", "x"], "is 2 tokens"),
    (["--pair", "induction", "--path", "a0.h1->a1.h9<k>"], "no head a1.h9"),
    (["--pair", "induction", "--path", "a1.h1->a0.h2<q>"], "a later layer"),
    (["--pair", "induction", "--path", "a0.h1->a1.h2"], "--path is a head pair"),
    (["--pair", "induction", "--top", "0"], "--top: must be >= 1"),
    (["--pair", "induction", "--ig-steps", "0"], "--ig-steps: must be >= 1"),
    (["--pair", "induction", "--method", "acdc"], "unknown method 'acdc'"),
    (["--pair", "induction", "--clean", "ab"], "either --pair or"),
    (["--pair", "induction", "--mean", "-2"], "--mean: must be >= 0"),
    (["--clean", "abcdefgabc", "--corrupt", "uvwxyzgabc", "--answer", "d", "--wrong", "x", "--mean", "4"],
     "--mean takes its held-out inputs"),
])
def test_bad_input_is_one_line(args: list[str], says: str) -> None:
    assert_one_line_error(tfx("circuit", "--run", INDUCTION_RUN, *args), says)


def test_an_encoder_decoder_run_is_one_line() -> None:
    assert_one_line_error(tfx("circuit", "--run", str(LEARNED_RUN), "--top", "3"), "decoder-only")
