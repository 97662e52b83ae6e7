"""`tfx-lab patch`, `dla`, `trace` and `steer`: their JSON fields on a trained induction run,
and bad input as one line each (unequal lengths naming both, a multi-token answer, an
unknown site, --at-step on a run without history, an encoder-decoder run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import DATA, TINY_RUN, tfx

RUN = str(DATA / "induction-run")


def _json(*args: str) -> dict:
    result = tfx(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("method", ["exact", "attribution"])
def test_patch_json(method: str) -> None:
    out = _json("patch", "--run", RUN, "--site", "z", "--method", method)
    assert {"site", "method", "direction", "clean", "corrupt", "rows", "cols", "values", "raw"} <= set(out)
    assert (out["site"], out["method"], out["direction"], out["pair"]) == ("z", method, "denoising", "induction")
    assert out["rows"] == ["L0", "L1"] and out["cols"] == ["H0", "H1", "H2", "H3"]
    assert out["clean"] > out["corrupt"]
    for raw_row, row in zip(out["raw"], out["values"], strict=True):
        for raw, value in zip(raw_row, row, strict=True):
            assert value == pytest.approx((raw - out["corrupt"]) / (out["clean"] - out["corrupt"]), abs=1e-5)


def test_patch_with_a_pair_given() -> None:
    out = _json("patch", "--run", RUN, "--clean", "abcdefgabc", "--corrupt", "uvwxyzgabc",
                "--answer", "d", "--wrong", "x", "--site", "resid_pre")
    assert out["rows"] == ["L0", "L1"] and out["cols"] == list("abcdefgabc")
    assert len(out["values"][0]) == 10
    text = tfx("patch", "--run", RUN, "--site", "attn_out")
    assert text.returncode == 0 and "L1" in text.stdout and "denoising" in text.stdout


def test_dla_json() -> None:
    out = _json("dla", "--run", RUN, "--input", "tdkywbzxtdk", "--answer", "y", "--wrong", "f")
    names = [c["name"] for c in out["components"]]
    assert names == ["embed", "pos_embed", *(f"L{i}H{h}" for i in range(2) for h in range(4)), "biases"]
    assert out["total"] == pytest.approx(sum(c["value"] for c in out["components"]), abs=1e-6)
    assert out["total"] == pytest.approx(out["model"], abs=1e-4)
    text = tfx("dla", "--run", RUN, "--input", "tdkywbzxtdk", "--answer", "y")
    assert text.returncode == 0 and "total" in text.stdout


def test_trace_json() -> None:
    out = _json("trace", "--run", RUN, "--input", "tdkywbzxtdk", "--subject", "tdk", "--answer", "y",
                "--samples", "3")
    assert out["subject"] == [8, 11] and out["rows"] == list("tdkywbzxtdk") and out["cols"] == ["L0", "L1"]
    assert set(out["values"]) == {"resid", "attn"} and out["samples"] == 3
    assert 0 <= out["corrupt"] <= 1 and 0 <= out["clean"] <= 1


def test_steer_json(tmp_path: Path) -> None:
    (tmp_path / "pos.txt").write_text("abcabc\nabab\n\n")
    (tmp_path / "neg.txt").write_text("xyzxyz\nxyxy\n")
    args = ["steer", "--run", RUN, "--input", "tdkywbzxtdk", "--hook", "blocks.1.hook_resid_pre",
            "--positive", str(tmp_path / "pos.txt"), "--negative", str(tmp_path / "neg.txt")]
    zero = _json(*args, "--coef", "0")
    assert zero["steered"] == zero["plain"] and zero["norm"] > 0
    strong = _json(*args, "--coef", "4", "--max-new", "6")
    assert len(strong["steered"]) == 6 and strong["hook"] == "blocks.1.hook_resid_pre"


@pytest.mark.parametrize(("args", "says"), [
    (["patch", "--run", RUN, "--clean", "abcd", "--corrupt", "abcde", "--answer", "a", "--wrong", "b"],
     "the clean input is 4 tokens and the corrupted one 5"),
    (["patch", "--run", RUN, "--clean", "abcd", "--corrupt", "abce", "--answer", "ab", "--wrong", "b"],
     "the answer 'ab' is 2 tokens"),
    (["patch", "--run", RUN, "--clean", "abcd"], "missing --corrupt, --answer, --wrong"),
    (["patch", "--run", RUN, "--site", "resid_post"], "unknown site 'resid_post'"),
    (["patch", "--run", RUN, "--site", "mlp_out"], "no MLP"),
    (["patch", "--run", RUN, "--method", "guess"], "unknown method"),
    (["patch", "--run", str(TINY_RUN), "--at-step", "5"], "no history snapshots"),
    (["patch", "--run", RUN, "--clean", "abcd", "--corrupt", "abce", "--answer", "a", "--wrong", "b", "--target", "x"],
     "this model has one stack"),
    (["patch", "--run", str(TINY_RUN), "--pair", "ioi"], "no ready-made pair 'ioi' for this model (offered: copy)"),
    (["steer", "--run", str(TINY_RUN), "--input", "12", "--hook", "decoder.0.hook_resid_pre", "--positive",
      __file__, "--negative", __file__, "--coef", "1"], "steer at an encoder.{L} hook"),
    (["dla", "--run", RUN, "--input", "abc", "--answer", "a", "--wrong", "bc"], "the wrong answer 'bc' is 2 tokens"),
    (["trace", "--run", RUN, "--input", "abc", "--subject", "xy", "--answer", "a"], "not among the input's tokens"),
    (["steer", "--run", RUN, "--input", "abc", "--hook", "blocks.0.hook_resid_pre", "--positive", "/nonexistent",
      "--negative", "/nonexistent", "--coef", "1"], "cannot read the prompts"),
])
def test_bad_input_is_one_line(args: list[str], says: str) -> None:
    result = tfx(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfx-lab: error:") and says in lines[0], result.stderr


def test_patch_an_saes_features(tmp_path: Path) -> None:
    """--site sae: the features of an SAE folder at its hook, as the core patches them."""
    from tui_lab.core.analysis.patching.feature_patching import feature_patch
    from tui_lab.core.analysis.patching.patch_pair import ready_pair
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.sae.folder import save_sae
    from tui_lab.core.sae.recipe import new_sae
    from tui_lab.core.sae.source import open_sae

    lab = open_model(RUN)
    save_sae(new_sae(int(lab.config.model.d_model), 32, "topk", 4, "blocks.1.hook_resid_pre", RUN, 16, seed=1),
              tmp_path / "sae")
    proc = tfx("patch", "--run", RUN, "--site", "sae", "--sae", str(tmp_path / "sae"), "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    want = feature_patch(lab, ready_pair(lab), open_sae(str(tmp_path / "sae")))
    assert got["site"] == "sae" and got["rows"] == ["blocks.1.hook_resid_pre"] and got["cols"] == want.cols
    assert got["raw"][0] == pytest.approx(want.raw[0], abs=1e-5)
    bad = tfx("patch", "--run", RUN, "--site", "sae")
    assert bad.returncode == 2 and "--site sae and --sae DIR go together" in bad.stderr
