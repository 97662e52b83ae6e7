"""Fine-tuning a real model: a random-weight save_pretrained folder of each family, on a text."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from bench.hf_factory import TEXT, save_family
from tui_lab.core.config.error import ConfigError
from tui_lab.core.opening.from_files import open_files
from tui_lab.core.opening.from_run import load_for_inference
from tui_lab.core.runs.snapshots import list_snapshots
from tui_lab.core.tasks.token_lm import TokenLMTask
from tui_lab.core.training.finetune import open_finetune
from tui_lab.core.training.train import open_run

FAMILIES = ("gpt2", "gpt_neox", "llama", "gpt_neo")
# A repetitive text a few dozen steps at a brisk rate learn a good part of.
FAST = {"train.steps": 30, "train.eval_every": 10, "train.lr": 3e-3, "train.warmup_steps": 3,
        "train.device": "cpu", "train.threads": 1}


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, object]]:
    root = tmp_path_factory.mktemp("sources")
    return {f: (root / f, save_family(root / f, f)) for f in FAMILIES}


@pytest.fixture(scope="module")
def text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("text") / "story.txt"
    path.write_text(TEXT)
    return path


def probe_ids(task: TokenLMTask) -> torch.Tensor:
    return torch.tensor([task.tokenizer.encode("The cat sat on the mat. The dog sat on")])


@pytest.mark.parametrize("family", FAMILIES)
def test_the_run_starts_from_the_sources_weights(sources, text, family) -> None:
    folder, ref = sources[family]
    run = open_finetune(str(folder), str(text), None, overrides=FAST, block=32)
    ids = probe_ids(run.task)
    with torch.no_grad():
        expected = ref(ids).logits
        got = run.model.eval()(ids)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_loss_falls_and_the_run_reopens_without_its_source(sources, text, family, tmp_path) -> None:
    source = Path(shutil.copytree(sources[family][0], tmp_path / "source"))
    model_config = open_files(str(source)).config.model
    out = tmp_path / "run"
    run = open_finetune(str(source), str(text), out, overrides=FAST, block=32)
    before = run.evaluate(record=False).val_loss
    summary = run.run()
    assert summary["reason"] == "finished" and summary["step"] == 30
    assert summary["val_loss"] < before - 0.5, (before, summary["val_loss"])
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [0, 10, 20, 30]  # step 0: the source model's own loss
    assert evals[0]["val_loss"] == pytest.approx(before, abs=1e-5)

    with torch.no_grad():
        trained = run.model.eval()(probe_ids(run.task))
    shutil.rmtree(source)  # the run folder is all it needs from now on
    loaded = load_for_inference(out)
    assert isinstance(loaded.task, TokenLMTask) and loaded.step == 30
    assert loaded.config.model == model_config  # every real-model option kept in config.yaml
    assert loaded.config.task.name == "token-lm" and loaded.config.task.text == str(text.resolve())
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(probe_ids(loaded.task)), trained, atol=1e-5, rtol=1e-5)

    record = json.loads((out / "source.json").read_text())
    assert record["name"] == str(source) and record["family"] == family
    assert record["folder"] == str(source.resolve())
    assert "tokenizer.json" in record["tokenizer_files"] and (out / "tokenizer" / "tokenizer.json").is_file()
    steps = list_snapshots(out)
    assert steps and steps[-1] == 30 and 1 in steps
    assert load_for_inference(out, at_step=1).step == 1  # history snapshots time-travel


def test_a_resumed_run_continues_the_step_count(sources, text, tmp_path) -> None:
    folder, _ = sources["gpt_neox"]
    out = tmp_path / "run"
    open_finetune(str(folder), str(text), out, overrides={**FAST, "train.steps": 12}, block=32).run()
    resumed = open_run(out, {"train.steps": 20})
    assert resumed.step == 12 and isinstance(resumed.task, TokenLMTask)
    assert resumed.run()["step"] == 20
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in lines if r["kind"] == "step"]
    assert steps == list(range(1, 21))


def test_a_model_too_large_for_this_machine_is_refused_before_anything_is_written(
    sources, text, tmp_path, monkeypatch
) -> None:
    import tui_lab.core.config.lab_config as lab_config

    monkeypatch.setattr(lab_config, "available_memory_bytes", lambda: 2**20)
    out = tmp_path / "run"
    with pytest.raises(ConfigError) as info:
        open_finetune(str(sources["gpt2"][0]), str(text), out, overrides=FAST)
    message = str(info.value)
    assert "parameters need ~" in message and "GiB to train" in message and "\n" not in message
    assert not out.exists()


def test_the_labs_trainer_process_fine_tunes_and_reopens_the_run(sources, text, tmp_path) -> None:
    from tui_lab.core.training import remote

    out = tmp_path / "run"
    spec = {"source": str(sources["gpt2"][0]), "text": str(text), "block": 32,
            "overrides": {**FAST, "train.steps": 5}}
    first = remote.RemoteRun(lambda e: None, out_dir=out, finetune=spec)
    try:
        assert first.run()["step"] == 5
        assert isinstance(first.task, TokenLMTask)
        with torch.no_grad():
            expected = first.model(probe_ids(first.task))
    finally:
        first.close()
    run = remote.RemoteRun(lambda e: None, resume_dir=out)
    try:
        assert run.step == 5 and isinstance(run.task, TokenLMTask)
        with torch.no_grad():
            torch.testing.assert_close(run.model(probe_ids(run.task)), expected, atol=1e-5, rtol=1e-5)
    finally:
        run.close()
