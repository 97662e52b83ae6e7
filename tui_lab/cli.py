"""The `tfx-lab` command: argument parsing, and the one place core and UI meet.

Heavy imports (torch, textual) happen inside the command that needs them, so
`tfx-lab presets` stays instant and the lab paints before torch loads.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__, inspect_cli


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tfx-lab",
        description="Build, train and look inside small Transformer models from a terminal.",
    )
    p.add_argument("--version", action="version", version=f"tfx-lab {__version__}")
    p.add_argument("--preset", help="preset name or YAML path for the lab (default: copy)")
    p.add_argument("--run", help="open the lab on an existing run folder")
    p.add_argument("--runs-dir", help="where the lab writes runs (default: ./runs)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("presets", help="list presets")
    s.add_argument("--json", action="store_true", help="print JSON")

    s = sub.add_parser("params", help="parameter breakdown of a preset")
    s.add_argument("--preset", default=None, help="preset name or YAML path (default: copy)")
    s.add_argument("--json", action="store_true", help="print JSON")

    s = sub.add_parser("train", help="train a preset headless; writes a run folder")
    s.add_argument("--preset", default=None, help="preset name or YAML path (default: copy)")
    s.add_argument("--steps", type=int, help="override train.steps")
    s.add_argument("--max-seconds", type=float, help="stop after this many seconds")
    s.add_argument("--out", help="run folder (default: <runs>/<preset>-<time>, <runs> = $TFX_LAB_RUNS or ./runs)")
    s.add_argument("--device", help="auto, cpu, cuda or mps")
    s.add_argument("--seed", type=int, help="override train.seed")
    s.add_argument("--resume", metavar="DIR", help="continue the run in DIR")
    s.add_argument("--json", action="store_true", help="print a JSON summary line at the end")

    s = sub.add_parser("eval", help="exact-match accuracy of a run on held-out examples")
    s.add_argument("--run", required=True, help="run folder")
    s.add_argument("--n", type=int, default=500, help="held-out examples (default 500)")
    s.add_argument("--device", default="cpu", help="device (default cpu)")
    s.add_argument("--at-step", type=int, metavar="N", help="use the history snapshot of step N")
    s.add_argument("--json", action="store_true", help="print JSON")

    s = sub.add_parser("decode", help="greedy decoding of typed input with a trained run")
    s.add_argument("--run", required=True, help="run folder")
    s.add_argument("--input", required=True, help="input text, e.g. 31415")
    s.add_argument("--at-step", type=int, metavar="N", help="use the history snapshot of step N")
    s.add_argument("--attention", action="store_true", help="print attention heatmaps")
    s.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    s.add_argument("--top-k", type=int, default=0, help="sample from the k best (0 = all)")
    s.add_argument("--max-new", type=int, help="most tokens to generate")
    s.add_argument("--json", action="store_true", help="print JSON")
    inspect_cli.add_decode_options(s)

    s = sub.add_parser("heads", help="the head atlas: what each attention head does, scored")
    s.add_argument("--run", required=True, help="run folder")
    s.add_argument("--at-step", type=int, metavar="N", help="use the history snapshot of step N")
    s.add_argument("--json", action="store_true", help="print JSON")

    s = sub.add_parser("watch", help="open the lab following a run another process writes")
    s.add_argument("run", help="run folder")

    _experiment_parsers(sub)
    inspect_cli.add_parsers(sub)
    _tool_parsers(sub)
    return p


def _tool_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``serve`` and ``export``: the lab and its runs for other tools (serve_cli, export_cli)."""
    s = sub.add_parser("serve", help="serve the lab as a web page (anyone who reaches it can train here)")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    what = s.add_mutually_exclusive_group()
    what.add_argument("--preset", default=None, help="preset name or YAML path (default: copy)")
    what.add_argument("--run", default=None, help="open the lab on an existing run folder")

    s = sub.add_parser("export", help="write runs in formats other tools read")
    s.add_argument("runs", nargs="+", metavar="RUN", help="run folders (a sweep folder: its runs)")
    s.add_argument("--tensorboard", action="store_true", required=True,
                   help="TensorBoard event files (needs: pip install 'tfx-lab[tensorboard]')")
    s.add_argument("--out", help="one folder for all runs, a sub-folder per run (default: ./tensorboard)")


def _experiment_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``runs``, ``compare`` and ``sweep`` (handlers in experiments_cli.py and sweep_cli.py)."""
    s = sub.add_parser("runs", help="every run under DIR with its summary")
    s.add_argument("dir", nargs="?", help="folder of runs (default: $TFX_LAB_RUNS or ./runs)")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON (a list of summaries)")
    fmt.add_argument("--csv", action="store_true", help="print CSV")

    s = sub.add_parser("compare", help="runs side by side")
    s.add_argument("runs", nargs="+", metavar="RUN", help="run folders (a sweep folder: its runs)")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON (a list of summaries)")
    fmt.add_argument("--csv", action="store_true", help="print CSV")
    s.add_argument("--plot", action="store_true", help="overlay train/val loss in the terminal")

    s = sub.add_parser("sweep", help="a grid of runs over seeds; writes sweep.json")
    s.add_argument("spec", nargs="?", help="sweep YAML, or a shipped sweep's name: ln-warmup, positions, char-lm-tune")
    s.add_argument("--preset", help="preset name or YAML path to vary")
    s.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2",
                   help="a setting and its values (repeat for a grid)")
    s.add_argument("--seeds", type=int, help="seeds per arm (default 1)")
    s.add_argument("--parallel", type=int, help="runs at once (default: one per core)")
    s.add_argument("--steps", type=int, help="override train.steps")
    s.add_argument("--max-seconds", type=float, help="override train.max_seconds")
    s.add_argument("--out", help="sweep folder (default for a SPEC: <runs>/<spec name>)")
    s.add_argument("--json", action="store_true", help="no progress; print sweep.json's content")


def _serve(args: argparse.Namespace) -> int | None:
    from . import serve_cli

    return serve_cli.serve(args)


def _export(args: argparse.Namespace) -> int | None:
    from . import export_cli

    return export_cli.export(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from tui_lab.core.errors import LabError

    try:
        from . import commands, experiments_cli, heads_cli, sweep_cli

        handler = {
            None: commands.lab,
            "presets": commands.presets,
            "params": commands.params,
            "train": commands.train,
            "eval": commands.evaluate,
            "decode": commands.decode,
            "watch": commands.watch,
            "heads": heads_cli.heads,
            "runs": experiments_cli.runs,
            "compare": experiments_cli.compare,
            "sweep": sweep_cli.sweep,
            "ablate": inspect_cli.ablate,
            "serve": _serve,
            "export": _export,
        }[args.command]
        return handler(args) or 0
    except LabError as exc:
        print(f"tfx-lab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tfx-lab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
