"""Run circuit-tracer 0.5's ``attribute`` on a model folder and a transcoder folder, offline.

Runs under circuit-tracer's own venv (``/tmp/ref-ct/bin/python``: it pins older
``transformers`` and TransformerLens), never the project's. The lab's tests and
``bench/circuits.py`` call it as a subprocess::

    python bench/circuit_tracer_run.py MODEL_DIR TRANSCODER_DIR OUT.safetensors \
        --ids 0,17,42 [--max-feature-nodes N] [--batch-size B] [--threads K]

Offline it needs one patch: TransformerLens's ``get_official_model_name`` refuses a
local folder, so it returns the path unchanged. Ids must begin with the start token
(its BOS lookup would prepend one otherwise). Writes the adjacency, the active and
selected features, the logit ids and probabilities, and the seconds ``attribute`` took.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

TL_HOOKS = {"ln2.hook_normalized": "mlp.hook_in", "hook_mlp_out": "mlp.hook_out"}


def _tl_folder(model_dir: Path) -> Path:
    """A copy of ``model_dir`` (weights linked) that TransformerLens 3.2 and transformers 4
    read: config.json with the ``n_ctx`` GPT-2 needs there (transformers 5 no longer
    writes it), and the tokenizer saved again by transformers 4 (5 names a class 4 lacks)."""
    import json
    import tempfile

    from transformers import PreTrainedTokenizerFast

    config = json.loads((model_dir / "config.json").read_text())
    if config.get("model_type") == "gpt2" and "n_ctx" not in config:
        config["n_ctx"] = config["n_positions"]
    copy = Path(tempfile.mkdtemp(prefix="ct-model-"))
    for item in model_dir.glob("*.safetensors"):
        (copy / item.name).symlink_to(item.resolve())
    (copy / "config.json").write_text(json.dumps(config))
    PreTrainedTokenizerFast(
        tokenizer_file=str(model_dir / "tokenizer.json"), bos_token="<|endoftext|>", eos_token="<|endoftext|>",
    ).save_pretrained(copy)
    return copy


def _load(model_dir: Path, tc_dir: Path) -> Any:
    import torch
    import transformer_lens.loading_from_pretrained as loading
    import yaml
    from circuit_tracer.replacement_model.replacement_model_transformerlens import (
        TransformerLensReplacementModel,
    )
    from circuit_tracer.utils.hf_utils import load_transcoders
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loading.get_official_model_name = lambda name: name  # a local folder, as it is
    model_dir = _tl_folder(model_dir)
    config = yaml.safe_load((tc_dir / "config.yaml").read_text())
    if "transcoders" not in config:
        n = len(list(tc_dir.glob("layer_*.safetensors")))
        config["transcoders"] = [str(tc_dir / f"layer_{i}.safetensors") for i in range(n)]
    else:
        config["transcoders"] = [str(tc_dir / p) if not Path(p).is_absolute() else p for p in config["transcoders"]]
    config.setdefault("scan", "tfx-lab")
    # The lab's ln2.hook_normalized is the norm's output (after its weight and bias), the
    # MLP's input; TransformerLens's is before them. circuit-tracer's names for the MLP's
    # own input and output are mlp.hook_in and mlp.hook_out.
    config["feature_input_hook"] = TL_HOOKS.get(config["feature_input_hook"], config["feature_input_hook"])
    config["feature_output_hook"] = TL_HOOKS.get(config["feature_output_hook"], config["feature_output_hook"])
    transcoders = load_transcoders(config, device=torch.device("cpu"), dtype=torch.float32,
                                   lazy_encoder=False, lazy_decoder=False)
    hf_model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return TransformerLensReplacementModel.from_pretrained_and_transcoders(
        str(model_dir), transcoders, hf_model=hf_model, tokenizer=tokenizer, device="cpu", dtype=torch.float32,
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model_dir", type=Path)
    p.add_argument("tc_dir", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--ids", required=True)
    p.add_argument("--max-feature-nodes", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--graph-file", type=Path, help="also write circuit-tracer's graph file (create_graph_files) here")
    args = p.parse_args()
    import torch
    from circuit_tracer.attribution.attribute import attribute
    from safetensors.torch import save_file

    if args.threads:
        torch.set_num_threads(args.threads)
    model = _load(args.model_dir, args.tc_dir)
    ids = torch.tensor([int(i) for i in args.ids.split(",")])
    start = time.perf_counter()
    graph = attribute(ids, model, max_feature_nodes=args.max_feature_nodes, batch_size=args.batch_size)
    seconds = time.perf_counter() - start
    if args.graph_file is not None:
        from circuit_tracer.utils.create_graph_files import create_graph_files

        create_graph_files(graph, "ct", str(args.graph_file), scan="tfx-lab")
    save_file({
        "adjacency": graph.adjacency_matrix.float().contiguous(),
        "active_features": graph.active_features.long().contiguous(),
        "selected_features": graph.selected_features.long().contiguous(),
        "logit_ids": graph.logit_token_ids.long().contiguous(),
        "logit_probabilities": graph.logit_probabilities.float().contiguous(),
        "seconds": torch.tensor([seconds], dtype=torch.float64),
    }, str(args.out))


if __name__ == "__main__":
    main()
