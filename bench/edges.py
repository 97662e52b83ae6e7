"""Edge attribution on a GPT-2-small-shaped model: EAP and EAP-IG beside one forward pass, and
beside TransformerLens 4.3's ``attribution_patch(granularity="edge")`` on the same weights.

``python -m bench.edges [--layers 12] [--heads 12] [--d-model 768] [--tokens 16] [--repeats 5]``

The lab's own decoder-only model (GPT-2's options: learned positions, pre-LN, GELU (tanh),
tied embeddings, vocabulary 50,257) with its random initialisation; a 16-token pair whose
corruption changes four tokens. One torch thread; the forward, EAP and EAP-IG run once per
round, ``--repeats`` rounds, and their ratios are medians of the per-round ratios (wall and CPU).

TransformerLens runs in a throwaway venv (``/tmp/ref-tl``: ``python3 -m venv /tmp/ref-tl &&
/tmp/ref-tl/bin/pip install torch==2.13.0 transformer-lens==4.3.0``), never in the project's:
the lab's weights go to it as a Hugging Face GPT-2 state dict in a safetensors file, it
builds ``GPT2LMHeadModel`` from them and boots a ``TransformerBridge`` on it (a word-level
tokenizer made on the spot: nothing is downloaded). TransformerLens scores an edge per
position (a writer and a reader at the same position); the lab's edge is their sum over
positions, so the TransformerLens scores are summed per (writer, reader) before comparing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import save_file

from tui_lab.core.analysis.edges.edge_attribution import attribute
from tui_lab.core.analysis.edges.edge_forward import graph_of
from tui_lab.core.analysis.patching.patch_pair import PatchPair
from tui_lab.core.config.presets import load_preset
from tui_lab.core.model.models import DecoderOnly, build_model

TL_PYTHON = Path("/tmp/ref-tl/bin/python")
VOCAB = 50257

TL_SCRIPT = r'''
import json, sys, time
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer, models
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.tools.analysis.attribution_patching import EdgeAttributionConfig, attribution_patch

args = json.loads(sys.argv[1])
torch.set_num_threads(1)
cfg = GPT2Config(n_layer=args["layers"], n_head=args["heads"], n_embd=args["d_model"], vocab_size=args["vocab"],
                 n_positions=args["positions"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
hf = GPT2LMHeadModel(cfg).eval()
missing, unexpected = hf.load_state_dict(load_file(args["weights"]), strict=False)
assert not unexpected and all(k.endswith("attn.bias") or k.endswith("masked_bias") or k == "lm_head.weight" for k in missing), (missing, unexpected)
tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"t0": 0}, unk_token="t0")), unk_token="t0")
hf.save_pretrained(args["folder"]); tok.save_pretrained(args["folder"])
bridge = TransformerBridge.boot_transformers(args["folder"], hf_model=hf, tokenizer=tok, device="cpu")
bridge.eval()
clean, corrupt = torch.tensor([args["clean"]]), torch.tensor([args["corrupt"]])
answer, wrong = args["answer"], args["wrong"]
def metric(logits):
    return logits[0, -1, answer] - logits[0, -1, wrong]
with torch.no_grad():
    m = [float(metric(bridge(x))) for x in (clean, corrupt)]
times, result = [], None
for _ in range(args["repeats"]):
    start = time.perf_counter()
    result = attribution_patch(bridge, clean, corrupt, metric, EdgeAttributionConfig(granularity="edge"))
    times.append(time.perf_counter() - start)
def writer(n):
    return {"embed": "input", "attn_head_out": f"a{n.layer}.h{n.head}", "mlp_out": f"m{n.layer}"}[n.kind]
def reader(n):
    if n.kind in ("q_input", "k_input", "v_input"):
        return f"a{n.layer}.h{n.head}<{n.kind[0]}>"
    return {"mlp_in": f"m{n.layer}", "logits": "logits"}[n.kind]
summed = {}
for (u, v), s in result.edge_scores.items():
    key = writer(u) + "->" + reader(v)
    summed[key] = summed.get(key, 0.0) + s
print(json.dumps({"seconds": times, "clean": m[0], "corrupt": m[1], "scores": summed,
                  "per_position_edges": len(result.edge_scores)}))
'''


def gpt2_shaped(layers: int, heads: int, d_model: int, seed: int = 0) -> DecoderOnly:
    """The lab's decoder-only model with GPT-2's options and its own random initialisation."""
    base = load_preset("induction").model
    config = dataclasses.replace(
        base, d_model=d_model, n_heads=heads, n_decoder_layers=layers, d_ff=4 * d_model, activation="gelu_tanh",
        norm="pre", positional="learned", max_len=1024, tie_embeddings=True, scale_embeddings=False,
        vocab_size=VOCAB, dropout=0.0, norm_eps=1e-5)
    torch.manual_seed(seed)
    net = build_model(config)
    assert isinstance(net, DecoderOnly)
    return net.eval()


def hf_state(net: DecoderOnly) -> dict[str, torch.Tensor]:
    """The model's weights as Hugging Face GPT-2 names them (Conv1D weights stored (in, out))."""
    out = {"transformer.wte.weight": net.tgt_embed.weight, "transformer.wpe.weight": net.pos.weight}  # type: ignore[union-attr]
    for i, block in enumerate(net.decoder.layers):
        a, p = block.self_attn, f"transformer.h.{i}."
        out[p + "attn.c_attn.weight"] = torch.cat([a.w_q.weight, a.w_k.weight, a.w_v.weight]).T
        out[p + "attn.c_attn.bias"] = torch.cat([a.w_q.bias, a.w_k.bias, a.w_v.bias])
        out[p + "attn.c_proj.weight"], out[p + "attn.c_proj.bias"] = a.w_o.weight.T, a.w_o.bias
        for mine, theirs in (("norm1", "ln_1"), ("norm2", "ln_2")):
            norm = getattr(block, mine)
            out[f"{p}{theirs}.weight"], out[f"{p}{theirs}.bias"] = norm.weight, norm.bias
        out[p + "mlp.c_fc.weight"], out[p + "mlp.c_fc.bias"] = block.ff.lin1.weight.T, block.ff.lin1.bias
        out[p + "mlp.c_proj.weight"], out[p + "mlp.c_proj.bias"] = block.ff.lin2.weight.T, block.ff.lin2.bias
    norm = net.decoder.norm
    assert norm is not None
    out["transformer.ln_f.weight"], out["transformer.ln_f.bias"] = norm.weight, norm.bias
    return {k: v.detach().contiguous().clone() for k, v in out.items()}


