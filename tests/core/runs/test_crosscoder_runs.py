"""A crosscoder's folder is its own row of the runs table (kind "crosscoder") and exports to TensorBoard.

The folders are written by the lab's own crosscoder training (``core/verbs/crosscoder_train.py``)
on two and three snapshots of the shipped induction-with-MLPs run's history. Every figure the
row and the export carry is checked against the folder's own files, read here independently:
``metrics.jsonl`` line by line, ``cfg.json``, and the weights through safetensors' torch loader.
The new/gone/shared counts are checked on decoders set by hand to known relative norms.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tui_lab.core.runs.run_files import RunError
from tui_lab.core.runs.summary import CSV_COLUMNS, csv_row, summarize_run, summarize_runs
from tui_lab.core.verbs.crosscoder_train import Request, run

HISTORY_RUN = Path(__file__).resolve().parents[2] / "data" / "induction-mlp-run"  # snapshots 100, 400, 1200
WEIGHTS = "crosscoder_weights.safetensors"
D_SAE = 32


def _train(out: Path, steps: tuple[int, ...]) -> dict[str, object]:
    request = Request(out=str(out), run=str(HISTORY_RUN), steps=steps, d_sae=D_SAE, train_steps=40, batch=64,
                      tokens=600)
    return run(request).to_json()


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    out = tmp_path_factory.mktemp("xc-runs") / "crosscoders" / "xc-a"
    return out, _train(out, (100, 1200))


def _records(folder: Path, kind: str) -> list[dict]:
    return [r for r in map(json.loads, (folder / "metrics.jsonl").read_text().splitlines()) if r["kind"] == kind]


def _counts_by_hand(folder: Path) -> tuple[int, int, int]:
    """(new, gone, shared) written out again from the weights: r = |d_last| / (|d_first| + |d_last|),
    new r >= 0.9, gone r <= 0.1, shared |r - 0.5| <= 0.2, features that never fired left out."""
    tensors = load_file(str(folder / WEIGHTS))
    norms = tensors["W_dec"].double().norm(dim=-1)  # (F, n)
    a, b = norms[:, 0], norms[:, -1]
    new = gone = shared = 0
    for f in range(norms.shape[0]):
        if int(tensors["fired"][f]) == 0:
            continue
        r = 0.5 if a[f] + b[f] == 0 else float(b[f] / (a[f] + b[f]))
        new += r >= 0.9
        gone += r <= 0.1
        shared += 0.1 < r < 0.9 and abs(r - 0.5) <= 0.2
    return new, gone, shared


def test_a_crosscoder_is_its_own_row_with_its_figures(trained: tuple[Path, dict[str, object]]) -> None:
    folder, result = trained
    row = summarize_run(folder)
    last, end = _records(folder, "step")[-1], _records(folder, "end")[-1]
    cfg = json.loads((folder / "cfg.json").read_text())
    assert (row.kind, row.task, row.preset, row.status) == ("crosscoder", "crosscoder", "crosscoder", "finished")
    assert row.detail == f"{end['reason']} at step {end['step']}" == "done at step 40"
    assert (row.step, row.total_steps) == (40, 40)
    assert row.diff == {"run": str(HISTORY_RUN), "steps": "100,1200", "hook": cfg["metadata"]["hook_name"],
                        "d_sae": D_SAE}
    assert row.explained_variance == last["explained_variance"] and row.l0 == last["l0"]
    assert row.dead_fraction == last["dead_fraction"] and row.ce_loss_recovered is None
    assert row.tokens_per_s == pytest.approx(last["tokens"] / last["elapsed"])
    tensors = load_file(str(folder / WEIGHTS))
    assert row.params == sum(tensors[k].numel() for k in ("W_enc", "b_enc", "W_dec", "b_dec"))
    counts = result["counts"]
    assert isinstance(counts, dict)
    assert (row.features_new, row.features_gone, row.features_shared) == _counts_by_hand(folder) == (
        counts["b_only"], counts["a_only"], counts["shared"])
    assert f"EV {last['explained_variance']:.3f}" in row.sae_text and f"shared {row.features_shared}" in row.sae_text
    csv = csv_row(row)
    assert csv["kind"] == "crosscoder" and csv["features_shared"] == row.features_shared
    assert "features_new" in CSV_COLUMNS


def test_counts_follow_decoders_set_to_known_relative_norms(trained: tuple[Path, dict[str, object]],
                                                            tmp_path: Path) -> None:
    folder = shutil.copytree(trained[0], tmp_path / "planted")
    tensors = load_file(str(folder / WEIGHTS))
    dec = tensors["W_dec"]
    unit = dec / dec.norm(dim=-1, keepdim=True)
    # (|d_A|, |d_B|) per feature: 5 new (r 0.95), 3 gone (r 0.05), 2 in between (r 0.8), the rest shared (r 0.5)
    plan = [(0.05, 0.95)] * 5 + [(0.95, 0.05)] * 3 + [(0.2, 0.8)] * 2 + [(0.5, 0.5)] * (D_SAE - 10)
    scales = torch.tensor(plan, dtype=dec.dtype)[:, :, None]
    tensors["W_dec"] = (unit * scales).contiguous()
    tensors["fired"] = torch.ones(D_SAE, dtype=torch.long)
    tensors["fired"][[0, 5, 12]] = 0  # a new, a gone and a shared feature that never fired: dead, in none
    save_file(tensors, str(folder / WEIGHTS))
    row = summarize_run(folder)
    assert (row.features_new, row.features_gone, row.features_shared) == (4, 2, D_SAE - 10 - 1)
    assert (row.features_new, row.features_gone, row.features_shared) == _counts_by_hand(folder)


def test_three_snapshots_name_every_step_and_count_first_against_last(tmp_path: Path) -> None:
    folder = tmp_path / "xc-3"
    result = _train(folder, (100, 400, 1200))
    row = summarize_run(folder)
    assert row.kind == "crosscoder" and row.diff["steps"] == "100,400,1200"
    counts = result["counts"]
    assert isinstance(counts, dict)
    assert (row.features_new, row.features_gone, row.features_shared) == (
        counts["b_only"], counts["a_only"], counts["shared"]) == _counts_by_hand(folder)


def test_a_crosscoder_of_two_models_names_both(tmp_path: Path) -> None:
    """Sources given as models (a model and its fine-tune, here two shipped runs' final weights)."""
    models = (str(HISTORY_RUN.parent / "induction-run"), str(HISTORY_RUN))
    folder = tmp_path / "xc-models"
    run(Request(out=str(folder), models=models, d_sae=16, train_steps=20, batch=32, tokens=300))
    row = summarize_run(folder)
    assert row.kind == "crosscoder" and row.status == "finished" and row.step == 20
    assert row.diff["sources"] == f"{models[0]} vs {models[1]}" and row.diff["d_sae"] == 16
    assert "run" not in row.diff and "steps" not in row.diff


def test_listed_beside_model_runs_and_saes(trained: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    root = tmp_path / "runs"
    shutil.copytree(HISTORY_RUN, root / "induction", ignore=shutil.ignore_patterns("history"))
    shutil.copytree(trained[0], root / "crosscoders" / "xc-a")  # where the Features pane trains them
    rows = {r.name: r for r in summarize_runs(root)}
    assert {name: r.kind for name, r in rows.items()} == {"induction": "run", "crosscoders/xc-a": "crosscoder"}


def _damage_cfg(key: str, value: object):  # type: ignore[no-untyped-def]
    def damage(folder: Path) -> None:
        cfg = json.loads((folder / "cfg.json").read_text())
        if key.startswith("metadata."):
            cfg["metadata"][key.removeprefix("metadata.")] = value
        else:
            cfg[key] = value
        (folder / "cfg.json").write_text(json.dumps(cfg))
    return damage


def _truncate(folder: Path) -> None:
    data = (folder / WEIGHTS).read_bytes()
    (folder / WEIGHTS).write_bytes(data[: len(data) // 2])


def _nan(folder: Path) -> None:
    tensors = load_file(str(folder / WEIGHTS))
    tensors["W_dec"][3, 0, 0] = float("nan")
    save_file(tensors, str(folder / WEIGHTS))


DAMAGE = {
    "cfg not json": (lambda f: (f / "cfg.json").write_text("{not json"), "cfg.json: cannot read it"),
    "no cfg": (lambda f: (f / "cfg.json").unlink(), "no cfg.json"),
    "no weights": (lambda f: (f / WEIGHTS).unlink(), f"no {WEIGHTS}"),
    "truncated weights": (_truncate, "truncated"),
    "not safetensors": (lambda f: (f / WEIGHTS).write_bytes(b"PK\x03\x04 a zip"), "not a safetensors file"),
    "weights of another size": (_damage_cfg("d_sae", 64), "W_dec has shape (32, 2, 64), cfg.json says (64, 2, 64)"),
    "one source": (_damage_cfg("metadata.sources", [{"source": "a", "at_step": 1}]), "two or more sources"),
    "sources miscounted": (_damage_cfg("n_sources", 3), "n_sources is 3 but metadata lists 2"),
    "no hook": (_damage_cfg("metadata.hook_name", None), "metadata.hook_name missing"),
    "NaN decoder": (_nan, "W_dec holds NaN"),
    "no metrics": (lambda f: (f / "metrics.jsonl").unlink(), "no metrics.jsonl"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_crosscoder_is_a_row_saying_why_in_one_line(trained: tuple[Path, dict[str, object]],
                                                              tmp_path: Path, case: str) -> None:
    damage, fragment = DAMAGE[case]
    root = tmp_path / "runs"
    folder = shutil.copytree(trained[0], root / "xc")
    shutil.copytree(trained[0], root / "xc-ok")
    damage(folder)
    rows = {r.name: r for r in summarize_runs(root)}  # never raises: one row each
    row = rows["xc"]
    assert row.status == "damaged" and fragment in row.detail and "\n" not in row.detail
    assert rows["xc-ok"].status == "finished"


def test_no_end_record_reads_running_then_stopped(trained: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    import os

    folder = shutil.copytree(trained[0], tmp_path / "xc")
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    (folder / "metrics.jsonl").write_text("\n".join(ln for ln in lines if json.loads(ln)["kind"] != "end") + "\n")
    assert summarize_run(folder).status == "running"
    old = time.time() - 3600
    for name in ("metrics.jsonl", "cfg.json"):
        os.utime(folder / name, (old, old))
    row = summarize_run(folder)
    assert row.status == "stopped" and "killed?" in row.detail


def _events(folder: Path):  # type: ignore[no-untyped-def]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return events


def test_tensorboard_export_of_a_crosscoder(trained: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tui_lab.core.runs.tensorboard_export import export_run

    folder = trained[0]
    result = export_run(folder, tmp_path / "tb")
    events = _events(result.folder)
    steps = _records(folder, "step")
    names = ("loss", "mse", "l0", "explained_variance", "fvu", "dead_fraction", "sparsity_loss", "lr")
    assert set(events.Tags()["scalars"]) == {f"crosscoder/{n}" for n in (*names, "tokens_per_s")}
    for name in names:
        points = events.Scalars(f"crosscoder/{name}")
        assert [p.step for p in points] == [r["step"] for r in steps]
        assert [p.value for p in points] == pytest.approx([r[name] for r in steps], rel=1e-6, abs=1e-9)
    speed = events.Scalars("crosscoder/tokens_per_s")
    assert [p.value for p in speed] == pytest.approx([r["tokens"] / r["elapsed"] for r in steps], rel=1e-6)
    assert (result.steps, result.points) == (len(steps), len(steps) * (len(names) + 1))
    text = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    cfg = json.loads((folder / "cfg.json").read_text())
    assert text.startswith("a crosscoder over 2 sources") and cfg["metadata"]["hook_name"] in text
    assert '"at_step": 1200' in text


def test_exporting_a_damaged_crosscoder_is_one_line(trained: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tui_lab.core.runs.tensorboard_export import export_run

    folder = shutil.copytree(trained[0], tmp_path / "xc")
    (folder / "cfg.json").write_text(json.dumps({"architecture": "topk", "d_sae": 3}))
    with pytest.raises(RunError, match="not a crosscoder's") as err:
        export_run(folder, tmp_path / "tb")
    assert "\n" not in str(err.value)
    (folder / "cfg.json").unlink()
    (folder / "metrics.jsonl").unlink()
    with pytest.raises(RunError, match="no cfg.json"):
        export_run(folder, tmp_path / "tb")


def test_the_runs_and_export_commands_take_it(trained: tuple[Path, dict[str, object]], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``tfx-lab runs`` (JSON, CSV, table) and ``tfx-lab export --tensorboard`` over a folder holding a
    crosscoder and a damaged one: a row each, an export each (the damaged one a line, rc 2)."""
    import csv
    import io

    from tests.cli.helpers import tfx

    root = tmp_path / "runs"
    shutil.copytree(trained[0], root / "xc")
    bad = shutil.copytree(trained[0], root / "xc-bad")
    (bad / "cfg.json").write_text("{not json")
    listed = {r["name"]: r for r in json.loads(tfx("runs", str(root), "--json").stdout)}
    assert listed["xc"]["kind"] == "crosscoder" and listed["xc"]["diff"]["steps"] == "100,1200"
    assert listed["xc-bad"]["status"] == "damaged" and "cfg.json: cannot read it" in listed["xc-bad"]["detail"]
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO(tfx("runs", str(root), "--csv").stdout))}
    assert rows["xc"]["features_shared"] == str(summarize_run(root / "xc").features_shared)
    monkeypatch.setenv("COLUMNS", "300")  # the table's cells unwrapped
    table = tfx("runs", str(root)).stdout
    assert "crosscoder" in table and "shared" in table
    if importlib.util.find_spec("tensorboard") is None:
        return
    proc = tfx("export", "--tensorboard", str(root), "--out", str(tmp_path / "tb"))
    assert proc.returncode == 2 and "xc: 36 points (4 steps, 0 evaluations)" in proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1 and "cfg.json: cannot read it" in proc.stderr
