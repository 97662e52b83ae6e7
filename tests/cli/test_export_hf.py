"""`tfx-lab export --hf`: the shipped char-lm preset's run, trained a few steps, as a folder
that `transformers` opens and continues exactly as the lab does, and that `--model` reopens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.cli.helpers import LEARNED_RUN, assert_one_line_error, last_json_line, tfx

transformers = pytest.importorskip("transformers")

PROMPT = "The module defines the following functions:\n"
NEW = 32


@pytest.fixture(scope="module")
def char_lm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped char-lm preset (its model as shipped: rotary, tied and scaled embeddings), 6 steps."""
    run = tmp_path_factory.mktemp("char-lm") / "run"
    proc = tfx("train", "--preset", "char-lm", "--steps", "6", "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    return run


@pytest.fixture(scope="module")
def exported(char_lm_run: Path) -> tuple[Path, str]:
    out = char_lm_run.parent / "hf"
    proc = tfx("export", "--hf", str(char_lm_run), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out, proc.stdout


def test_says_what_was_written_and_how_to_open_it(exported: tuple[Path, str]) -> None:
    out, stdout = exported
    first, second = stdout.splitlines()
    assert f"-> {out}: gpt_neox," in first
    assert f"from_pretrained({str(out)!r})" in second and f"--model {out}" in second
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} <= names
    assert not [p for p in out.parent.iterdir() if ".partial-" in p.name]


def test_transformers_continues_exactly_as_the_lab(char_lm_run: Path, exported: tuple[Path, str]) -> None:
    out, _ = exported
    model = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    ids = tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    model.generation_config.eos_token_id = None  # the lab's language models run to length
    with torch.no_grad():
        generated = model.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW,
            eos_token_id=None, pad_token_id=0, output_logits=True, return_dict_in_generate=True,
        )
    new_ids = generated.sequences[0, ids.size(1):]
    lab = tfx("decode", "--run", str(char_lm_run), "--input", PROMPT, "--max-new", str(NEW), "--json")
    assert lab.returncode == 0, lab.stderr
    decoded = last_json_line(lab.stdout)
    assert decoded["tokens"] == new_ids.tolist()
    assert decoded["output"] == tokenizer.decode(new_ids, skip_special_tokens=True)
    # Each step's probability of its token: the cached path at every position, not only
    # the argmax (a model trained a few steps continues with one character).
    probs = [float(torch.softmax(step[0], -1)[t]) for step, t in zip(generated.logits, new_ids, strict=True)]
    assert [s["prob"] for s in decoded["steps"]] == pytest.approx(probs, abs=1e-5)


def test_logits_match_the_runs(char_lm_run: Path, exported: tuple[Path, str]) -> None:
    from tui_lab.core.opening.from_run import load_for_inference

    out, _ = exported
    run = load_for_inference(char_lm_run)
    model = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    ids = torch.tensor([run.task.vocab.encode(PROMPT)])
    assert transformers.AutoTokenizer.from_pretrained(out)(PROMPT)["input_ids"] == ids[0].tolist()
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, run.model(ids), atol=1e-4, rtol=0)


def test_reopens_with_model_and_decodes_as_the_run(char_lm_run: Path, exported: tuple[Path, str]) -> None:
    out, _ = exported
    args = ("--input", PROMPT, "--max-new", "24", "--json")
    by_run = tfx("decode", "--run", str(char_lm_run), *args)
    by_model = tfx("decode", "--model", str(out), *args)
    assert by_model.returncode == 0, by_model.stderr
    assert last_json_line(by_model.stdout)["output"] == last_json_line(by_run.stdout)["output"]


def test_json_and_at_step(char_lm_run: Path) -> None:
    out = char_lm_run.parent / "hf-step-1"
    proc = tfx("export", "--hf", str(char_lm_run), "--out", str(out), "--at-step", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    report = last_json_line(proc.stdout)
    assert (report["family"], report["step"], report["folder"]) == ("gpt_neox", 1, str(out))
    assert json.loads((out / "config.json").read_text())["rotary_pct"] == 1.0


def test_an_encoder_decoder_run_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = tfx("export", "--hf", str(LEARNED_RUN), "--out", str(tmp_path / "hf"))
    assert_one_line_error(proc, "cannot export: model.arch encoder-decoder")
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--hf", "a", "b", "--out", "x"], "export --hf takes one run, got 2"),
        (["--hf", "a"], "export --hf needs --out DIR"),
        (["--hf", "--tensorboard", "a"], "not allowed with argument"),
    ],
)
def test_usage_mistakes(argv: list[str], fragment: str) -> None:
    proc = tfx("export", *argv)
    assert proc.returncode != 0
    assert fragment in proc.stderr


@pytest.mark.parametrize("family", ["gpt2", "gpt_neox", "llama", "gpt_neo"])
def test_a_fine_tuned_run_exports_as_its_family_with_its_tokenizer(tmp_path: Path, family: str) -> None:
    from bench.hf_factory import TEXT, save_family
    from tests.core.pretrained.family_reference import lab_greedy, prompt, reference_greedy
    from tui_lab.core.opening.from_run import load_for_inference

    source, text, run, out = tmp_path / "source", tmp_path / "text.txt", tmp_path / "run", tmp_path / "hf"
    save_family(source, family)
    text.write_text(TEXT)
    trained = tfx("train", "--model", str(source), "--text", str(text), "--steps", "2", "--out", str(run))
    assert trained.returncode == 0, trained.stderr
    proc = tfx("export", "--hf", str(run), "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert last_json_line(proc.stdout)["family"] == family
    lab = load_for_inference(run)
    reference = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    ids = prompt(lab.model.vocab_size)
    with torch.no_grad():
        torch.testing.assert_close(reference(ids).logits, lab.model(ids), atol=1e-4, rtol=0)
    assert torch.equal(reference_greedy(reference, ids), lab_greedy(lab.model, ids))
    sentence = "Once upon a time, the cat sat on the log."
    assert transformers.AutoTokenizer.from_pretrained(out)(sentence)["input_ids"] == lab.task.vocab.encode(sentence)
