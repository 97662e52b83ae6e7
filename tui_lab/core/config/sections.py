"""The three sections of a preset (``model``, ``task``, ``train``) as frozen, validated dataclasses.

Each section checks its own values and their relations when it is made; a
relation across sections (char-lm needs a decoder-only model) is
``LabConfig``'s. Nothing here depends on the machine, so a config that is
valid on one computer is valid on every other (whether a model fits in this
machine's memory is asked where it is built: ``config.check_fits_in_memory``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tui_lab.core.config.error import field_error, show, suggest
from tui_lab.core.config.shape import Shape

ARCHS = tuple(s.value for s in Shape)
NORMS = ("pre", "post")
POSITIONALS = ("sinusoidal", "learned", "rope")
# How a sinusoidal table lays out its columns: the paper's sin/cos pairs
# interleaved, or Marian's all sines then all cosines ("halves").
SINUSOID_LAYOUTS = ("interleaved", "halves")
# "gelu" is the exact GELU; "gelu_tanh" its tanh approximation (GPT-2's gelu_new);
# "relu2" is ReLU squared, relu(x)**2 (the GPT-2 speedrun's MLP, Primer's "squared ReLU").
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "relu2")
NORM_KINDS = ("layernorm", "rmsnorm")
# Per-head or whole-projection norms on queries and keys (Qwen3 and Gemma 3; OLMo-2).
QK_NORMS = ("none", "head", "full")
# Rotary frequency scaling: none, positions divided by a factor, or Llama 3's per-band rule.
ROPE_SCALINGS = ("none", "linear", "llama3")
TASKS = (
    "copy", "reverse", "sort", "addition", "char-lm", "induction", "modular-addition", "token-lm",
    "translation", "masked-lm",
)
# The tasks with a finite training set, which train.full_batch can use whole every step.
FULL_BATCH_TASKS = ("modular-addition",)
# modular-addition's operations: (a op b) mod p; divide is a * b^-1 and needs a prime p.
MODULAR_OPERATIONS = ("add", "subtract", "multiply", "divide")
MAX_MODULUS = 1000
SCHEDULES = ("noam", "cosine", "linear", "constant")
# adamw: AdamW on every parameter. muon: torch.optim.Muon on the hidden 2-D matrices,
# AdamW on embeddings, norms, biases and the output head (training/optimizers.py).
OPTIMIZERS = ("adamw", "muon")
# What a cosine or linear decay runs over: the steps, or the time budget (max_seconds).
DECAY_CLOCKS = ("steps", "time")
DEVICES = ("auto", "cpu", "cuda", "mps")
PRECISIONS = ("auto", "fp32", "bf16")

# Assumed vocabulary size for size estimates when the task decides it later.
VOCAB_GUESS = 256


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        hint = suggest(value, allowed)
        raise field_error(name, f"{show(value)} is not one of {', '.join(allowed)}{hint}")


def _positive(name: str, value: int | float) -> None:
    if value <= 0:
        raise field_error(name, f"must be > 0, got {value}")


@dataclass(frozen=True)
class ModelConfig:
    """Architecture hyperparameters (names follow the tutorials)."""

    arch: str = "encoder-decoder"
    d_model: int = 64
    n_heads: int = 4
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    d_ff: int = 256
    dropout: float = 0.0
    activation: str = "relu"
    norm: str = "pre"
    positional: str = "sinusoidal"
    max_len: int = 64
    tie_embeddings: bool = True
    share_embeddings: bool = True
    vocab_size: int | None = None
    # The options real checkpoints need (GPT-2, GPT-NeoX, Llama, GPT-Neo); the
    # defaults are the lab's own blocks, so presets and run folders are unchanged.
    norm_kind: str = "layernorm"
    norm_eps: float = 1e-5
    gated_ff: bool = False  # lin2(act(gate(x)) * lin1(x)), Llama's gate/up/down
    parallel_residual: bool = False  # x + attn(norm1(x)) + ff(norm2(x)), GPT-NeoX
    rope_fraction: float = 1.0  # rotary on the first int(d_head * f) dims of each head
    rope_base: float = 10000.0
    score_scale: float | None = None  # None: 1/sqrt(d_head)
    # Per decoder layer: 0 = global, w > 0 = each query sees its last w keys (itself included).
    attention_windows: tuple[int, ...] = ()
    n_kv_heads: int | None = None  # grouped-query attention; None = n_heads
    qkv_bias: bool = True
    out_bias: bool = True
    ff_bias: bool = True
    scale_embeddings: bool = True  # token embeddings times sqrt(d_model)
    # Marian (opus-mt): its sinusoid column order, and a bias on the output head
    # (final_logits_bias, parameter lm_head.bias).
    sinusoid_layout: str = "interleaved"
    head_bias: bool = False
    # The families opened since (Qwen2/3, Gemma 1/2/3, Mistral, Phi-3, OLMo-2, Llama 3).
    head_dim: int | None = None  # None: d_model / n_heads (Qwen3, Gemma: wider)
    norm_offset: float = 0.0  # RMSNorm scales by (offset + w), in float32 (Gemma: 1)
    qk_norm: str = "none"  # "head": RMSNorm over each head's q and k; "full": over the projections
    input_norms: bool = True  # False: no norm before each sub-layer (OLMo-2)
    output_norms: bool = False  # a norm on each sub-layer's output before the add (Gemma 2/3, OLMo-2)
    attn_softcap: float | None = None  # scores -> c * tanh(scores / c) (Gemma 2)
    logit_softcap: float | None = None  # final logits -> c * tanh(logits / c) (Gemma 2)
    rope_local_base: float | None = None  # the rotary base of windowed layers (Gemma 3)
    rope_scaling: str = "none"
    rope_factor: float = 1.0
    rope_low_freq_factor: float = 1.0  # llama3 scaling's band edges and original context
    rope_high_freq_factor: float = 4.0
    rope_original_max_len: int = 8192
    # The encoder-only shape (BERT, DistilBERT, RoBERTa; model/encoder_only.py).
    embed_norm: bool = False  # a LayerNorm over the summed embeddings (BERT's embeddings.LayerNorm)
    type_vocab_size: int = 0  # token-type (segment) embeddings; 0: none (DistilBERT, the lab's own)
    position_offset: int = 0  # learned positions start here (RoBERTa: past its padding index, 2)
    mlm_head: bool = True  # encoder-only: dense, activation, norm before the unembedding (False: none)
    # The GPT-2 speedrun's options, each off unless a preset turns it on: activation
    # "relu2" (ReLU squared), qk_norm "head" (an RMSNorm of each head's q and k before
    # rotary and the scores), logit_softcap (logits -> c * tanh(logits / c)),
    # tie_embeddings false (an untied head), and this: every block's output
    # projections (attention's w_o, the MLP's down projection) start at zero, so each
    # block starts as the identity and the residual stream as the embeddings.
    zero_init_proj: bool = False

    def __post_init__(self) -> None:
        # A list (from code, not YAML) would make the config unhashable.
        object.__setattr__(self, "attention_windows", tuple(self.attention_windows))
        _choice("model.arch", self.arch, ARCHS)
        _choice("model.norm", self.norm, NORMS)
        _choice("model.positional", self.positional, POSITIONALS)
        _choice("model.activation", self.activation, ACTIVATIONS)
        for name in ("d_model", "n_heads", "max_len", "n_decoder_layers"):
            _positive(f"model.{name}", getattr(self, name))
        if self.d_ff < 0:  # 0 is allowed: attention-only blocks, no feed-forward
            raise field_error("model.d_ff", f"must be >= 0 (0: no feed-forward), got {self.d_ff}")
        if self.shape is not Shape.DECODER_ONLY:
            _positive("model.n_encoder_layers", self.n_encoder_layers)
        elif self.n_encoder_layers < 0:
            raise field_error("model.n_encoder_layers", f"must be >= 0, got {self.n_encoder_layers}")
        if self.vocab_size is not None:
            _positive("model.vocab_size", self.vocab_size)
        if not 0.0 <= self.dropout < 1.0:
            raise field_error("model.dropout", f"must be in [0, 1), got {self.dropout}")
        if self.head_dim is None and self.d_model % self.n_heads:
            raise field_error(
                "model.d_model", f"{self.d_model} is not divisible by n_heads={self.n_heads}"
            )
        if self.positional == "rope" and self.d_head % 2:
            raise field_error(
                "model.positional", f"rope needs an even head size, d_model/n_heads = {self.d_head}"
            )
        self._check_options()

    def _check_options(self) -> None:
        """The checks of the options real checkpoints need (norm kind to biases)."""
        _choice("model.norm_kind", self.norm_kind, NORM_KINDS)
        _choice("model.sinusoid_layout", self.sinusoid_layout, SINUSOID_LAYOUTS)
        _choice("model.qk_norm", self.qk_norm, QK_NORMS)
        _choice("model.rope_scaling", self.rope_scaling, ROPE_SCALINGS)
        _positive("model.norm_eps", self.norm_eps)
        _positive("model.rope_factor", self.rope_factor)
        for name in ("head_dim", "attn_softcap", "logit_softcap", "rope_local_base"):
            if getattr(self, name) is not None:
                _positive(f"model.{name}", getattr(self, name))
        if (not self.input_norms or self.output_norms) and (self.norm != "pre" or self.shape is not Shape.DECODER_ONLY):
            raise field_error("model.output_norms", "sub-layer output norms need a decoder-only model with norm: pre")
        _positive("model.rope_base", self.rope_base)
        for name in ("type_vocab_size", "position_offset"):
            if getattr(self, name) < 0:
                raise field_error(f"model.{name}", f"must be >= 0, got {getattr(self, name)}")
        if self.zero_init_proj and self.shape is Shape.ENCODER_ONLY:
            raise field_error("model.zero_init_proj", "needs decoder-only or encoder-decoder (encoder-only keeps BERT's init)")
        if (self.embed_norm or self.type_vocab_size or self.position_offset) and self.shape is not Shape.ENCODER_ONLY:
            raise field_error("model.arch", "embed_norm, type_vocab_size and position_offset need encoder-only")
        if self.position_offset and self.positional != "learned":
            raise field_error("model.position_offset", "needs positional: learned")
        if self.shape is Shape.ENCODER_ONLY and self.attention_windows:
            raise field_error("model.attention_windows", "an encoder-only model attends everywhere (no windows)")
        if not 0.0 < self.rope_fraction <= 1.0:
            raise field_error("model.rope_fraction", f"must be in (0, 1], got {self.rope_fraction}")
        rotary = self.rotary_dims
        if self.positional == "rope" and self.rope_fraction < 1.0 and (rotary < 2 or rotary % 2):
            raise field_error(
                "model.rope_fraction",
                f"rotates {rotary} of {self.d_head} head dims; that must be even and at least 2",
            )
        if self.score_scale is not None:
            _positive("model.score_scale", self.score_scale)
        if self.n_kv_heads is not None:
            _positive("model.n_kv_heads", self.n_kv_heads)
            if self.n_heads % self.n_kv_heads:
                raise field_error(
                    "model.n_kv_heads", f"{self.n_kv_heads} does not divide n_heads={self.n_heads}"
                )
        windows = self.attention_windows
        if windows and len(windows) != self.n_decoder_layers:
            raise field_error(
                "model.attention_windows",
                f"{len(windows)} windows for {self.n_decoder_layers} decoder layers (one each, 0 = global)",
            )
        if any(w < 0 for w in windows):
            raise field_error("model.attention_windows", f"must be >= 0 (0 = global), got {list(windows)}")
        if self.parallel_residual and (self.norm != "pre" or self.shape is not Shape.DECODER_ONLY):
            raise field_error(
                "model.parallel_residual", "needs a decoder-only model with norm: pre"
            )

    @property
    def shape(self) -> Shape:
        """``arch`` as the enum every branch on the model's shape compares."""
        return Shape(self.arch)

    @property
    def d_head(self) -> int:
        return self.head_dim or self.d_model // self.n_heads

    @property
    def d_attn(self) -> int:
        """Width of the concatenated heads (``w_q``'s output, ``w_o``'s input)."""
        return self.n_heads * self.d_head

    @property
    def kv_heads(self) -> int:
        """Key/value heads: ``n_kv_heads``, or one per query head."""
        return self.n_kv_heads or self.n_heads

    @property
    def rotary_dims(self) -> int:
        """How many dims of each head rotary positions rotate (``rope_fraction`` of d_head)."""
        return int(self.d_head * self.rope_fraction)

    def estimated_params(self, vocab_size: int | None = None) -> int:
        """Rough upper bound on parameters, computed without building anything."""
        d, f = self.d_model, self.d_ff
        v = self.vocab_size or vocab_size or VOCAB_GUESS
        kv = self.kv_heads * self.d_head  # width of w_k and w_v
        attn = 2 * d * self.d_attn + 2 * d * kv
        attn += (self.d_attn + 2 * kv if self.qkv_bias else 0) + (d if self.out_bias else 0)
        attn += 2 * self.d_attn if self.qk_norm != "none" else 0
        n_lin = 3 if self.gated_ff else 2
        ff_biases = (n_lin - 1) * f + d if self.ff_bias else 0
        ff = n_lin * d * f + ff_biases if f else 0  # d_ff 0: attention-only (an upper bound still)
        norm = 2 * d if self.norm_kind == "layernorm" else d  # RMSNorm: a scale, no shift
        norm *= 2 if self.output_norms else 1
        if self.shape is Shape.ENCODER_ONLY:  # one stack; embeddings, types, their norm, the MLM head
            extra = self.type_vocab_size * d + 2 * d + (d * d + d + 2 * d if self.mlm_head else 0)
            return self.n_encoder_layers * (attn + ff + 2 * norm) + 2 * v * d + self.max_len * d + v + extra
        enc = self.n_encoder_layers if self.shape is Shape.ENCODER_DECODER else 0
        layers = enc * (attn + ff + 2 * norm) + self.n_decoder_layers * (2 * attn + ff + 3 * norm)
        return layers + 3 * v * d + self.max_len * d * 2 + v + (v if self.head_bias else 0)


