"""Run inside circuit-tracer 0.5.0's venv (``/tmp/ref-ct``), never the project's:

    python -I transcoder_ct_side.py MODEL_DIR SET_DIR IDS OUT

circuit-tracer opens the transcoder set in SET_DIR with its own loader, reading
config.yaml's ``feature_input_hook`` / ``feature_output_hook`` as written (nothing is
renamed here), builds its TransformerLens replacement model of the GPT-2 folder
MODEL_DIR, and writes to OUT (safetensors):

- ``acts``: ``get_activations`` of the comma-separated token ids IDS (layers, positions,
  features; circuit-tracer zeroes position 0), read at the set's input hook;
- ``acts_tl_ln2``: each transcoder's encoding of TransformerLens's own
  ``blocks.<l>.ln2.hook_normalized`` (the norm's output before its weight and bias), so
  a test can show that name reads something else.

Offline it takes the two steps ``bench/circuit_tracer_run.py`` documents (that module's
``_tl_folder`` copy of the model folder, and ``get_official_model_name`` returning a
local path as it is); it does not use that runner's own hook renaming.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository, for bench/


def main(model_dir: Path, set_dir: Path, ids_text: str, out: Path) -> None:
    import torch
    import transformer_lens.loading_from_pretrained as loading
    from circuit_tracer.replacement_model.replacement_model_transformerlens import (
        TransformerLensReplacementModel,
    )
    from circuit_tracer.utils.caching import load_transcoders_from_cache
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bench.circuit_tracer_run import _tl_folder

    loading.get_official_model_name = lambda name: name  # a local folder, as it is
    folder = _tl_folder(model_dir)
    transcoders, _config = load_transcoders_from_cache(set_dir.name, cache_dir=set_dir.parent,
                                                       device=torch.device("cpu"), dtype=torch.float32)
    model = TransformerLensReplacementModel.from_pretrained_and_transcoders(
        str(folder), transcoders, hf_model=AutoModelForCausalLM.from_pretrained(folder),
        tokenizer=AutoTokenizer.from_pretrained(folder), device="cpu", dtype=torch.float32)
    ids = torch.tensor([int(i) for i in ids_text.split(",")])
    _logits, acts = model.get_activations(ids)
    names = [f"blocks.{layer}.ln2.hook_normalized" for layer in range(model.cfg.n_layers)]
    with torch.no_grad():
        _logits, cache = model.run_with_cache(ids, names_filter=lambda name: name in names)
        tl_ln2 = torch.stack([transcoders.encode_layer(cache[name][0], layer) for layer, name in enumerate(names)])
    save_file({"acts": acts.float().contiguous(), "acts_tl_ln2": tl_ln2.float().contiguous()}, str(out))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))
