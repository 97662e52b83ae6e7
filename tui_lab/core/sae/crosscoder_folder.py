"""A crosscoder's folder, both ways, in the style of the SAE folders::

    cfg.json                          architecture "crosscoder", d_in, d_sae, n_sources,
                                      metadata: hook_name, model_name, context_size, sources
    crosscoder_weights.safetensors    W_enc (n, d, F), b_enc (F), W_dec (F, n, d), b_dec (n, d),
                                      scale (n), fired (F): firings over training's last rows
    trainer_state.json                the step reached and the settings (the runs table reads them)
    metrics.jsonl                     the step records and the end, as an SAE's

``cfg.json`` keeps the keys the runs table reads of an SAE (``architecture``,
``d_sae``, ``metadata.hook_name``); Runs gives a crosscoder its own row and the
TensorBoard export its own ``crosscoder/*`` curves (``runs/crosscoder_summary.py``). Reading checks every
key and tensor before any weight is used and says what is wrong in one line;
writing stages every file and then replaces them all (``folder.write_files``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from tui_lab.core.sae.crosscoder import ARCHITECTURE, Crosscoder, CrosscoderConfig, SourceSpec
from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.folder import read_cfg_json, read_tensors, write_files

CFG_FILE = "cfg.json"
WEIGHTS_FILE = "crosscoder_weights.safetensors"
STATE_FILE = "trainer_state.json"
METRICS_FILE = "metrics.jsonl"


def config_dict(cfg: CrosscoderConfig) -> dict[str, object]:
    """``cfg.json``'s contents."""
    return {
        "architecture": ARCHITECTURE, "d_in": cfg.d_in, "d_sae": cfg.d_sae, "n_sources": cfg.n_sources,
        "l1_coefficient": cfg.l1_coefficient, "dtype": "float32",
        "metadata": {"hook_name": cfg.hook, "model_name": cfg.model_name, "context_size": cfg.context_size,
                     "sources": [s.to_dict() for s in cfg.sources]},
        **cfg.extra,
    }


def _int(raw: dict[str, object], key: str, where: str) -> int:
    value = raw.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SAEError(f"{where}: {key} must be a whole number >= 1, got {value!r}")
    return value


def _sources(meta: dict[str, object], where: str) -> tuple[SourceSpec, ...]:
    raw = meta.get("sources")
    if not isinstance(raw, list) or len(raw) < 2:
        raise SAEError(f"{where}: metadata.sources must list two or more sources")
    out = []
    for s in raw:
        if not isinstance(s, dict) or not isinstance(s.get("source"), str):
            raise SAEError(f"{where}: each source is {{\"source\": PATH, \"at_step\": N or null}}, got {s!r}")
        step = s.get("at_step")
        if step is not None and (not isinstance(step, int) or isinstance(step, bool)):
            raise SAEError(f"{where}: a source's at_step must be a whole number or null, got {step!r}")
        out.append(SourceSpec(str(s["source"]), step))
    return tuple(out)


def config_from_dict(raw: object, where: str) -> CrosscoderConfig:
    """A CrosscoderConfig from ``cfg.json``'s contents, or SAEError naming the bad key."""
    if not isinstance(raw, dict):
        raise SAEError(f"{where}: not a JSON object")
    if raw.get("architecture") != ARCHITECTURE:
        raise SAEError(f"{where}: architecture {raw.get('architecture')!r}, not a crosscoder "
                       "(tfx-lab sae features opens SAEs)")
    meta = raw.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("hook_name"), str):
        raise SAEError(f"{where}: metadata.hook_name missing")
    sources = _sources(meta, where)
    if _int(raw, "n_sources", where) != len(sources):
        raise SAEError(f"{where}: n_sources is {raw.get('n_sources')} but metadata lists {len(sources)} sources")
    name, context, l1 = meta.get("model_name"), meta.get("context_size"), raw.get("l1_coefficient", 0.0)
    return CrosscoderConfig(
        d_in=_int(raw, "d_in", where), d_sae=_int(raw, "d_sae", where), hook=str(meta["hook_name"]),
        sources=sources, context_size=context if isinstance(context, int) else 0,
        l1_coefficient=float(l1) if isinstance(l1, (int, float)) else 0.0,
        model_name=name if isinstance(name, str) else None)


def expected_shapes(cfg: CrosscoderConfig) -> dict[str, tuple[int, ...]]:
    n, d, f = cfg.n_sources, cfg.d_in, cfg.d_sae
    return {"W_enc": (n, d, f), "b_enc": (f,), "W_dec": (f, n, d), "b_dec": (n, d), "scale": (n,), "fired": (f,)}


def is_crosscoder_folder(folder: Path) -> bool:
    """A folder holding a crosscoder's weights file (its cfg.json not read)."""
    return (folder / WEIGHTS_FILE).is_file()


def read_config(folder: Path) -> CrosscoderConfig:
    """``folder``'s cfg.json as a CrosscoderConfig, or SAEError (one line)."""
    raw = read_cfg_json(folder, f"a crosscoder folder holds {CFG_FILE} and {WEIGHTS_FILE}")
    return config_from_dict(raw, str(folder / CFG_FILE))


def load_crosscoder(folder: str | os.PathLike[str], device: torch.device | str = "cpu"
                    ) -> tuple[Crosscoder, torch.Tensor]:
    """(the crosscoder in ``folder``, its (F,) firing counts); SAEError (one line) if it is not one."""
    where = Path(folder).expanduser()
    if not where.is_dir():
        raise SAEError(f"{where}: no such folder")
    cfg = read_config(where)
    path = where / WEIGHTS_FILE
    tensors = read_tensors(path)
    for name, shape in expected_shapes(cfg).items():
        t = tensors.get(name)
        if t is None:
            raise SAEError(f"{path}: no tensor {name!r} (expected shape {shape})")
        if tuple(t.shape) != shape:
            raise SAEError(f"{path}: {name} has shape {tuple(t.shape)}, cfg.json says {shape}")
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise SAEError(f"{path}: {name} holds NaN or infinite values")
    cc = Crosscoder(cfg, device=device, seed=None)
    with torch.no_grad():
        for name in ("W_enc", "b_enc", "W_dec", "b_dec", "scale"):
            getattr(cc, name).copy_(tensors[name].float())
    return cc.eval(), tensors["fired"].long()


def save_crosscoder(cc: Crosscoder, fired: torch.Tensor, folder: str | os.PathLike[str],
                    state: dict[str, object], records: list[dict[str, object]]) -> Path:
    """Write the folder (every file staged, then all replaced); its path."""
    from safetensors.torch import save as safetensors_bytes

    weights = {name: getattr(cc, name).detach().float().cpu().contiguous()
               for name in ("W_enc", "b_enc", "W_dec", "b_dec", "scale")}
    weights["fired"] = fired.long().cpu().contiguous()
    where = Path(folder).expanduser()
    write_files(where, {
        CFG_FILE: (json.dumps(config_dict(cc.cfg), indent=2) + "\n").encode("utf-8"),
        WEIGHTS_FILE: safetensors_bytes(weights),
        STATE_FILE: (json.dumps(state, indent=2) + "\n").encode("utf-8"),
        METRICS_FILE: "".join(json.dumps(r) + "\n" for r in records).encode("utf-8"),
    })
    return where
