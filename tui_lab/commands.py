"""What each `tfx-lab` subcommand does. Parsing lives in cli.py."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from pathlib import Path
from typing import Any

from tui_lab.core.errors import LabError


def _emit_json(obj: object) -> None:
    print(json.dumps(obj))


def _console() -> Any:
    from rich.console import Console

    return Console()


def lab(args: argparse.Namespace) -> int:
    """Open the lab (the default command)."""
    from tui_lab.core.config.presets import load_preset

    if args.run:
        _require_run_folder(args.run)
    else:
        load_preset(args.preset)  # a bad preset fails here with one line, before the UI starts
    from .ui.app import run_lab

    run_lab(preset=args.preset, run_dir=args.run, runs_dir=args.runs_dir)
    return 0


def watch(args: argparse.Namespace) -> int:
    """Open the lab following a run folder another process writes."""
    _require_run_folder(args.run)
    from .ui.app import run_lab

    run_lab(run_dir=args.run, follow=True)
    return 0


def _require_run_folder(path: str) -> None:
    p = Path(path)
    if not p.is_dir():
        raise LabError(f"{p}: no such run folder")


def presets(args: argparse.Namespace) -> int:
    """List shipped and user presets."""
    from tui_lab.core.config.lab_config import ConfigError, load_file
    from tui_lab.core.config.presets import list_presets

    rows = []
    for info in list_presets():
        try:
            cfg = load_file(info.path)
            rows.append({
                "name": info.name,
                "path": str(info.path),
                "shipped": info.shipped,
                "description": info.description,
                "arch": cfg.model.arch,
                "task": cfg.task.name,
                "error": None,
            })
        except ConfigError as exc:
            rows.append({"name": info.name, "path": str(info.path), "shipped": info.shipped,
                         "description": "", "arch": None, "task": None, "error": str(exc)})
    if args.json:
        _emit_json(rows)
        return 0
    from rich.table import Table

    table = Table(title="Presets", title_justify="left")
    for col in ("name", "kind", "arch", "task", "description"):
        table.add_column(col)
    for r in rows:
        desc = r["description"] if not r["error"] else f"[red]{r['error']}[/]"
        table.add_row(r["name"], "shipped" if r["shipped"] else "user", r["arch"] or "-",
                      r["task"] or "-", desc)
    _console().print(table)
    return 0


def params(args: argparse.Namespace) -> int:
    """Parameter breakdown of a preset."""
    from tui_lab.core.config.presets import load_preset
    from tui_lab.core.model.params import parameter_report
    from tui_lab.core.tasks import make_task

    cfg = load_preset(args.preset)
    report = parameter_report(cfg.model, len(make_task(cfg.task).vocab))
    if args.json:
        _emit_json({
            "preset": cfg.name,
            "total": report.total,
            "rows": [{"name": r.name, "params": r.params, "group": r.group} for r in report.rows],
            "fp32_bytes": report.fp32_bytes,
            "bf16_bytes": report.bf16_bytes,
            "train_flops_per_token": report.train_flops_per_token,
            "infer_flops_per_token": report.infer_flops_per_token,
        })
        return 0
    from rich.table import Table

    table = Table(title=f"Parameters of {cfg.name}", title_justify="left")
    table.add_column("component")
    table.add_column("params", justify="right")
    table.add_column("%", justify="right")
    table.add_column("")
    total = max(1, report.total)
    for r in report.rows:
        share = r.params / total
        table.add_row(r.name, f"{r.params:,}", f"{share:.1%}", "█" * round(share * 30))
    table.add_section()
    table.add_row("total", f"{report.total:,}", "100%", "")
    console = _console()
    console.print(table)
    console.print(
        f"memory: {report.fp32_bytes / 2**20:.1f} MiB fp32, {report.bf16_bytes / 2**20:.1f} MiB bf16; "
        f"FLOPs/token: {report.train_flops_per_token:,.0f} train, {report.infer_flops_per_token:,.0f} inference"
    )
    return 0


def train(args: argparse.Namespace) -> int:
    """Train headless with a progress display; ctrl+c stops cleanly and saves."""
    from tui_lab.core.config.presets import load_preset
    from tui_lab.core.training.distributed import from_environment

    main_rank = from_environment().is_main  # under torchrun, rank 0 alone talks and writes
    overrides: dict[str, Any] = {}
    if args.steps is not None:
        overrides["train.steps"] = args.steps
    if args.max_seconds is not None:
        overrides["train.max_seconds"] = args.max_seconds
    if args.seed is not None:
        overrides["train.seed"] = args.seed
    if args.device is not None:
        overrides["train.device"] = args.device

    from tui_lab.core.training.train import TrainingRun, open_run

    from .progress import make_reporter

    reporter = make_reporter(json_mode=args.json or not main_rank)
    if args.resume:
        run = open_run(args.resume, overrides, on_event=reporter.on_event)
    else:
        cfg = load_preset(args.preset)
        if overrides:
            cfg = cfg.with_values(overrides)
        out = _new_run_folder(args.out, cfg.name) if main_rank else None
        try:
            run = TrainingRun(cfg, out, on_event=reporter.on_event)
        except BaseException:
            if out is not None and not args.out:  # the folder claimed for it is still empty
                with contextlib.suppress(OSError):
                    out.rmdir()
            raise
    reporter.start(run)

    interrupts = 0

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1:
            raise KeyboardInterrupt
        run.stop()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        summary = reporter.finish(run.run())
    finally:
        # After a ctrl+c the run is saved and the command ends: a second, impatient
        # one must not land as a traceback in the interpreter's shutdown.
        signal.signal(signal.SIGINT, signal.SIG_IGN if interrupts else previous)
    if args.json and main_rank:
        _emit_json(summary)
    return 0 if summary["reason"] in ("finished", "target", "stopped", "time") else 1


def _new_run_folder(out: str | None, name: str) -> Path:
    """``--out`` (refused if it already holds a run), else a fresh folder under the runs root."""
    from tui_lab.core.runs.folder import new_run_dir
    from tui_lab.core.runs.layout import STATE_FILE

    if not out:
        return new_run_dir(None, name)
    if (Path(out) / STATE_FILE).exists():
        raise LabError(f"{out}: already holds a run; use --resume {out} or another --out")
    return Path(out)


def _load_for_inference(run_dir: str, device: str = "cpu", at_step: int | None = None) -> Any:
    """A run's config, task and model for eval/decode (config and weights only)."""
    from tui_lab.core.decoding.inference import load_for_inference

    loaded = load_for_inference(run_dir, device, at_step)
    for note in loaded.notes:
        print(f"note: {note}", file=sys.stderr)
    return loaded


