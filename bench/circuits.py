"""Attribution graphs: the lab's ``attribute`` beside circuit-tracer 0.5's, same CPU, same model,
transcoders and prompt.

    .venv/bin/python -m bench.circuits [--layers 12] [--d-model 768] [--features 4096]
        [--tokens 32] [--max-feature-nodes 1024] [--batch-size 256] [--threads 2] [--no-reference]

A random GPT-2-small-shaped model (``save_pretrained`` from ``transformers``: 12 layers,
d_model 768, 12 heads) and 12 random JumpReLU transcoders of 4,096 features (unit
encoder rows, threshold 2.3: about 1% active per position), written in
circuit-tracer's layout; a 32-token prompt starting with the start token. circuit-tracer
runs in its own venv (``/tmp/ref-ct``, see ``bench/circuit_tracer_run.py``) with the
same thread count; its time is ``attribute`` alone (model loading excluded), as is the
lab's. The table says both times, the ratio, and whether the two graphs agree (same
selected features and logits, adjacency within 1e-4 of the largest edge).
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CT_PYTHON = Path("/tmp/ref-ct/bin/python")


def _transcoders(model: object, features: int, seed: int = 0) -> object:
    import torch

    from tui_lab.core.sae.transcoder import Transcoder, TranscoderSet

    d = model.config.model.d_model  # type: ignore[attr-defined]
    gen = torch.Generator().manual_seed(seed)
    layers = []
    for layer in range(len(model.model.decoder.layers)):  # type: ignore[attr-defined]
        tc = Transcoder(d, features, layer, architecture="jumprelu", skip=False, seed=seed + layer)
        with torch.no_grad():
            w = torch.randn(features, d, generator=gen)
            tc.W_enc.copy_(w / w.norm(dim=1, keepdim=True))
            tc.W_dec.copy_(torch.randn(features, d, generator=gen) * 0.05)
            tc.b_dec.zero_()
            assert tc.threshold is not None
            tc.threshold.fill_(2.3)
        layers.append(tc)
    return TranscoderSet(layers)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--features", type=int, default=4096)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--max-feature-nodes", type=int, default=1024)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-reference", action="store_true", help="the lab alone (no circuit-tracer run)")
    args = p.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from safetensors.torch import load_file

    from bench.hf_factory import save_family
    from tui_lab.core.analysis.circuits.attribution import attribute
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.sae.transcoder import save_transcoders

    root = Path(tempfile.mkdtemp(prefix="bench-circuits-"))
    heads = max(1, args.d_model // 64)
    save_family(root / "model", "gpt2", n_embd=args.d_model, n_layer=args.layers, n_head=heads, n_positions=256)
    model = open_model(root / "model")
    tset = _transcoders(model, args.features)
    save_transcoders(tset, root / "tc")  # type: ignore[arg-type]
    gen = torch.Generator().manual_seed(1)
    ids = [0, *torch.randint(1, 300, (args.tokens - 1,), generator=gen).tolist()]

    start = time.perf_counter()
    graph = attribute(model, ids, tset, max_feature_nodes=args.max_feature_nodes, batch_size=args.batch_size)  # type: ignore[arg-type]
    lab_s = time.perf_counter() - start
    shape = f"{args.layers} layers, d_model {args.d_model}, {args.layers} x {args.features} features, {args.tokens} tokens"
    print(f"model: {shape}; threads {args.threads}; max_feature_nodes {args.max_feature_nodes}, batch {args.batch_size}")
    print(f"active features {len(graph.activation_values)}, nodes {graph.n_nodes}, logits {len(graph.logit_tokens)}")
    print(f"{'lab attribute':<28} {lab_s:8.2f} s")
    if args.no_reference or not CT_PYTHON.exists():
        print("circuit-tracer: not run" + ("" if args.no_reference else f" (no venv at {CT_PYTHON})"))
        return
    command = [str(CT_PYTHON), "-I", str(ROOT / "bench" / "circuit_tracer_run.py"), str(root / "model"),
               str(root / "tc"), str(root / "ct.safetensors"), "--ids", ",".join(map(str, ids)),
               "--batch-size", str(args.batch_size), "--threads", str(args.threads),
               "--max-feature-nodes", str(args.max_feature_nodes)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print("circuit-tracer failed:", done.stderr[-1500:])
        return
    ref = load_file(str(root / "ct.safetensors"))
    ct_s = float(ref["seconds"][0])
    same_logits = ref["logit_ids"].tolist() == graph.logit_tokens
    theirs, ours = _triples(ref["active_features"], ref["selected_features"]), _triples(
        graph.active_features, graph.selected_features)
    active_a = {tuple(f) for f in ref["active_features"].tolist()}
    active_b = {tuple(f) for f in graph.active_features.tolist()}
    common = sorted(set(theirs) & set(ours))
    print(f"{'circuit-tracer 0.5 attribute':<28} {ct_s:8.2f} s")
    print(f"{'speed-up (ct / lab)':<28} {ct_s / lab_s:8.2f} x")
    print(f"same logits: {same_logits}; active features: {len(active_a)} and {len(active_b)}, "
          f"{len(active_a ^ active_b)} in one only (pre-activations within rounding of the threshold)")
    print(f"selected features: {len(common)} of {graph.n_features} in both (the others near-tied in influence)")
    if same_logits:
        print(f"largest difference / largest edge over the common nodes: {_common_difference(ref, graph, theirs, ours, common):.2e}")


def _triples(active: object, selected: object) -> list[tuple[int, ...]]:
    """The selected features as (layer, position, feature), in node order."""
    rows = active.tolist()  # type: ignore[attr-defined]
    return [tuple(rows[i]) for i in selected.tolist()]  # type: ignore[attr-defined]


def _common_difference(ref: dict, graph: object, theirs: list, ours: list, common: list) -> float:
    """The adjacencies compared on the features both selected (matched by layer, position
    and feature), the errors, tokens and logits."""
    import torch

    def index(selected: list, n_nodes: int) -> torch.Tensor:
        where = {f: i for i, f in enumerate(selected)}
        rest = torch.arange(len(selected), n_nodes)
        return torch.cat([torch.tensor([where[f] for f in common], dtype=torch.long), rest])

    a = ref["adjacency"]
    b = graph.adjacency  # type: ignore[attr-defined]
    ia, ib = index(theirs, a.size(0)), index(ours, b.size(0))
    a, b = a[ia][:, ia], b[ib][:, ib]
    return float((a - b).abs().max()) / float(a.abs().max())


if __name__ == "__main__":
    main()
