"""`tfx-lab sae train|eval|features` on a tiny char-lm run (trained here in a second or two)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import assert_one_line_error, assert_same_json, last_json_line, tfx

HOOK = "blocks.1.hook_resid_post"
PRESET = """\
model: {arch: decoder-only, n_encoder_layers: 0, n_decoder_layers: 2, d_model: 32, n_heads: 2,
        d_ff: 64, positional: rope, max_len: 64}
task: {name: char-lm, block_size: 32}
train: {steps: 2, batch_size: 8, eval_every: 2, device: cpu, threads: 1}
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """(run, SAE folder, train's JSON summary): a char-lm run and a TopK SAE on its last block."""
    root = tmp_path_factory.mktemp("sae-cli")
    (root / "tiny.yaml").write_text(PRESET)
    assert tfx("train", "--preset", str(root / "tiny.yaml"), "--out", str(root / "run"), "--json").returncode == 0
    with pytest.MonkeyPatch.context() as env:  # where training would keep activations for the table
        env.setenv("TFX_LAB_CACHE", str(root / "cache"))
        proc = tfx("sae", "train", "--run", str(root / "run"), "--hook", HOOK, "--d-sae", "64", "--k", "4",
                   "--tokens", "6000", "--batch", "256", "--out", str(root / "sae"), "--json")
    assert proc.returncode == 0, proc.stderr
    return root / "run", root / "sae", last_json_line(proc.stdout)


def test_train_writes_an_saelens_folder(lab: tuple[Path, Path, dict]) -> None:
    from tui_lab.core import open_sae

    _, sae_dir, summary = lab
    assert summary["reason"] == "done" and summary["tokens"] >= 6000
    assert {"l0", "explained_variance", "mse", "dead_fraction", "ce_loss_recovered"} <= summary.keys()
    sae = open_sae(str(sae_dir))
    assert (sae.cfg.architecture, sae.cfg.d_in, sae.cfg.d_sae, sae.cfg.k) == ("topk", 32, 64, 4)
    assert sae.cfg.metadata.hook_name == HOOK and sae.cfg.metadata.context_size == 32
    kinds = {json.loads(line)["kind"] for line in (sae_dir / "metrics.jsonl").read_text().splitlines()}
    assert kinds == {"step", "checkpoint", "end"}


def test_eval_json_keys(lab: tuple[Path, Path, dict]) -> None:
    run, sae_dir, _ = lab
    proc = tfx("sae", "eval", str(sae_dir), "--run", str(run), "--tokens", "2000", "--json")
    assert proc.returncode == 0, proc.stderr
    result = last_json_line(proc.stdout)
    assert result["l0"] == pytest.approx(4.0) and result["tokens"] == 2000
    assert 0.0 <= result["dead_fraction"] <= 1.0 and result["mse"] > 0
    assert result["explained_variance"] < 1.0 and isinstance(result["ce_loss_recovered"], float)
    assert result["ce_zero_ablated"] != result["ce_clean"]


def test_features(lab: tuple[Path, Path, dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path))
    run, sae_dir, _ = lab
    listed = last_json_line(tfx("sae", "features", str(sae_dir), "--run", str(run), "--top", "5",
                                "--tokens", "3000", "--json").stdout)
    rows = listed["features"]
    assert len(rows) == 5 and rows[0]["density"] >= rows[-1]["density"]
    best = rows[0]["index"]
    one = last_json_line(tfx("sae", "features", str(sae_dir), "--run", str(run), "--feature", str(best),
                             "--top", "3", "--tokens", "3000", "--json").stdout)
    assert len(one["contexts"]) == 3 and one["contexts"][0]["peak"] >= one["contexts"][-1]["peak"]
    ctx = one["contexts"][0]
    assert ctx["activations"][ctx["peak_at"]] == pytest.approx(ctx["peak"], abs=1e-3)
    assert ctx["shade"][ctx["peak_at"]] == 4 and len(ctx["shade"]) == len(ctx["tokens"]) == 32
    assert one["density"] == pytest.approx(rows[0]["density"])
    assert sum(h["count"] for h in one["histogram"]) == round(one["density"] * one["tokens"])
    effects = one["logit_effects"]
    assert len(effects["promoted"]) == len(effects["suppressed"]) == 3
    assert effects["promoted"][0]["logit"] >= effects["promoted"][-1]["logit"] > effects["suppressed"][0]["logit"]
    by_max = last_json_line(tfx("sae", "features", str(sae_dir), "--run", str(run), "--top", "64", "--sort", "max",
                                "--tokens", "3000", "--json").stdout)["features"]
    assert [r["max_activation"] for r in by_max] == sorted((r["max_activation"] for r in by_max), reverse=True)
    typed = last_json_line(tfx("sae", "features", str(sae_dir), "--run", str(run), "--input", "def f",
                               "--json").stdout)
    assert [t["token"] for t in typed["tokens"]][:3] == ["d", "e", "f"]
    assert all(len(t["features"]) <= 4 for t in typed["tokens"])


