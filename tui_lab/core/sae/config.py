"""An SAE's settings as SAELens's ``cfg.json`` holds them, read and written both ways.

SAELens 6 writes the SAE's own keys at the top level (``d_in``, ``d_sae``,
``architecture``, ``dtype``, ``apply_b_dec_to_input``, ``normalize_activations``,
``k`` for TopK and BatchTopK, ``topk_threshold_lr`` for BatchTopK,
``matryoshka_widths`` for Matryoshka BatchTopK) and what it was trained on under ``metadata`` (``hook_name``,
``model_name``, ``context_size``, ``prepend_bos``, ...). Older files put those
at the top level too (``hook_point`` before ``hook_name``), had no
``architecture`` (meaning ``standard``), spelled TopK as ``activation_fn: topk``
with ``activation_fn_kwargs.k``, and stored ``normalize_activations`` as a bool.
Both are read here. Kept free of torch so naming and checking a folder is cheap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tui_lab.core.sae.errors import SAEError

ARCHITECTURES = ("standard", "topk", "jumprelu", "batchtopk", "matryoshka_batchtopk")
# Trained with one top-k over the whole batch (Bussmann et al. 2024) and written for
# inference as JumpReLU with the running threshold, as SAELens writes them.
BATCH_TOPK = frozenset({"batchtopk", "matryoshka_batchtopk"})
# Architectures that keep a k (and may rank decoder-norm-scaled pre-activations).
WITH_K = frozenset({"topk"}) | BATCH_TOPK
DTYPES = ("float32", "float64", "float16", "bfloat16")
# "expected_average_only_in" scales activations while training only: at inference
# SAELens leaves inputs as they are (the factor is folded into the weights), as here.
NORMALIZATIONS = ("none", "expected_average_only_in")
# SAELens decides by this version whether a cfg.json is in its 6.x layout (metadata
# nested) or an older one; a file the lab writes is in the 6.x layout, so says so.
FORMAT_VERSION = "6.0.0"
# The version is the layout's (the lab writes its own), so not carried over in ``extra``.
_METADATA_KEYS = ("hook_name", "model_name", "context_size", "prepend_bos", "sae_lens_version")


@dataclass
class SAEMetadata:
    """What the SAE was trained on; other keys SAELens wrote ride along in ``extra``."""

    hook_name: str | None = None
    model_name: str | None = None
    context_size: int | None = None
    prepend_bos: bool = True
    extra: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"sae_lens_version": FORMAT_VERSION, **self.extra}
        out.update(hook_name=self.hook_name, model_name=self.model_name,
                   context_size=self.context_size, prepend_bos=self.prepend_bos)
        return out


@dataclass
class SAEConfig:
    """The keys of ``cfg.json`` the lab uses; ``validate`` raises SAEError naming the bad one."""

    d_in: int
    d_sae: int
    architecture: str = "topk"
    dtype: str = "float32"
    apply_b_dec_to_input: bool = True
    normalize_activations: str = "none"
    # TopK: features kept per token; BatchTopK: features kept per token on average
    # over a batch (SAELens lets it be fractional: k·N of the batch's N·d_sae are kept).
    k: int | float | None = None
    # TopK only: rank pre-activations scaled by decoder norms (SAELens 6's TopK files
    # say true, with the norms already folded to 1, so it changes nothing there).
    rescale_acts_by_decoder_norm: bool = False
    # BatchTopK: the running threshold's moving-average rate (SAELens's default).
    topk_threshold_lr: float = 0.01
    # Matryoshka BatchTopK: the nested prefix sizes, strictly increasing, the last d_sae.
    matryoshka_widths: list[int] | None = None
    metadata: SAEMetadata = field(default_factory=SAEMetadata)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self, where: str = "cfg.json") -> None:
        """Raise SAEError (one line, naming ``where``) if a key is out of range."""
        for name in ("d_in", "d_sae"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SAEError(f"{where}: {name} must be a positive integer, got {value!r}")
        if self.architecture == "crosscoder":  # the crosscoder's own cfg.json, read as an SAE's
            raise SAEError(f"{where}: a crosscoder, not an SAE: read it with `tfx-lab crosscoder features`")
        if self.architecture not in ARCHITECTURES:
            raise SAEError(
                f"{where}: architecture {self.architecture!r} is not supported "
                f"(supported: {', '.join(ARCHITECTURES)})"
            )
        if self.dtype.removeprefix("torch.") not in DTYPES:
            raise SAEError(f"{where}: dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
        if self.normalize_activations not in NORMALIZATIONS:
            raise SAEError(
                f"{where}: normalize_activations {self.normalize_activations!r} is not supported "
                f"(supported: {', '.join(NORMALIZATIONS)})"
            )
        if self.architecture == "topk":
            k = self.k
            if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= self.d_sae:
                raise SAEError(f"{where}: topk needs k between 1 and d_sae={self.d_sae}, got {k!r}")
        if self.architecture in BATCH_TOPK:
            self._validate_batch_topk(where)

    def _validate_batch_topk(self, where: str) -> None:
        k, lr = self.k, self.topk_threshold_lr
        if isinstance(k, bool) or not isinstance(k, int | float) or not 0 < k <= self.d_sae:
            raise SAEError(f"{where}: {self.architecture} needs k above 0 and at most d_sae={self.d_sae}, got {k!r}")
        if isinstance(lr, bool) or not isinstance(lr, int | float) or not 0 < lr <= 1:
            raise SAEError(f"{where}: topk_threshold_lr must be in (0, 1], got {lr!r}")
        if self.architecture != "matryoshka_batchtopk":
            return
        widths = self.matryoshka_widths
        if not isinstance(widths, list) or not widths or not all(
                isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in widths):
            raise SAEError(f"{where}: matryoshka_widths must be a list of positive integers, got {widths!r}")
        if any(a >= b for a, b in zip(widths, widths[1:], strict=False)) or widths[-1] != self.d_sae:
            raise SAEError(f"{where}: matryoshka_widths must increase strictly up to d_sae={self.d_sae}, got {widths}")

    def to_dict(self) -> dict[str, object]:
        """``cfg.json``'s content, as SAELens's ``SAE.load_from_disk`` reads it."""
        out: dict[str, object] = {
            "architecture": self.architecture,
            "d_in": self.d_in,
            "d_sae": self.d_sae,
            "dtype": self.dtype.removeprefix("torch."),
            "device": "cpu",
            "apply_b_dec_to_input": self.apply_b_dec_to_input,
            "normalize_activations": self.normalize_activations,
            "reshape_activations": "none",
            "metadata": self.metadata.to_dict(),
        }
        if self.architecture in WITH_K:
            out["k"] = self.k
            out["rescale_acts_by_decoder_norm"] = self.rescale_acts_by_decoder_norm
        if self.architecture in BATCH_TOPK:
            out["topk_threshold_lr"] = self.topk_threshold_lr
        if self.architecture == "matryoshka_batchtopk":
            out["matryoshka_widths"] = list(self.matryoshka_widths or [])
            out["use_matryoshka_aux_loss"] = False
        return out


def config_from_dict(raw: object, where: str = "cfg.json") -> SAEConfig:
    """The SAEConfig of a parsed ``cfg.json`` in SAELens's 6.x or older layout; SAEError if not one."""
    if not isinstance(raw, dict):
        raise SAEError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    metadata_block = raw.get("metadata")
    nested: dict[str, object] = metadata_block if isinstance(metadata_block, dict) else {}
    # Older files keep metadata at the top level; the nested block wins where both exist.
    flat = {**raw, **nested}
    if "hook_name" not in flat and "hook_point" in flat:
        flat["hook_name"] = flat["hook_point"]
    architecture = raw.get("architecture", "standard")
    k = raw.get("k")
    kwargs = raw.get("activation_fn_kwargs") or {}
    if raw.get("activation_fn") == "topk" and isinstance(kwargs, dict) and "k" in kwargs:
        architecture, k = "topk", kwargs["k"]
    if raw.get("reshape_activations", "none") not in ("none", None):
        raise SAEError(f"{where}: reshape_activations {raw['reshape_activations']!r} is not supported")
    normalize = raw.get("normalize_activations", "none")
    if isinstance(normalize, bool) or normalize is None:
        normalize = "expected_average_only_in" if normalize else "none"
    for key in ("d_in", "d_sae"):
        if key not in raw:
            raise SAEError(f"{where}: no {key!r} key")
    metadata = SAEMetadata(
        hook_name=flat.get("hook_name"),
        model_name=flat.get("model_name"),
        context_size=flat.get("context_size"),
        prepend_bos=bool(flat.get("prepend_bos", True)),
        extra={key: value for key, value in nested.items() if key not in _METADATA_KEYS},
    )
    try:
        return SAEConfig(
            d_in=raw["d_in"], d_sae=raw["d_sae"], architecture=architecture,
            dtype=str(raw.get("dtype", "float32")),
            apply_b_dec_to_input=bool(raw.get("apply_b_dec_to_input", True)),
            normalize_activations=normalize, k=k,
            rescale_acts_by_decoder_norm=bool(raw.get("rescale_acts_by_decoder_norm", False)),
            topk_threshold_lr=raw.get("topk_threshold_lr", 0.01),
            matryoshka_widths=raw.get("matryoshka_widths"),
            metadata=metadata,
        )
    except SAEError as exc:  # say which file, not "cfg.json" in general
        raise SAEError(str(exc).replace("cfg.json", where, 1)) from None
