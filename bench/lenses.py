"""The ``lens`` item: a tuned lens for the char-lm preset (goal: 60 s), and what the lenses show.

    .venv/bin/python -m bench.lenses [--run DIR] [--train-seconds S]

1. The shipped ``char-lm`` preset is trained as ``tfx-lab train --preset char-lm
   --max-seconds S`` does (S = 90 by default: a short run; its time is not counted),
   unless ``--run`` names a char-lm run.
2. ``tfx-lab lens --run R --input TEXT --lens tuned --out DIR --json`` with the command's
   defaults (200 steps of 32 windows of 64 characters), timed from the command's start
   to its end: opening the run, fitting, saving, the readout and the scores on fresh
   batches all count. Goal: at most 60 s.
3. The same for the Jacobian lens (32 prompts) and the logit lens, side by side: per
   layer, the KL(output || layer) and the top-1 agreement on fresh batches of the run's
   text (4 batches of 32 windows), the fitted lens beside the logit lens.
4. ``--reference``: the lab's Jacobian lens beside TransformerLens 4.3's
   ``JacobianLens.fit`` on the same weights and prompts (a GPT-2-shaped lab model, its
   weights handed to a ``TransformerBridge`` as bench/edges.py does, in the throwaway venv
   ``/tmp/ref-tl``; the bridge's ``to_tokens`` returns the prompts' ids as they are).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import Row, Section

GOAL_S = 60.0
INPUT = "def "  # a prompt of the run's own text (pydoc's help has Python code in it)


def _tfx(*args: str) -> tuple[dict[str, Any], float]:
    """``tfx-lab ARGS --json`` in this process: its JSON and its seconds."""
    from tui_lab.cli import main

    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([*args, "--json"])
    seconds = time.perf_counter() - started
    if rc != 0:
        raise RuntimeError(f"tfx-lab {' '.join(args)}: exit {rc}: {err.getvalue().strip()}")
    return json.loads(out.getvalue().strip().splitlines()[-1]), seconds


def lenses_bench(run: Path | None = None, train_seconds: float = 90.0) -> Section:
    section = Section("lenses", "Tuned and Jacobian lenses on a char-lm run")
    load = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench-lenses-"))
    train_s = None
    if run is None:
        run = tmp / "char-lm"
        _, train_s = _tfx("train", "--preset", "char-lm", "--max-seconds", str(train_seconds), "--out", str(run))
    tuned, tuned_s = _tfx("lens", "--run", str(run), "--input", INPUT, "--lens", "tuned", "--out", str(tmp / "tuned"))
    jac, jac_s = _tfx("lens", "--run", str(run), "--input", INPUT, "--lens", "jacobian", "--out", str(tmp / "jac"))
    _, logit_s = _tfx("lens", "--run", str(run), "--input", INPUT)
    reopened, reopen_s = _tfx("lens", "--run", str(run), "--input", INPUT, "--lens", "tuned",
                              "--lens-file", str(tmp / "tuned"))
    section.values = {"load_1min": load, "train_s": train_s, "tuned_s": tuned_s, "jacobian_s": jac_s,
                      "logit_s": logit_s, "reopen_s": reopen_s, "tuned": tuned, "jacobian": jac,
                      "reopened_output": reopened["output"]}
    section.rows += [
        Row("char-lm run trained (not counted)", f"{train_s:.0f} s" if train_s else "given", "", None, str(run)),
        Row("tuned lens: tfx-lab lens --lens tuned (200 steps), end to end", f"{tuned_s:.1f} s",
            f"<= {GOAL_S:.0f} s", tuned_s <= GOAL_S,
            f"loss {tuned['fit']['loss_first']:.3f} -> {tuned['fit']['loss_last']:.3f}; load {load:.1f}"),
        Row("Jacobian lens (32 prompts), end to end", f"{jac_s:.1f} s", "", None,
            f"{jac_s / tuned_s:.2f}x the tuned lens"),
        Row("logit lens alone / tuned lens reopened", f"{logit_s:.1f} s / {reopen_s:.1f} s", "", None,
            f"{tuned_s / reopen_s:.1f}x to fit than to reopen"),
    ]
    for mine, theirs in zip(tuned["held_out"], jac["held_out"], strict=True):
        section.rows.append(Row(
            f"{mine['layer']}: KL logit / tuned / Jacobian",
            f"{mine['logit_kl']:.3f} / {mine['kl']:.3f} / {theirs['kl']:.3f}", "", None,
            f"top-1 {mine['logit_agreement']:.0%} / {mine['agreement']:.0%} / {theirs['agreement']:.0%}"))
    return section


TL_JACOBIAN = r'''
import json, sys
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, models
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.tools.analysis.jacobian_lens import JacobianLens

args = json.loads(sys.argv[1])
torch.set_num_threads(1)
cfg = GPT2Config(n_layer=args["layers"], n_head=args["heads"], n_embd=args["d_model"], vocab_size=args["vocab"],
                 n_positions=args["positions"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
hf = GPT2LMHeadModel(cfg).eval()
missing, unexpected = hf.load_state_dict(load_file(args["weights"]), strict=False)
assert not unexpected and all(k.endswith("attn.bias") or k.endswith("masked_bias") or k == "lm_head.weight" for k in missing)
tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"t0": 0}, unk_token="t0")), unk_token="t0")
hf.save_pretrained(args["folder"]); tok.save_pretrained(args["folder"])
bridge = TransformerBridge.boot_transformers(args["folder"], hf_model=hf, tokenizer=tok, device="cpu")
bridge.eval()
table = {f"p{i}": torch.tensor([ids]) for i, ids in enumerate(args["prompts"])}
bridge.to_tokens = lambda prompt, *a, **k: table[prompt]  # the prompts' ids as they are
lens = JacobianLens.fit(bridge, list(table), corpus="bench", dim_batch=args["dim_batch"],
                        skip_first_positions=args["skip_first"], show_progress=False)
save_file({str(k): v.contiguous() for k, v in lens.jacobians.items()}, args["out"])
print(json.dumps({"n_prompts": lens.n_prompts, "layers": lens.source_layers}))
'''


def jacobian_reference(layers: int = 3, heads: int = 4, d_model: int = 64, n_prompts: int = 4,
                       length: int = 24, skip_first: int = 2) -> Section:
    """The lab's Jacobian lens beside TransformerLens 4.3's on the same GPT-2-shaped weights."""
    import subprocess

    import torch
    from safetensors.torch import load_file, save_file

    from bench.edges import TL_PYTHON, VOCAB, gpt2_shaped, hf_state
    from tui_lab.core.analysis.lenses.jacobian_lens import prompt_jacobians
    from tui_lab.core.analysis.lenses.lens_data import LensBatch

    section = Section("lenses-reference", "The Jacobian lens beside TransformerLens 4.3's")
    torch.set_num_threads(1)
    net = gpt2_shaped(layers, heads, d_model)
    g = torch.Generator().manual_seed(5)
    prompts = [torch.randint(0, VOCAB, (length,), generator=g).tolist() for _ in range(n_prompts)]
    started = time.perf_counter()
    mine = torch.stack([
        got for p in prompts
        if (got := prompt_jacobians(net, LensBatch(torch.tensor([p]), None, torch.ones(1, length, dtype=torch.bool)),
                                    skip_first, 16)) is not None
    ]).mean(0)  # (layers - 1, d, d)
    mine_s = time.perf_counter() - started
    if not TL_PYTHON.exists():
        section.error = f"TransformerLens venv missing ({TL_PYTHON})"
        return section
    with tempfile.TemporaryDirectory() as tmp:
        weights, out = os.path.join(tmp, "gpt2.safetensors"), os.path.join(tmp, "j.safetensors")
        save_file(hf_state(net), weights)
        spec = {"layers": layers, "heads": heads, "d_model": d_model, "vocab": VOCAB, "positions": 1024,
                "weights": weights, "folder": os.path.join(tmp, "hf"), "prompts": prompts, "dim_batch": 16,
                "skip_first": skip_first, "out": out}
        started = time.perf_counter()
        proc = subprocess.run([str(TL_PYTHON), "-c", TL_JACOBIAN, json.dumps(spec)], capture_output=True,
                              text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, check=False)
        tl_s = time.perf_counter() - started
        if proc.returncode != 0:
            section.error = "TransformerLens failed: " + " ".join(proc.stderr.strip().splitlines()[-1:])
            return section
        theirs = load_file(out)
    diffs = [float((mine[layer] - theirs[str(layer)].float()).abs().max()) for layer in range(layers - 1)]
    scale = float(mine.abs().max())
    section.values = {"max_abs_diff": diffs, "max_abs_entry": scale, "lab_s": mine_s, "tl_s_with_startup": tl_s}
    section.rows.append(Row(f"J_l, {layers - 1} layers x ({d_model}, {d_model}), {n_prompts} prompts of {length}: "
                            "max |lab - TransformerLens|", ", ".join(f"{d:.1e}" for d in diffs), "", None,
                            f"largest entry {scale:.2f}; lab {mine_s:.1f} s, TL {tl_s:.0f} s with its start-up"))
    return section


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, default=None, help="a char-lm run (default: train one)")
    p.add_argument("--train-seconds", type=float, default=90.0, help="seconds to train it (default 90)")
    p.add_argument("--reference", action="store_true", help="only the Jacobian lens beside TransformerLens 4.3's")
    args = p.parse_args()
    section = jacobian_reference() if args.reference else lenses_bench(args.run, args.train_seconds)
    if section.error:
        print(section.error)
    print(json.dumps({k: v for k, v in section.values.items() if k not in ("tuned", "jacobian")}, indent=2))
    for row in section.rows:
        print(f"{row.item:<62} {row.value:>24} {row.goal:>8} {'' if row.ok is None else ('ok' if row.ok else 'MISSED')}"
              f"  {row.note}")


if __name__ == "__main__":
    main()