@dataclass(frozen=True)
class TaskConfig:
    """What the model learns: an algorithmic task on digit strings, or char-lm."""

    name: str = "copy"
    min_len: int = 1
    max_len: int = 10
    max_digits: int = 3
    text: str | None = None
    block_size: int = 64
    val_fraction: float = 0.1
    # modular-addition: (a op b) mod p over every pair; train_fraction of the pairs train.
    p: int = 59
    train_fraction: float = 0.5
    operation: str = "add"

    def __post_init__(self) -> None:
        _choice("task.name", self.name, TASKS)
        self._check_modular()
        for name in ("min_len", "max_len", "max_digits", "block_size"):
            _positive(f"task.{name}", getattr(self, name))
        if self.min_len > self.max_len:
            raise field_error(
                "task.min_len", f"{self.min_len} is greater than max_len={self.max_len}"
            )
        if not 0.0 < self.val_fraction < 1.0:
            raise field_error("task.val_fraction", f"must be in (0, 1), got {self.val_fraction}")
        if self.name == "induction" and 2 * self.max_len > self.block_size:
            # induction: a prefix of min_len..max_len tokens and its repeat fill block_size
            raise field_error(
                "task.max_len", f"2 x {self.max_len} does not fit block_size={self.block_size}"
            )

    def _check_modular(self) -> None:
        """The checks of modular-addition's settings (p, train_fraction, operation)."""
        _choice("task.operation", self.operation, MODULAR_OPERATIONS)
        if not 2 <= self.p <= MAX_MODULUS:
            raise field_error("task.p", f"must be in [2, {MAX_MODULUS}], got {self.p}")
        if not 0.0 < self.train_fraction < 1.0:
            raise field_error("task.train_fraction", f"must be in (0, 1), got {self.train_fraction}")
        if self.operation == "divide" and any(self.p % k == 0 for k in range(2, math.isqrt(self.p) + 1)):
            raise field_error("task.p", f"divide needs a prime p (every b != 0 invertible), got {self.p}")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation, evaluation and run-keeping settings."""

    steps: int = 2000
    batch_size: int = 64
    micro_batch: int | None = None
    lr: float = 1e-3
    warmup_steps: int = 100
    schedule: str = "cosine"
    min_lr_ratio: float = 0.1
    # "time": the decay ends when max_seconds does (or at train.steps, if that comes first).
    decay_over: str = "steps"
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    clip: float = 1.0
    label_smoothing: float = 0.0
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"
    fused_attention: bool = True
    compile: bool = False
    threads: int = 0
    eval_every: int = 100
    eval_examples: int = 500
    target_accuracy: float | None = None
    checkpoint_seconds: float = 10.0
    max_seconds: float | None = None
    history: bool = True  # weight snapshots at steps 1, 2, 4, ... and every evaluation (history.py)
    history_every: int | None = None  # instead: a snapshot every N steps
    # Every step on the task's whole training set (batch_size unused); needs a finite one.
    full_batch: bool = False
    # The optimizer (OPTIMIZERS). With muon, train.lr, betas and eps are the AdamW
    # groups' (embeddings, norms, biases, head) and muon_lr the hidden matrices' peak
    # rate; the schedule scales both alike. weight_decay applies to matrices in both.
    optimizer: str = "adamw"
    muon_lr: float = 0.02
    muon_momentum: float = 0.95  # Nesterov momentum of the Muon groups

    def __post_init__(self) -> None:
        _choice("train.optimizer", self.optimizer, OPTIMIZERS)
        if not (self.muon_lr > 0 and math.isfinite(self.muon_lr)):
            raise field_error("train.muon_lr", f"must be a positive number, got {self.muon_lr}")
        if not 0.0 <= self.muon_momentum < 1.0:
            raise field_error("train.muon_momentum", f"must be in [0, 1), got {self.muon_momentum}")
        _choice("train.schedule", self.schedule, SCHEDULES)
        _choice("train.decay_over", self.decay_over, DECAY_CLOCKS)
        if not isinstance(self.history, bool):  # YAML reads on/off as booleans
            raise field_error("train.history", f"on or off, got {show(self.history)}")
        if not isinstance(self.full_batch, bool):
            raise field_error("train.full_batch", f"true or false, got {show(self.full_batch)}")
        if self.history_every is not None:
            _positive("train.history_every", self.history_every)
        _choice("train.device", self.device, DEVICES)
        _choice("train.precision", self.precision, PRECISIONS)
        for name in ("steps", "batch_size", "eval_every", "eval_examples"):
            _positive(f"train.{name}", getattr(self, name))
        if self.micro_batch is not None:
            _positive("train.micro_batch", self.micro_batch)
            if self.batch_size % self.micro_batch:
                raise field_error(
                    "train.micro_batch",
                    f"{self.micro_batch} does not divide batch_size={self.batch_size}",
                )
        for name in ("warmup_steps", "weight_decay", "clip", "threads"):
            if getattr(self, name) < 0:
                raise field_error(f"train.{name}", f"must be >= 0, got {getattr(self, name)}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise field_error("train.lr", f"must be a positive number, got {self.lr}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise field_error("train.min_lr_ratio", f"must be in [0, 1], got {self.min_lr_ratio}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise field_error(
                "train.label_smoothing", f"must be in [0, 1), got {self.label_smoothing}"
            )
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise field_error("train.betas", f"two numbers in [0, 1), got {list(self.betas)}")
        if self.eps <= 0:
            raise field_error("train.eps", f"must be > 0, got {self.eps}")
        if self.target_accuracy is not None and not 0.0 < self.target_accuracy <= 1.0:
            raise field_error(
                "train.target_accuracy", f"must be in (0, 1], got {self.target_accuracy}"
            )
        if self.checkpoint_seconds <= 0:
            raise field_error(
                "train.checkpoint_seconds", f"must be > 0, got {self.checkpoint_seconds}"
            )
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise field_error("train.max_seconds", f"must be > 0, got {self.max_seconds}")
        if self.decay_over == "time" and self.max_seconds is None:
            raise field_error("train.decay_over", "time needs a time limit (train.max_seconds) to decay over")
