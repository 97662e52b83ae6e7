"""``python -m bench [--quick] [--json] [--only NAME,...]``: the lab against its references.

Items (names for ``--only``):

- ``train_speed_vs_torch``   encoder-decoder training tokens/s vs nn.Transformer
- ``decoder_speed_vs_torch`` decoder-only training tokens/s vs nn.TransformerEncoder (causal)
- ``kv_cache_speedup``       greedy decoding of 256 tokens, KV cache vs none
- ``capture_overhead``       decoding with attention captured vs not
- ``time_to_target``         copy/reverse/sort/addition to target accuracy, lab and nn.Transformer
- ``lab``                    first paint, key latency, in-lab training speed (real pty)
- ``cuda``                   bf16 + fused attention (+ compile) vs fp32, CUDA only
- ``sweep_parallel_speedup`` 4 copy runs as ``tfx-lab sweep --parallel 2`` vs one after another
- ``history_overhead``       copy training with history snapshots on vs off
- ``runs_pane_200``          the Runs pane over 200 generated run folders: open and sort
- ``time_travel_step``       a history snapshot step in the Attention pane, key to repaint
- ``fast_paths``             a batch vs its training step; the parameter report, new and cached
- ``real_models``            a GPT-2-small-shaped model from files: decode vs transformers, memory, first frame
- ``families``               a Qwen2.5-0.5B-shaped model (bf16 file): memory in each precision, ready, decode vs transformers
- ``hook_points``            a forward pass with hook points (none active) vs before them; run_with_cache vs forward
- ``sae``                    a TopK SAE on char-lm's last residual stream: time, explained variance, dead; top contexts
- ``patching``               resid_pre patching 12 x 16 (GPT-2-small shape): batched vs one forward per cell; attribution vs a forward
- ``sae_batchtopk``          TopK, BatchTopK and Matryoshka on char-lm: time, and EV at BatchTopK's held-out L0
- ``lenses``                 tuned and Jacobian lenses fitted on a char-lm run: time, KL and top-1 by layer
- ``probes``                 probes and DAS over an addition run's history: when carry becomes readable and causal
- ``crosscoder``             a crosscoder over two snapshots of an induction run: time, features new / gone / shared

``python -m bench.<name>`` runs the scripts that drive a reference library from a venv of
their own (``edges``, ``circuits``, ``transcoders``) and ``speedrun``; each says how.

Progress goes to stderr; stdout gets the table, or one JSON object with
``--json``. A run of every item rewrites ``bench/RESULTS.md`` (``--no-write``
keeps it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

# A CPU torch without numpy, and nn.Transformer's nested-tensor note, warn on import/build.
warnings.filterwarnings("ignore", message=".*NumPy.*")
warnings.filterwarnings("ignore", message=".*enable_nested_tensor.*")

from rich.console import Console  # noqa: E402

from bench.common import Section, machine  # noqa: E402
from bench.report import render_markdown, render_table  # noqa: E402

ITEMS = [
    "train_speed_vs_torch",
    "decoder_speed_vs_torch",
    "kv_cache_speedup",
    "capture_overhead",
    "time_to_target",
    "lab",
    "cuda",
    "sweep_parallel_speedup",
    "history_overhead",
    "runs_pane_200",
    "time_travel_step",
    "fast_paths",
    "real_models",
    "hook_points",
    "families",
    "patching",
    "sae",
    "sae_batchtopk",
    "lenses",
    "probes",
    "crosscoder",
]
# Run order: the long, deadline-trimmed item last.
RUN_ORDER = ["train_speed_vs_torch", "decoder_speed_vs_torch", "kv_cache_speedup", "capture_overhead",
             "fast_paths", "real_models", "hook_points", "families", "patching", "sae", "lab", "runs_pane_200", "time_travel_step", "cuda", "sweep_parallel_speedup", "history_overhead", "time_to_target",
             "sae_batchtopk", "lenses", "probes", "crosscoder"]
QUICK_BUDGET_S = 570.0  # --quick must finish within 10 minutes; leave a margin
RESULTS = Path(__file__).with_name("RESULTS.md")


def run_item(name: str, quick: bool, deadline: float | None, threads: int | None, cuda_on_cpu: bool) -> Section:
    if name == "train_speed_vs_torch":
        from bench.throughput import train_speed_vs_torch
        return train_speed_vs_torch(quick)
    if name == "decoder_speed_vs_torch":
        from bench.throughput import decoder_speed_vs_torch
        return decoder_speed_vs_torch(quick)
    if name == "kv_cache_speedup":
        from bench.decoding import kv_cache_speedup
        return kv_cache_speedup(quick)
    if name == "capture_overhead":
        from bench.decoding import capture_overhead
        return capture_overhead(quick)
    if name == "time_to_target":
        from bench.time_to_target import time_to_target
        return time_to_target(quick, deadline, threads)
    if name == "lab":
        from bench.lab import lab_bench
        return lab_bench(quick)
    if name == "cuda":
        from bench.cuda import cuda_bench
        return cuda_bench(quick, "cpu" if cuda_on_cpu else "cuda")
    if name == "sweep_parallel_speedup":
        from bench.sweep_speedup import sweep_parallel_speedup
        return sweep_parallel_speedup(quick)
    if name == "time_travel_step":
        from bench.time_travel import time_travel_step
        return time_travel_step(quick)
    if name == "runs_pane_200":
        from bench.runs_pane import runs_pane_200
        return runs_pane_200(quick)
    if name == "history_overhead":
        from bench.history_overhead import history_overhead
        return history_overhead(quick)
    if name == "fast_paths":
        from bench.fast_paths import fast_paths
        return fast_paths(quick)
    if name == "real_models":
        from bench.real_models import real_models
        return real_models(quick)
    if name == "families":
        from bench.families import families
        return families(quick)
    if name == "hook_points":
        from bench.hook_points import hook_points
        return hook_points(quick)
    if name == "sae":
        from bench.sae import sae_bench
        return sae_bench(quick)
    if name == "patching":
        from bench.patching import patching
        return patching(quick)
    return run_interp_item(name, quick)


def run_interp_item(name: str, quick: bool) -> Section:
    """The interpretability items: each trains the run it measures (shorter with --quick)."""
    if name == "sae_batchtopk":
        from bench.sae import batchtopk_bench
        return batchtopk_bench(quick)
    if name == "lenses":
        from bench.lenses import lenses_bench
        return lenses_bench(train_seconds=45.0 if quick else 90.0)
    if name == "probes":
        from bench.probes import probes_bench
        return probes_bench(train_seconds=120.0 if quick else 300.0)
    if name == "crosscoder":
        from bench.crosscoder import crosscoder_bench
        return crosscoder_bench()
    raise ValueError(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description="tfx-lab benchmarks, side by side")
    parser.add_argument("--quick", action="store_true", help="short windows and caps: under 10 minutes on 2 cores")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--only", default="", help="comma-separated items: " + ", ".join(ITEMS))
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads for the in-process items and the time-to-target runs (default: "
                             "the lab's own rule for models of these sizes, which is 1 thread below 2 M parameters)")
    parser.add_argument("--no-write", action="store_true", help="do not rewrite bench/RESULTS.md")
    parser.add_argument("--cuda-section-on-cpu", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in ITEMS]
    if unknown:
        parser.error(f"unknown item(s) {', '.join(unknown)}; choose from {', '.join(ITEMS)}")
    chosen = [n for n in RUN_ORDER if not only or n in only]

    import torch

    from tui_lab.core.model.device import default_threads, set_threads
    from tui_lab.core.training.heap import keep_freed_memory

    keep_freed_memory()  # as in every training process the lab starts (both sides share it)

    err = Console(stderr=True)
    start = time.perf_counter()
    deadline = start + QUICK_BUDGET_S if args.quick else None
    info = machine()
    override: int | None = args.threads or None
    if args.threads:
        threads = set_threads(args.threads)
        info["threads_choice"] = f"{threads} (--threads)"
    else:
        # The lab's own rule (device.set_threads): one thread below 2 M parameters.
        threads = set_threads(0, n_params=_largest_bench_model())
        info["threads_choice"] = f"{threads} (the lab's choice for models of these sizes)"
    if default_threads() > 1 and not args.only:
        # Evidence for (or against) that rule on this machine, right now.
        from bench.thread_probe import thread_probe

        info["thread_probe"] = probe = thread_probe(default_threads())
        err.print(f"[dim]thread probe: {probe['threads']} threads run a copy training step at "
                  f"{probe['speedup_vs_1_thread']:.2f}x the speed of 1 thread[/dim]")
        torch.set_num_threads(threads)
    info["threads"] = threads
    sections: dict[str, Section] = {}
    for i, name in enumerate(chosen, 1):
        err.print(f"[dim]bench {i}/{len(chosen)}: {name} ({time.perf_counter() - start:.0f} s so far)[/dim]")
        t0 = time.perf_counter()
        try:
            torch.set_num_threads(threads)  # items that train through TrainingRun may change it
            sec = run_item(name, args.quick, deadline, override, args.cuda_section_on_cpu)
        except Exception as exc:  # noqa: BLE001 - one failing item must not hide the others
            sec = Section(name, name, error=f"{type(exc).__name__}: {exc}")
            err.print(f"[red]{name} failed:[/red] {sec.error}")
            err.print(traceback.format_exc(), markup=False, highlight=False)
        sec.seconds = round(time.perf_counter() - t0, 1)
        sections[name] = sec
    info["load_average_after"] = machine()["load_average_1_5_15"]
    total = round(time.perf_counter() - start, 1)

    ordered = [sections[n] for n in ITEMS if n in sections]
    result: dict[str, Any] = {}
    for sec in ordered:
        result.update(sec.values)
    result["errors"] = {s.name: s.error for s in ordered if s.error}
    result["section_seconds"] = {s.name: s.seconds for s in ordered}
    result["total_seconds"] = total
    result["quick"] = args.quick
    result["machine"] = info
    result["date"] = datetime.datetime.now().isoformat(timespec="seconds")

    command = " ".join(["python -m bench", *(argv if argv is not None else sys.argv[1:])])
    if args.json:
        print(json.dumps(result, default=_jsonable))
    else:
        out = Console()
        if not out.is_terminal:
            out = Console(width=160)
        out.print(render_table(ordered, info, total, command))
    if not only and not args.no_write:
        RESULTS.write_text(render_markdown(ordered, info, total, command, result, RESULTS))
        err.print(f"[dim]wrote {RESULTS}[/dim]")
    return 1 if result["errors"] else 0


def _largest_bench_model() -> int:
    """Parameters of the largest model the in-process items train (char-lm), counted on meta."""
    import torch

    from tui_lab.core.config.presets import load_preset
    from tui_lab.core.model.models import build_model

    with torch.device("meta"):
        model = build_model(load_preset("char-lm").model, vocab_size=128)
    return sum(p.numel() for p in model.parameters())


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, float):
        return round(obj, 6)
    return str(obj)


if __name__ == "__main__":
    sys.exit(main())
