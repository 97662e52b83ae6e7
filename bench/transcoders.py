"""Transcoder training beside the SAE trainer, on the char-lm preset's run, side by side.

    .venv/bin/python -m bench.transcoders [--run RUN] [--tokens N] [--rounds R] [--json]

1. A char-lm run: ``--run``, or the preset trained for ``--train-seconds`` (default 60;
   the speed of the trainers barely depends on how far it got).
2. The same layer L (the last), the same features (1,024 TopK, k = 16), tokens, batch
   and learning rate: the SAE trainer (``SAETrainer`` reconstructing the MLP's input,
   ``blocks.L.ln2.hook_normalized``) and the transcoder trainer (``TranscoderTrainer``
   predicting ``blocks.L.hook_mlp_out`` from it). Both collect their activations from
   the model as they go (the forward passes count). Timed in alternating rounds (A B,
   then B A, ...) in one process; the median of the rounds' ratios is the figure
   (``bench/common.py``: these shared machines drift by tens of percent a minute).
   Goal: transcoder / SAE <= 1.0 (as fast as the SAE trainer).
3. Every layer at once (one forward pass feeds them all), per layer, against one layer.

Prints a table; ``--json`` prints the numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

D_TC, K = 1024, 16
TOKENS, BATCH, LR = 300_000, 1024, 3e-3


def _char_lm(root: Path, seconds: int) -> Path:
    out = root / "char-lm"
    subprocess.run([sys.executable, "-m", "tui_lab.cli", "train", "--preset", "char-lm", "--max-seconds",
                    str(seconds), "--out", str(out)], check=True, capture_output=True)
    return out


def _windows(handle: Any, tokens: int) -> Any:
    from tui_lab.core.sae.recipe import text_windows

    ids = text_windows(handle, handle.task.train_text)
    return ids[: max(1, -(-tokens // ids.shape[1]))]


def _sae(handle: Any, layer: int, tokens: int) -> tuple[float, float]:
    """(seconds, last batch's explained variance) of the SAE trainer at the MLP's input."""
    from tui_lab.core.sae.activations import hook_activations
    from tui_lab.core.sae.recipe import new_sae, rows_per_pass, train_settings
    from tui_lab.core.sae.trainer import SAETrainer

    hook = f"blocks.{layer}.ln2.hook_normalized"
    windows = _windows(handle, tokens)
    evs: list[float] = []
    sae = new_sae(int(handle.config.model.d_model), D_TC, "topk", K, hook, "char-lm", windows.shape[1])
    trainer = SAETrainer(sae, train_settings(tokens, BATCH, LR),
                         on_event=lambda e: evs.append(getattr(e, "explained_variance", float("nan"))))
    t0 = time.perf_counter()
    trainer.train(hook_activations(handle, windows, hook, rows_per_pass(windows), epochs=None))
    return time.perf_counter() - t0, next((v for v in reversed(evs) if v == v), float("nan"))


def _transcoders(handle: Any, layers: list[int], tokens: int) -> tuple[float, float]:
    """(seconds, last batch's mean explained variance) of the transcoder trainer at ``layers``."""
    from tui_lab.core.sae.recipe import rows_per_pass, train_settings
    from tui_lab.core.sae.transcoder import Transcoder, TranscoderSet
    from tui_lab.core.sae.transcoder_data import pair_rows
    from tui_lab.core.sae.transcoder_trainer import TranscoderTrainer

    d_model = int(handle.config.model.d_model)
    n_layers = int(handle.config.model.n_decoder_layers)
    tset = TranscoderSet([Transcoder(d_model, D_TC, i, "topk", K, seed=i) for i in range(n_layers)])
    windows = _windows(handle, tokens)
    evs: list[float] = []
    trainer = TranscoderTrainer(tset, train_settings(tokens, BATCH, LR), layers=layers,
                                on_event=lambda e: evs.append(getattr(e, "explained_variance", float("nan"))))
    t0 = time.perf_counter()
    trainer.train(pair_rows(handle, tset, windows, rows_per_pass(windows), epochs=None, layers=layers))
    return time.perf_counter() - t0, next((v for v in reversed(evs) if v == v), float("nan"))


def measure(run: Path, tokens: int, rounds: int) -> dict[str, Any]:
    from tui_lab.core.model.device import set_threads
    from tui_lab.core.opening.model_in_hand import open_model

    handle = open_model(str(run))
    set_threads(0)  # as `tfx-lab sae train` and `transcoder train` set them
    last = int(handle.config.model.n_decoder_layers) - 1
    ratios, sae_s, tc_s, sae_ev, tc_ev = [], [], [], float("nan"), float("nan")
    for r in range(rounds):
        order = ("sae", "tc") if r % 2 == 0 else ("tc", "sae")
        took: dict[str, float] = {}
        for who in order:
            if who == "sae":
                took[who], sae_ev = _sae(handle, last, tokens)
            else:
                took[who], tc_ev = _transcoders(handle, [last], tokens)
        sae_s.append(took["sae"])
        tc_s.append(took["tc"])
        ratios.append(took["tc"] / took["sae"])
        print(f"round {r + 1}: SAE {took['sae']:.1f} s, transcoder {took['tc']:.1f} s", file=sys.stderr, flush=True)
    every = list(range(last + 1))
    all_s, all_ev = _transcoders(handle, every, tokens)
    return {"run": str(run), "layer": last, "tokens": tokens, "d_tc": D_TC, "k": K, "rounds": rounds,
            "sae_s": [round(s, 1) for s in sae_s], "transcoder_s": [round(s, 1) for s in tc_s],
            "ratio_median": round(statistics.median(ratios), 3),
            "sae_last_batch_ev": round(sae_ev, 3), "transcoder_last_batch_ev": round(tc_ev, 3),
            "all_layers_s": round(all_s, 1), "all_layers_per_layer_s": round(all_s / len(every), 1),
            "all_layers_ev": round(all_ev, 3), "n_layers": len(every),
            "per_layer_vs_one_layer": round(all_s / len(every) / statistics.median(tc_s), 3)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", help="a char-lm run (default: train the preset for --train-seconds)")
    p.add_argument("--train-seconds", type=int, default=60)
    p.add_argument("--tokens", type=int, default=TOKENS)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="tfx-bench-tc-") as tmp:
        run = Path(args.run) if args.run else _char_lm(Path(tmp), args.train_seconds)
        out = measure(run, args.tokens, args.rounds)
    if args.json:
        print(json.dumps(out))
        return 0
    ok = "yes" if out["ratio_median"] <= 1.0 else "NO"
    print(f"char-lm layer {out['layer']}, {out['tokens']:,} tokens, TopK {D_TC} k={K}, {out['rounds']} rounds")
    print(f"  SAE trainer (reconstructs the MLP input)   {out['sae_s']} s   last-batch EV {out['sae_last_batch_ev']}")
    print(f"  transcoder trainer (MLP input -> output)   {out['transcoder_s']} s   "
          f"last-batch EV {out['transcoder_last_batch_ev']}")
    print(f"  transcoder / SAE, median of rounds: {out['ratio_median']}  (goal <= 1.0: {ok})")
    print(f"  all {out['n_layers']} layers at once: {out['all_layers_s']} s = {out['all_layers_per_layer_s']} s "
          f"a layer ({out['per_layer_vs_one_layer']} x one layer alone), EV {out['all_layers_ev']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
