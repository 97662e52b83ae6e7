"""``tfx-lab decode`` on the committed run that learned to copy: greedy output, the length
cap, top-k and top-p sampling, attention heatmaps, the logit lens and --explain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, tfx


def decode(run: Path, text: str, *args: str) -> dict:
    proc = tfx("decode", "--run", str(run), "--input", text, *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_greedy_decoding_copies_the_input(learned_run: Path) -> None:
    out = decode(learned_run, "31415")
    assert out["output"] == "31415" and out["stopped"] == "eos"
    assert [s["token"] for s in out["steps"]][:5] == list("31415")
    text = tfx("decode", "--run", str(learned_run), "--input", "31415")
    assert text.returncode == 0 and text.stdout == "31415\n"


@pytest.mark.parametrize("cap", [1, 3])
def test_max_new_caps_the_output(learned_run: Path, cap: int) -> None:
    out = decode(learned_run, "31415", "--max-new", str(cap))
    assert out["output"] == "31415"[:cap]  # without the cap it is all five (above)
    assert len(out["tokens"]) == cap and len(out["steps"]) == cap
    assert out["stopped"] == "max_len"


def test_top_k_samples_only_among_the_k_most_likely(learned_run: Path) -> None:
    """At temperature 3 the confident model's other tokens get real weight: without a
    cut some seed picks a token outside the step's two most likely; with --top-k 2
    none does, and with --top-k 1 sampling is greedy whatever the seed."""
    def outside_top(steps: list[dict], k: int) -> int:
        return sum(s["token"] not in [t for t, _ in s["top"][:k]] for s in steps)

    seeds = [str(s) for s in range(8)]
    uncut = [decode(learned_run, "31415", "--temperature", "3", "--seed", s) for s in seeds]
    assert sum(outside_top(o["steps"], 2) for o in uncut) > 0
    for s in seeds:
        two = decode(learned_run, "31415", "--temperature", "3", "--top-k", "2", "--seed", s)
        assert outside_top(two["steps"], 2) == 0
        assert all(st["n_kept"] == 2 and st["kept"][:3] == [True, True, False] for st in two["steps"])
        one = decode(learned_run, "31415", "--temperature", "3", "--top-k", "1", "--seed", s)
        assert one["output"] == "31415"


def test_attention_prints_heatmaps_for_every_head(learned_run: Path) -> None:
    proc = tfx("decode", "--run", str(learned_run), "--input", "271", "--attention")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("271\n")
    for name in ("encoder.0.self", "decoder.0.self", "decoder.0.cross", "decoder.1.cross"):
        for h in (0, 1):
            assert f"{name} head {h}" in proc.stdout
    assert any(ch in proc.stdout for ch in "░▒▓█")
    out = decode(learned_run, "271", "--attention")
    weights = out["attention"]["decoder.0.cross"]["weights"]
    assert len(weights) == 2 and all(sum(row) == pytest.approx(1, abs=1e-5) for row in weights[0])


def test_decode_bad_input_is_one_line(learned_run: Path) -> None:
    assert_one_line_error(tfx("decode", "--run", str(learned_run), "--input", "12x"), "vocabulary")
    assert_one_line_error(tfx("decode", "--run", str(learned_run), "--input", ""), "empty")


def test_decode_lens_explain_and_seeded_top_p(learned_run: Path) -> None:
    run = str(learned_run)
    out = decode(learned_run, "3141", "--lens", "--explain", "decoder.0.cross:1@2")
    assert len(out["lens"]["rows"][-1]) == len(out["steps"])
    for cell, step in zip(out["lens"]["rows"][-1], out["steps"], strict=True):
        assert cell["prob"] == pytest.approx(step["prob"], abs=1e-5)  # the last layer is the output
    assert out["explain"]["head"] == "decoder.0.cross:1" and out["explain"]["max_diff"] < 1e-5
    text = tfx("decode", "--run", run, "--input", "3141", "--explain", "decoder.0.cross:1@2", "--lens")
    assert "q.k" in text.stdout and "max |softmax - captured weights|" in text.stdout
    assert "logit lens" in text.stdout
    sample = ["decode", "--run", run, "--input", "3141", "--temperature", "1", "--top-p", "0.9",
              "--seed", "5"]
    first, second = tfx(*sample), tfx(*sample)
    assert first.returncode == 0 and first.stdout == second.stdout and "kept" in first.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [(["--explain", "decoder.0.cross:1"], "NAME:HEAD@ROW"),
     (["--explain", "decoder.0.cross:1@99"], "query rows"),
     (["--explain", "decoder.7.cross:1@0"], "no attention module"),
     (["--top-p", "0"], "top-p")],
)
def test_decode_bad_explain_and_top_p_are_one_line(learned_run: Path, args: list[str],
                                                   fragment: str) -> None:
    extra = ["--temperature", "1"] if "--top-p" in args else []
    proc = tfx("decode", "--run", str(learned_run), "--input", "3141", *extra, *args)
    assert_one_line_error(proc, fragment)
    assert proc.stdout == ""  # nothing half printed before the error
