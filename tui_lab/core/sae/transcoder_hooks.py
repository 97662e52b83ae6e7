"""A transcoder's hook names between the lab and the files of circuit-tracer and SAELens.

The lab names its hook points as TransformerLens does, except where TransformerLens
splits one: its ``ln2.hook_normalized`` is the norm's output *before* the weight and
bias, the lab's is after them (the MLP's real input; the lab's norms have no hook
before their affine). circuit-tracer 0.5 resolves a config.yaml hook by walking the
block's attributes in TransformerLens (its ``ReplacementMLP`` adds ``mlp.hook_in``,
the MLP's input, and ``mlp.hook_out``), and its gpt2 sets read ``mlp.hook_in``;
SAELens's ``HookedSAETransformer`` adds the same ``mlp.hook_in``. So the lab writes
``mlp.hook_in`` for its ``ln2.hook_normalized``, and reads each file name as the lab
hook carrying the same activation, refusing one it cannot match exactly:

    file name             lab hook              the activation
    mlp.hook_in           ln2.hook_normalized   the MLP's input (after the norm's affine)
    hook_mlp_in           hook_resid_mid        the norm's input (TransformerLens's split
                                                copy; a parallel block has none in the lab)
    mlp.hook_out          hook_mlp_out          the MLP's output (refused for a model with a
                                                norm after its MLP: see ``check_plain_mlp``)
    hook_resid_pre|mid|post, hook_attn_out, hook_mlp_out: the same in both
    ln2.hook_normalized   refused               the norm's output before its weight and bias

``hook_mlp_out`` is written as it is: TransformerLens's, like the lab's, comes after
any norm that follows the MLP (Gemma-2's ``ln2_post``), where ``mlp.hook_out`` does not.
"""

from __future__ import annotations

from tui_lab.core.sae.errors import SAEError

LAB_TO_FILE = {"ln2.hook_normalized": "mlp.hook_in"}
SAME_IN_BOTH = ("hook_resid_pre", "hook_resid_mid", "hook_resid_post", "hook_attn_out", "hook_mlp_out")
FILE_TO_LAB = {"mlp.hook_in": "ln2.hook_normalized", "hook_mlp_in": "hook_resid_mid", "mlp.hook_out": "hook_mlp_out",
               **{name: name for name in SAME_IN_BOTH}}
# The hook a model with a norm after each MLP fires there (the lab's hook_mlp_out follows it).
POST_MLP_NORM = "ln2_post.hook_normalized"


def file_hook(lab_hook: str) -> str:
    """The name circuit-tracer and SAELens resolve to the activation of the lab's ``lab_hook``."""
    return LAB_TO_FILE.get(lab_hook, lab_hook)


def lab_hook(name: str, where: str) -> str:
    """The lab's hook (relative to a block) carrying what a file's ``name`` names there;
    SAEError (one line) for a name the lab has no exact match for."""
    if name in FILE_TO_LAB:
        return FILE_TO_LAB[name]
    if name == "ln2.hook_normalized":
        raise SAEError(f"{where}: names ln2.hook_normalized, which in TransformerLens is the norm's output before its "
                       "weight and bias; the lab has no hook there (its ln2.hook_normalized, after them, is "
                       "mlp.hook_in in circuit-tracer and SAELens)")
    raise SAEError(f"{where}: hook {name!r} has no exact match among the lab's hooks "
                   f"(it reads {', '.join(sorted(FILE_TO_LAB))})")


def check_plain_mlp(file_hooks: tuple[str, str], model_hooks: set[str], where: str) -> None:
    """Refuse ``mlp.hook_out`` for a model whose MLP output passes a norm before the lab's
    ``hook_mlp_out``: the lab has no hook between the MLP and that norm."""
    if "mlp.hook_out" in file_hooks and f"blocks.0.{POST_MLP_NORM}" in model_hooks:
        raise SAEError(f"{where}: names mlp.hook_out, the MLP's output before the model's post-MLP norm; the lab's "
                       "hook_mlp_out comes after that norm and it has no hook before it")