def test_features_text_and_its_cache(lab: tuple[Path, Path, dict], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Text output shades each context and marks its peak; the table is computed once per
    SAE and text: the second call reads it back (an edited cache file shows through)."""
    from tui_lab.core.sae.feature_cache import load_table, save_table

    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path))
    run, sae_dir, _ = lab
    args = ("sae", "features", str(sae_dir), "--run", str(run), "--tokens", "3000")
    listed = last_json_line(tfx(*args, "--top", "1", "--json").stdout)["features"][0]
    (cached,) = (tmp_path / "sae-features").glob("*.safetensors")
    table = load_table(cached.stem)
    assert table is not None and table.tokens == 3000 - 3000 % 32
    table.density[listed["index"]] = 0.5
    save_table(cached.stem, table)
    again = last_json_line(tfx(*args, "--top", "1", "--json").stdout)["features"][0]
    assert again["density"] == 0.5
    fresh = last_json_line(tfx(*args, "--top", "1", "--no-cache", "--json").stdout)["features"][0]
    assert fresh == listed
    text = tmp_path / "other.txt"
    text.write_text("def main():\n    return 1\n" * 200)
    proc = tfx(*args, "--text", str(text), "--feature", str(listed["index"]), "--top", "2")
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "sae-features").glob("*.safetensors"))) == 2
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"feature {listed['index']}: density")
    assert any(line.strip().startswith("promoted") for line in lines)
    peaks = [i for i, line in enumerate(lines) if "[" in line and "]" in line and line.strip()[0].isdigit()]
    assert len(peaks) == 2
    for i in peaks:
        text_line, under = lines[i], lines[i + 1]
        assert len(text_line) == len(under)
        at = text_line.index("[", 12)
        assert under[at] == "^" and set(under[12:]) <= set(" ░▒▓█^")


def test_resume_continues_and_refusals(lab: tuple[Path, Path, dict], tmp_path: Path) -> None:
    run, sae_dir, _ = lab
    again = tfx("sae", "train", "--run", str(run), "--hook", HOOK, "--d-sae", "64", "--out", str(sae_dir))
    assert_one_line_error(again, "--resume continues it")
    other = tfx("sae", "train", "--run", str(run), "--hook", "blocks.0.attn.hook_pattern", "--d-sae", "8",
                "--out", str(tmp_path / "x"))
    assert other.returncode != 0 and "Traceback" not in other.stderr
    bad = tfx("sae", "eval", str(tmp_path / "missing"), "--run", str(run))
    assert_one_line_error(bad, "no such folder")


def test_width_mismatch_is_one_line(lab: tuple[Path, Path, dict], tmp_path: Path) -> None:
    from tui_lab.core.sae.config import SAEConfig, SAEMetadata
    from tui_lab.core.sae.folder import save_sae
    from tui_lab.core.sae.sae import SparseAutoencoder

    run, _, _ = lab
    cfg = SAEConfig(d_in=48, d_sae=16, architecture="standard", metadata=SAEMetadata(hook_name=HOOK))
    save_sae(SparseAutoencoder(cfg), tmp_path / "wide")
    proc = tfx("sae", "eval", str(tmp_path / "wide"), "--run", str(run))
    assert_one_line_error(proc, f"d_in=48 but {HOOK} has width 32")


def test_resume(lab: tuple[Path, Path, dict], tmp_path: Path) -> None:
    import shutil

    run, sae_dir, summary = lab
    copy = Path(shutil.copytree(sae_dir, tmp_path / "sae"))
    proc = tfx("sae", "train", "--run", str(run), "--hook", HOOK, "--tokens", "9000", "--batch", "256",
               "--out", str(copy), "--resume", "--json")
    assert proc.returncode == 0, proc.stderr
    resumed = last_json_line(proc.stdout)
    assert resumed["step"] > summary["step"] and resumed["tokens"] >= 9000


def _open_run(run: Path) -> Any:
    from tui_lab.core.opening.model_in_hand import open_model

    return open_model(str(run))


def test_eval_and_features_print_what_their_verbs_return(lab: tuple[Path, Path, dict], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``sae eval`` and ``sae features`` (list, one feature, typed text) --json: the verb's ``to_json()``."""
    from tui_lab.core.verbs import sae_eval, sae_features

    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path))
    run, sae_dir, _ = lab
    model = _open_run(run)
    got = sae_eval.run(sae_eval.Request(str(sae_dir), tokens=2000), model).to_json()
    proc = tfx("sae", "eval", str(sae_dir), "--run", str(run), "--tokens", "2000", "--json")
    assert_same_json(got, proc.stdout.strip())
    for options, request in (([], {}), (["--sort", "max", "--top", "5"], {"sort": "max", "top": 5}),
                             (["--feature", "3", "--top", "3"], {"feature": 3, "top": 3}),
                             (["--input", "hello there"], {"input": "hello there"})):
        got = sae_features.run(sae_features.Request(str(sae_dir), **request), model).to_json()
        proc = tfx("sae", "features", str(sae_dir), "--run", str(run), *options, "--json")
        assert proc.returncode == 0, proc.stderr
        assert_same_json(got, proc.stdout.strip())


def test_train_prints_what_its_verb_returns(lab: tuple[Path, Path, dict], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Two trainings alike, one by the command and one by the verb: the same summary but for the
    folder and the seconds."""
    from tui_lab.core.verbs import sae_train

    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path / "cache"))
    run, _, _ = lab
    proc = tfx("sae", "train", "--run", str(run), "--hook", HOOK, "--d-sae", "32", "--k", "4", "--tokens", "3000",
               "--batch", "256", "--out", str(tmp_path / "by-cli"), "--json")
    assert proc.returncode == 0, proc.stderr
    cli = last_json_line(proc.stdout)
    request = sae_train.Request(str(tmp_path / "by-verb"), HOOK, d_sae=32, k=4, tokens=3000, batch=256,
                                model_name=str(run))
    got = json.loads(json.dumps(sae_train.run(request, _open_run(run)).to_json()))
    for summary in (cli, got):
        summary.pop("out"), summary.pop("seconds")
    assert got == cli