def evaluate(args: argparse.Namespace) -> int:
    """Exact match and validation loss of a run on held-out examples."""
    if args.n <= 0:
        raise LabError(f"--n: must be > 0, got {args.n}")
    from tui_lab.core.runs.log import read_metrics
    from tui_lab.core.training.evaluate import evaluate as evaluate_model
    from tui_lab.core.training.evaluate import held_out_pairs

    run = _load_for_inference(args.run, args.device, args.at_step)
    pairs = None if run.task.is_lm else held_out_pairs(run.task, run.config.train, args.n)
    ev = evaluate_model(run.model, run.task, run.config, run.device, step=run.step, pairs=pairs)
    seen = [m.get("overlap") for m in read_metrics(args.run) if m.get("kind") == "eval"]
    result = {
        "exact_match": ev.exact_match,
        "bits_per_char": ev.bits_per_char,
        "next_char_accuracy": ev.next_char_accuracy,
        "val_loss": ev.val_loss,
        "n": ev.n,
        "step": run.step,
        "preset": run.config.name,
        "task": run.config.task.name,
        # From the run's own last evaluation (its held-out set vs the examples it trained on).
        "held_out_seen_in_training": seen[-1] if seen else None,
    }
    if args.json:
        _emit_json(result)
    else:
        em = "n/a (language model)" if ev.exact_match is None else f"{ev.exact_match:.2%}"
        if ev.bits_per_char is not None and ev.next_char_accuracy is not None:
            em = f"n/a; {ev.bits_per_char:.3f} bits/char, next-char accuracy {ev.next_char_accuracy:.2%}"
        print(f"{args.run}: step {run.step}, exact match {em} on {ev.n} held-out, val loss {ev.val_loss:.4f}")
    return 0


def decode(args: argparse.Namespace) -> int:
    """Decode one input with a trained run."""
    from tui_lab.core.decoding.attention_text import render_text
    from tui_lab.core.decoding.decode import generate

    run = _load_for_inference(args.run, "cpu", args.at_step)
    result = generate(
        run.model, run.task, args.input,
        max_new_tokens=args.max_new, temperature=args.temperature, top_k=args.top_k,
        top_p=args.top_p, seed=args.seed, capture=args.attention or args.json or bool(args.explain),
    )
    from .inspect_cli import decode_extras

    if args.json:
        out = result.to_json()
        if args.attention:
            out["attention"] = {
                name: {"weights": w.tolist(), "queries": result.labels[name][0], "keys": result.labels[name][1]}
                for name, w in result.attention.items()
            }
        decode_extras(args, run, result, out)
        _emit_json(out)
        return 0
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    print(result.output)
    if args.attention:
        for name, w in result.attention.items():
            q, k = result.labels[name]
            for h in range(w.shape[0]):
                print(f"\n{name} head {h}")
                print(render_text(w[h], q, k))
    decode_extras(args, run, result, None)
    return 0
