"""Transcoder sets on disk, both ways: circuit-tracer's folder and SAELens's per-layer folders.

circuit-tracer (0.5's ``load_transcoders_from_cache`` reads this folder as it is)::

    config.yaml            model_kind: transcoder_set, feature_input_hook,
                           feature_output_hook, scan (+ the lab's ``tfx_lab`` block)
    layer_<i>.safetensors  W_enc (d_tc, d_model), b_enc (d_tc,), W_dec (d_tc, d_model),
                           b_dec (d_model,), optional W_skip (d_model, d_model) and
                           activation_function.threshold (d_tc,) for JumpReLU

SAELens (``sae_lens.saes.transcoder``), one folder per layer, ``layer_<i>/``::

    cfg.json                 architecture transcoder | skip_transcoder |
                             jumprelu_transcoder | jumprelu_skip_transcoder,
                             d_in, d_sae, d_out, metadata.hook_name / hook_name_out
    sae_weights.safetensors  W_enc (d_in, d_sae), b_enc, W_dec (d_sae, d_out), b_dec,
                             optional W_skip (d_out, d_in), threshold (d_sae,)

circuit-tracer has no TopK loader (its files are ReLU unless they hold a threshold),
so a TopK set keeps its k in config.yaml's ``tfx_lab`` block, which only the lab
reads; SAELens has no TopK transcoder, so writing one there is refused. Reading
checks everything before a weight is used and writes nothing.

Hook names in both formats are the ones circuit-tracer and SAELens resolve to the
activation the lab's hook carries (``transcoder_hooks.py``: the lab's
``ln2.hook_normalized`` is written ``mlp.hook_in``, and read back from it). A
config.yaml whose ``tfx_lab`` block lacks ``hook_names`` was written by the lab before
names were mapped, so its names are the lab's own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import yaml
from safetensors.torch import save as safetensors_bytes

from tui_lab.core.runs.run_files import reason
from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.folder import read_tensors, write_files
from tui_lab.core.sae.transcoder_hooks import check_plain_mlp, file_hook, lab_hook
from tui_lab.core.sae.transcoder_layers import DEFAULT_OUTPUT_HOOK, Transcoder, TranscoderSet

if TYPE_CHECKING:
    from tui_lab.core.sae.activations import HookedLike

CONFIG_FILE = "config.yaml"
CFG_FILE = "cfg.json"
WEIGHTS_FILE = "sae_weights.safetensors"
THRESHOLD_KEY = "activation_function.threshold"
FORMATS = ("circuit-tracer", "saelens")
HOOK_NAMES = "circuit-tracer"  # config.yaml's tfx_lab.hook_names: whose names the file uses
SAELENS_ARCHS = {("relu", False): "transcoder", ("relu", True): "skip_transcoder",
                 ("jumprelu", False): "jumprelu_transcoder", ("jumprelu", True): "jumprelu_skip_transcoder"}
_LAYER_FILE = re.compile(r"layer_(\d+)\.safetensors")
_BLOCK_HOOK = re.compile(r"blocks\.(\d+)\.(.+)")


def layer_file(layer: int) -> str:
    return f"layer_{layer}.safetensors"


def is_transcoder_set(folder: Path) -> bool:
    """Whether ``folder`` looks like a transcoder set of either format (cheap: no weights read)."""
    if (folder / CONFIG_FILE).is_file():
        try:
            raw = yaml.safe_load((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return False
        return isinstance(raw, dict) and raw.get("model_kind") == "transcoder_set"
    return any(_saelens_arch(sub / CFG_FILE) for sub in _subfolders(folder))


def read_transcoder_set(folder: Path, model: HookedLike | None = None) -> TranscoderSet:
    """The set in ``folder`` (either format), checked against ``model`` when given."""
    if not folder.is_dir():
        raise SAEError(f"{folder}: no such folder")
    if (folder / CONFIG_FILE).is_file():
        tset = _read_circuit_tracer(folder)
    elif (folder / CFG_FILE).is_file() or any((sub / CFG_FILE).is_file() for sub in _subfolders(folder)):
        tset = _read_saelens(folder)
    else:
        raise SAEError(f"{folder}: not a transcoder set (no {CONFIG_FILE}, and no SAELens {CFG_FILE} folders)")
    tset.folder = folder
    if model is not None:
        check_fits(tset, model, folder)
    return tset


def check_fits(tset: TranscoderSet, model: HookedLike, where: Path | str) -> None:
    """SAEError (one line) unless the set's width, layer count and hooks are the model's."""
    d_model = int(model.config.model.d_model)
    names = set(model.hook_names())
    n_layers = sum(1 for name in names if re.fullmatch(r"blocks\.\d+\.hook_resid_pre", name))
    if tset.d_model != d_model:
        raise SAEError(f"{where}: the transcoders read d_model={tset.d_model}, the model has d_model={d_model}")
    if tset.n_layers != n_layers:
        raise SAEError(f"{where}: {tset.n_layers} transcoder layers, the model has {n_layers} layers")
    for hook in (tset.input_hook(0), tset.output_hook(0)):
        if hook not in names:
            raise SAEError(f"{where}: names hook {hook!r}, which the model lacks (see tfx-lab hooks)")
    if tset.file_hooks is not None:
        check_plain_mlp(tset.file_hooks, names, str(where))


def _subfolders(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []


def _yaml_config(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise SAEError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SAEError(f"{path}: cannot read it ({reason(exc)})") from None
    if not isinstance(raw, dict):
        raise SAEError(f"{path}: expected a mapping, got {type(raw).__name__}")
    if raw.get("model_kind") != "transcoder_set":
        raise SAEError(f"{path}: model_kind is {raw.get('model_kind')!r}, the lab reads transcoder_set")
    for key in ("feature_input_hook", "feature_output_hook"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise SAEError(f"{path}: no {key} (a hook name such as mlp.hook_in)")
    return raw


def _layer_paths(folder: Path, raw: dict[str, Any]) -> list[Path]:
    """Each layer's file, by config.yaml's ``transcoders`` list or else ``layer_<i>.safetensors``."""
    listed = raw.get("transcoders")
    if isinstance(listed, list):
        if any(str(p).startswith("hf://") for p in listed):
            raise SAEError(f"{folder / CONFIG_FILE}: lists hf:// files; nothing is downloaded (give local files)")
        return [p if p.is_absolute() else folder / p for p in map(Path, map(str, listed))]
    found = {int(m.group(1)): p for p in folder.iterdir() if (m := _LAYER_FILE.fullmatch(p.name))}
    if not found:
        raise SAEError(f"{folder}: no layer_<i>.safetensors files")
    missing = sorted(set(range(max(found) + 1)) - set(found))
    if missing:
        raise SAEError(f"{folder}: no {layer_file(missing[0])} (each layer from 0 needs one)")
    return [found[i] for i in range(len(found))]


def _check(path: Path, name: str, tensor: torch.Tensor | None, shape: tuple[int, ...]) -> torch.Tensor:
    if tensor is None:
        raise SAEError(f"{path}: no tensor {name!r} (expected shape {shape})")
    if tuple(tensor.shape) != shape:
        raise SAEError(f"{path}: {name} has shape {tuple(tensor.shape)}, expected {shape}")
    if not tensor.is_floating_point() or not bool(torch.isfinite(tensor).all()):
        raise SAEError(f"{path}: {name} is not all finite floating-point values")
    return tensor.float()


def _build(layer: int, weights: dict[str, torch.Tensor], architecture: str, k: int | None) -> Transcoder:
    d_tc, d_model = weights["W_enc"].shape
    tc = Transcoder(d_model, d_tc, layer, architecture, k, skip="W_skip" in weights, seed=None)
    with torch.no_grad():
        for name, value in weights.items():
            getattr(tc, name).copy_(value)
    return tc.eval()


def _circuit_tracer_layer(path: Path, layer: int, lab: dict[str, Any]) -> Transcoder:
    tensors = read_tensors(path)
    w_enc = tensors.get("W_enc")
    if w_enc is None or w_enc.dim() != 2:
        raise SAEError(f"{path}: no 2-D tensor 'W_enc' (d_tc, d_model)")
    d_tc, d_model = w_enc.shape
    weights = {"W_enc": _check(path, "W_enc", w_enc, (d_tc, d_model)),
               "b_enc": _check(path, "b_enc", tensors.get("b_enc"), (d_tc,)),
               "W_dec": _check(path, "W_dec", tensors.get("W_dec"), (d_tc, d_model)),
               "b_dec": _check(path, "b_dec", tensors.get("b_dec"), (d_model,))}
    if "W_skip" in tensors:
        weights["W_skip"] = _check(path, "W_skip", tensors["W_skip"], (d_model, d_model))
    architecture, k = "relu", None
    if THRESHOLD_KEY in tensors:
        weights["threshold"] = _check(path, THRESHOLD_KEY, tensors[THRESHOLD_KEY], (d_tc,))
        architecture = "jumprelu"
    elif lab.get("architecture") == "topk":
        architecture, k = "topk", lab.get("k")
    return _build(layer, weights, architecture, k)


def _read_circuit_tracer(folder: Path) -> TranscoderSet:
    raw = _yaml_config(folder / CONFIG_FILE)
    lab = raw.get("tfx_lab") if isinstance(raw.get("tfx_lab"), dict) else {}
    assert isinstance(lab, dict)
    names: tuple[str, str] = (raw["feature_input_hook"], raw["feature_output_hook"])
    hooks, file_hooks = names, None
    if not lab or "hook_names" in lab:  # else the lab wrote its own names (before it mapped them)
        where = str(folder / CONFIG_FILE)
        hooks, file_hooks = (lab_hook(names[0], where), lab_hook(names[1], where)), names
    layers = [_circuit_tracer_layer(p, i, lab) for i, p in enumerate(_layer_paths(folder, raw))]
    known = ("model_kind", "feature_input_hook", "feature_output_hook", "scan", "tfx_lab", "transcoders", "model_name")
    scan = raw.get("scan")
    step = lab.get("step")
    return TranscoderSet(layers, hooks[0], hooks[1],
                         scan=str(scan) if scan else "tfx-lab", model_name=raw.get("model_name"),
                         step=step if isinstance(step, int) else None,
                         extra={key: value for key, value in raw.items() if key not in known}, file_hooks=file_hooks)


def _saelens_arch(path: Path) -> str | None:
    """The transcoder architecture a SAELens cfg.json names, None if it is not one."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    arch = raw.get("architecture") if isinstance(raw, dict) else None
    return arch if arch in SAELENS_ARCHS.values() else None