def make_pair(tokens: int, seed: int = 1) -> PatchPair:
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(0, VOCAB, (tokens,), generator=g).tolist()
    corrupt = list(clean)
    for i in (1, 4, 7, 10):
        corrupt[i % tokens] = (clean[i % tokens] + 12345) % VOCAB
    return PatchPair(clean, corrupt, 464, 1212)


def seconds(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def interleaved(fns: list[Callable[[], object]], repeats: int) -> list[tuple[float, float, float, float]]:
    """Each of ``fns`` once per round, ``repeats`` rounds after a warm-up round: per function,
    (median wall s, median CPU s, median wall ratio to ``fns[0]``, median CPU ratio to it).
    Ratios are taken within a round, side by side, so load from other processes mostly cancels."""
    for fn in fns:
        fn()
    rounds = [[seconds(fn) for fn in fns] for _ in range(repeats)]
    out = []
    for i in range(len(fns)):
        out.append((statistics.median(r[i][0] for r in rounds), statistics.median(r[i][1] for r in rounds),
                    statistics.median(r[i][0] / r[0][0] for r in rounds),
                    statistics.median(r[i][1] / r[0][1] for r in rounds)))
    return out


def run_tl(net: DecoderOnly, pair: PatchPair, args: argparse.Namespace) -> dict[str, object] | None:
    """TransformerLens's edge attribution in its venv, or None (with the reason printed)."""
    if not TL_PYTHON.exists():
        print(f"TransformerLens venv missing ({TL_PYTHON}): make it as the module docstring says")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        weights = os.path.join(tmp, "gpt2.safetensors")
        save_file(hf_state(net), weights)
        spec = {"layers": args.layers, "heads": args.heads, "d_model": args.d_model, "vocab": VOCAB,
                "positions": 1024, "weights": weights, "folder": os.path.join(tmp, "hf"), "clean": pair.clean,
                "corrupt": pair.corrupt, "answer": pair.answer, "wrong": pair.wrong, "repeats": args.tl_repeats}
        proc = subprocess.run([str(TL_PYTHON), "-c", TL_SCRIPT, json.dumps(spec)], capture_output=True, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"}, check=False)
    if proc.returncode != 0:
        print("TransformerLens failed:", proc.stderr.strip().splitlines()[-1:])
        return None
    found: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--tl-repeats", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    net, pair = gpt2_shaped(args.layers, args.heads, args.d_model), make_pair(args.tokens)
    g = graph_of(net)
    ids = torch.tensor([pair.clean])
    def forward() -> object:
        with torch.no_grad():
            return net(ids)

    load = os.getloadavg()[0]
    timed = interleaved([forward, lambda: attribute(net, pair, 1), lambda: attribute(net, pair, 5)], args.repeats)
    (fwd, fwd_cpu, _, _), (eap_s, _, eap_x, eap_cpu_x), (ig_s, _, ig_x, ig_cpu_x) = timed
    eap = attribute(net, pair, 1)
    print(f"model: {args.layers} layers x {args.heads} heads, d_model {args.d_model}; {g.n_edges} edges; "
          f"{args.tokens} tokens; load average {load:.2f} before, {os.getloadavg()[0]:.2f} after; "
          f"medians of {args.repeats} interleaved rounds")
    print(f"one forward pass      {fwd * 1e3:8.1f} ms wall, {fwd_cpu * 1e3:.1f} ms CPU")
    print(f"EAP (every edge)      {eap_s * 1e3:8.1f} ms  {eap_x:5.2f}x a forward (CPU time {eap_cpu_x:.2f}x; goal <= 4x)")
    print(f"EAP-IG, 5 steps       {ig_s * 1e3:8.1f} ms  {ig_x:5.2f}x a forward (CPU time {ig_cpu_x:.2f}x; goal <= 15x)")
    tl = run_tl(net, pair, args)
    if tl is None:
        return
    tl_s = statistics.median(tl["seconds"])  # type: ignore[arg-type]
    theirs: dict[str, float] = tl["scores"]  # type: ignore[assignment]
    ours = {e.name: e.score for e in eap.top()}
    assert set(theirs) == set(ours), (len(theirs), len(ours))
    scale = max(abs(v) for v in theirs.values())
    worst = max(abs(ours[k] - v) for k, v in theirs.items())
    big = [k for k, v in theirs.items() if abs(v) > 1e-3 * scale]
    worst_rel = max(abs(ours[k] - theirs[k]) / abs(theirs[k]) for k in big)
    print(f"TransformerLens 4.3   {tl_s * 1e3:8.1f} ms  lab EAP {tl_s / eap_s:5.2f}x faster (goal >= 1x; wall, "
          "one thread each, not interleaved); "
          f"{tl['per_position_edges']} per-position edges summed to {len(theirs)}")
    print(f"metric: lab clean {eap.clean:.5f} corrupt {eap.corrupt:.5f}; TL clean {tl['clean']:.5f} "
          f"corrupt {tl['corrupt']:.5f}")
    within = sum(abs(ours[k] - v) <= 1e-4 * abs(v) for k, v in theirs.items())
    large = [k for k, v in theirs.items() if abs(v) > 1e-2 * scale]
    large_rel = max(abs(ours[k] - theirs[k]) / abs(theirs[k]) for k in large)
    print(f"scores: largest |lab - TL| {worst:.2e} = {worst / scale:.2e} of the largest score; "
          f"largest relative error over the {len(big)} edges above 1e-3 of it: {worst_rel:.2e}, "
          f"over the {len(large)} above 1e-2: {large_rel:.2e} (goal 1e-4); "
          f"{within} of {len(theirs)} edges within 1e-4 relative")


if __name__ == "__main__":
    main()