def _saelens_cfg(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SAEError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SAEError(f"{path}: cannot read it ({reason(exc)})") from None
    if not isinstance(raw, dict) or raw.get("architecture") not in SAELENS_ARCHS.values():
        arch = raw.get("architecture") if isinstance(raw, dict) else None
        raise SAEError(f"{path}: architecture {arch!r} is not a transcoder "
                       f"({', '.join(SAELENS_ARCHS.values())})")
    for key in ("d_in", "d_sae"):
        if not isinstance(raw.get(key), int) or isinstance(raw.get(key), bool) or raw[key] < 1:
            raise SAEError(f"{path}: {key} must be a positive integer, got {raw.get(key)!r}")
    if raw.get("d_out", raw["d_in"]) != raw["d_in"]:
        raise SAEError(f"{path}: d_out={raw['d_out']} differs from d_in={raw['d_in']} (an MLP maps d_model to d_model)")
    if raw.get("apply_b_dec_to_input") or raw.get("normalize_activations", "none") not in ("none", None, False):
        raise SAEError(f"{path}: apply_b_dec_to_input / normalize_activations are not supported for transcoders")
    return raw


def _saelens_layer(folder: Path) -> tuple[Transcoder, tuple[str, str], tuple[str, str], dict[str, Any]]:
    """(transcoder, the lab's (input, output) hooks, the file's, metadata) of one SAELens folder."""
    raw = _saelens_cfg(folder / CFG_FILE)
    nested = raw.get("metadata")
    meta: dict[str, Any] = nested if isinstance(nested, dict) else raw
    hook = _BLOCK_HOOK.fullmatch(str(meta.get("hook_name", "")))
    if hook is None:
        raise SAEError(f"{folder / CFG_FILE}: metadata.hook_name {meta.get('hook_name')!r} is not blocks.<layer>.<hook>")
    out = _BLOCK_HOOK.fullmatch(str(meta.get("hook_name_out", f"blocks.{hook.group(1)}.{DEFAULT_OUTPUT_HOOK}")))
    if out is None or out.group(1) != hook.group(1):
        raise SAEError(f"{folder / CFG_FILE}: hook_name_out {meta.get('hook_name_out')!r} is not in layer {hook.group(1)}")
    where = str(folder / CFG_FILE)
    hooks = (lab_hook(hook.group(2), where), lab_hook(out.group(2), where))
    arch, d_in, d_sae = raw["architecture"], raw["d_in"], raw["d_sae"]
    path = folder / WEIGHTS_FILE
    tensors = read_tensors(path)
    weights = {"W_enc": _check(path, "W_enc", tensors.get("W_enc"), (d_in, d_sae)).T.contiguous(),
               "b_enc": _check(path, "b_enc", tensors.get("b_enc"), (d_sae,)),
               "W_dec": _check(path, "W_dec", tensors.get("W_dec"), (d_sae, d_in)),
               "b_dec": _check(path, "b_dec", tensors.get("b_dec"), (d_in,))}
    if "skip" in arch:
        weights["W_skip"] = _check(path, "W_skip", tensors.get("W_skip"), (d_in, d_in))
    architecture = "relu"
    if arch.startswith("jumprelu"):
        # SAELens's ReLU(z)·[z > θ] is z·[z > max(θ, 0)]: the same encodings with θ clamped.
        weights["threshold"] = _check(path, "threshold", tensors.get("threshold"), (d_sae,)).clamp_min(0.0)
        architecture = "jumprelu"
    tc = _build(int(hook.group(1)), weights, architecture, None)
    return tc, hooks, (hook.group(2), out.group(2)), meta


def _read_saelens(folder: Path) -> TranscoderSet:
    subs = [folder] if (folder / CFG_FILE).is_file() else [s for s in _subfolders(folder) if (s / CFG_FILE).is_file()]
    read = sorted((_saelens_layer(sub) for sub in subs), key=lambda item: item[0].layer)
    layers = [item[0] for item in read]
    got = [tc.layer for tc in layers]
    if got != list(range(len(got))):
        raise SAEError(f"{folder}: SAELens transcoders for layers {got}; a set needs one for each layer from 0")
    hooks = {item[1] for item in read}
    if len(hooks) > 1:
        raise SAEError(f"{folder}: the layers read or write different hooks ({sorted({item[2] for item in read})})")
    (input_hook, output_hook), meta = hooks.pop(), read[0][3]
    step = meta.get("tfx_lab_step")
    return TranscoderSet(layers, input_hook, output_hook, model_name=meta.get("model_name"),
                         step=step if isinstance(step, int) else None, file_hooks=read[0][2])


def circuit_tracer_files(tset: TranscoderSet) -> dict[str, bytes]:
    """config.yaml and every layer_<i>.safetensors of ``tset`` in circuit-tracer's layout."""
    lab: dict[str, object] = {"architecture": tset.layers[0].architecture, "d_model": tset.d_model,
                              "n_layers": tset.n_layers, "hook_names": HOOK_NAMES}
    if tset.layers[0].k is not None:
        lab["k"] = tset.layers[0].k
    if tset.step is not None:
        lab["step"] = tset.step
    config: dict[str, object] = {**tset.extra, "model_kind": "transcoder_set",
                                 "feature_input_hook": file_hook(tset.feature_input_hook),
                                 "feature_output_hook": file_hook(tset.feature_output_hook), "scan": tset.scan,
                                 "model_name": tset.model_name, "tfx_lab": lab}
    files = {CONFIG_FILE: yaml.safe_dump(config, sort_keys=False).encode("utf-8")}
    for tc in tset.layers:
        weights = {name: getattr(tc, name).detach().float().cpu().contiguous()
                   for name in ("W_enc", "W_dec", "b_enc", "b_dec")}
        if tc.threshold is not None:
            weights[THRESHOLD_KEY] = tc.threshold.detach().float().cpu().contiguous()
        if tc.W_skip is not None:
            weights["W_skip"] = tc.W_skip.detach().float().cpu().contiguous()
        files[layer_file(tc.layer)] = safetensors_bytes(weights)
    return files


def saelens_files(tset: TranscoderSet, tc: Transcoder) -> dict[str, bytes]:
    """cfg.json and sae_weights.safetensors of one layer in SAELens's transcoder layout."""
    arch = SAELENS_ARCHS.get((tc.architecture, tc.has_skip))
    if arch is None:
        raise SAEError(f"SAELens has no {tc.architecture} transcoder; save this set with format circuit-tracer")
    metadata: dict[str, object] = {"sae_lens_version": "6.0.0",
                                   "hook_name": f"blocks.{tc.layer}.{file_hook(tset.feature_input_hook)}",
                                   "hook_name_out": f"blocks.{tc.layer}.{file_hook(tset.feature_output_hook)}",
                                   "model_name": tset.model_name, "prepend_bos": False,
                                   # mlp.hook_in is the MLP's input only with the norm's affine unfolded
                                   "model_from_pretrained_kwargs": {"fold_ln": False}}
    if tset.step is not None:
        metadata["tfx_lab_step"] = tset.step
    cfg = {"architecture": arch, "d_in": tc.d_model, "d_sae": tc.d_tc, "d_out": tc.d_model, "dtype": "float32",
           "device": "cpu", "apply_b_dec_to_input": False, "normalize_activations": "none",
           "reshape_activations": "none", "metadata": metadata}
    weights = {"W_enc": tc.W_enc.detach().float().T.contiguous().cpu(),
               "b_enc": tc.b_enc.detach().float().cpu().contiguous(),
               "W_dec": tc.W_dec.detach().float().cpu().contiguous(),
               "b_dec": tc.b_dec.detach().float().cpu().contiguous()}
    if tc.W_skip is not None:
        weights["W_skip"] = tc.W_skip.detach().float().cpu().contiguous()
    if tc.threshold is not None:
        weights["threshold"] = tc.threshold.detach().float().cpu().contiguous()
    return {CFG_FILE: (json.dumps(cfg, indent=2) + "\n").encode("utf-8"), WEIGHTS_FILE: safetensors_bytes(weights)}


def write_transcoder_set(tset: TranscoderSet, folder: Path, format: str = "circuit-tracer") -> Path:
    """Write ``tset`` to ``folder`` in ``format``; every file is staged and then replaced."""
    if format not in FORMATS:
        raise SAEError(f"transcoder format {format!r} is not one of {', '.join(FORMATS)}")
    if format == "saelens":
        per_layer = {tc.layer: saelens_files(tset, tc) for tc in tset.layers}  # refuse before writing
        for layer, files in per_layer.items():
            write_files(folder / f"layer_{layer}", files)
        return folder
    write_files(folder, circuit_tracer_files(tset))
    for path in folder.glob("layer_*.safetensors"):  # a smaller set replacing a larger one
        m = _LAYER_FILE.fullmatch(path.name)
        if m and int(m.group(1)) >= tset.n_layers:
            path.unlink()
    return folder
