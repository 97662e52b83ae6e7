"""A clean / corrupted pair of inputs, two answers, and the metric patching reads.

Activation patching asks which activations carry the difference between two
runs of the model on inputs of the same token length: a **clean** input whose
right answer the model gives (``answer``), and a **corrupted** one that makes
it lean to another token (``wrong``). The metric is the logit difference
``logit[answer] - logit[wrong]`` at the answer's position; ``normalise`` maps it
so that 0 is the corrupted run and 1 the clean run (TransformerLens's IOI demo).

Where the answer is read, by the model's shape:

- decoder-only: the last position of the input;
- encoder-only: the mask's position (the input holds one mask token);
- encoder-decoder: the inputs are the source; the decoder reads ``target``
  (its start token, then a prefix of the answer, the same in both runs) and the
  answer is its next token, at the decoder's last position.

Ready-made pairs (``ready_pair``):

- ``ioi``, for models opened from files: "When Mary and John went to the store,
  John gave a drink to" -> " Mary" / " John", the names swapped for the
  corruption (Wang et al. 2022);
- ``divergence``, for encoder-decoders (a translator, the lab's copy or
  reverse runs): the two inputs greedily decoded; ``target`` is what both
  outputs share at the start, and the answers are the first tokens where they
  part;
- ``task``, for the lab's runs: a pair from the run's own task. Induction: a
  random block, then the start of its repeat; the corruption changes the first
  copy, so the answer (the repeated token) can no longer be read off it and the
  wrong answer is the token the changed copy would predict (the answer and the
  wrong one sit at the same position, so it tests what is copied, not where the
  head looks). ``induction-key``: the same block, the corruption moving the
  matching token's earlier copy two places on, so the head looks elsewhere and
  every token it could copy stays put (it tests the keys). A decoder-only
  sequence task (copy, reverse, sort, addition): two inputs of one length whose
  answers start with different tokens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch
from torch import Tensor

from tui_lab.core.config.shape import Shape
from tui_lab.core.errors import LabError
from tui_lab.core.tasks.base import TaskBase
from tui_lab.core.tasks.masked_lm import MaskedLMTask, MaskedText
from tui_lab.core.tasks.protocol import Vocabulary
from tui_lab.core.tasks.tokenized import TokenizedText, TokenVocab
from tui_lab.core.tasks.translation import Translation
from tui_lab.core.tasks.vocab import Vocab

if TYPE_CHECKING:
    from tui_lab.core.opening.model_in_hand import ModelInHand


class PatchError(LabError):
    """Input patching cannot take (lengths, answers, sites, model kinds); one line."""


@dataclass(frozen=True)
class PatchPair:
    """Token ids of the clean and corrupted inputs (same length), and the two answer ids."""

    clean: list[int]
    corrupt: list[int]
    answer: int
    wrong: int
    name: str = "custom"
    target: tuple[int, ...] = ()  # an encoder-decoder's decoder input (start token first)
    position: int = -1  # where the answer is read: the last position, or the mask's

    def __post_init__(self) -> None:
        if len(self.clean) != len(self.corrupt):
            raise PatchError(
                f"the clean input is {len(self.clean)} tokens and the corrupted one "
                f"{len(self.corrupt)}: patching needs the same length"
            )
        if not self.clean:
            raise PatchError("empty input: give some text")

    @property
    def length(self) -> int:
        return len(self.clean)

    def ids(self, device: torch.device | str = "cpu") -> tuple[Tensor, Tensor]:
        """(1, T) clean and corrupted ids."""
        return (
            torch.tensor([self.clean], device=device),
            torch.tensor([self.corrupt], device=device),
        )

    def target_ids(self, rows: int = 1, device: torch.device | str = "cpu") -> Tensor | None:
        """(rows, S) decoder input of an encoder-decoder pair; None for one stack."""
        return torch.tensor([list(self.target)] * rows, device=device) if self.target else None


def logit_diff(logits: Tensor, answer: int, wrong: int | None, position: int = -1) -> Tensor:
    """(B,) ``logit[answer] - logit[wrong]`` at ``position`` (the answer's logit alone
    when ``wrong`` is None)."""
    last = logits[:, position].float()  # (B, V)
    return last[:, answer] if wrong is None else last[:, answer] - last[:, wrong]


@dataclass(frozen=True)
class Metric:
    """The clean and corrupted runs' logit differences; ``normalise``: 0 corrupted, 1 clean."""

    clean: float
    corrupt: float

    def normalise(self, value: Tensor) -> Tensor:
        span = self.clean - self.corrupt
        if abs(span) < 1e-12:
            return torch.zeros_like(value)
        return (value - self.corrupt) / span


@runtime_checkable
class TargetTokenizer(Protocol):
    """A translator's tokenizer, which spells the decoder's side its own way (Marian's)."""

    def encode_target(self, text: str) -> list[int]: ...


def _vocab(model: ModelInHand) -> Vocabulary:
    vocab: Vocabulary = model.task.vocab
    return vocab


def _bos_id(model: ModelInHand) -> int | None:
    """A real tokenizer's BOS id (the lab's own vocabularies put none before a text)."""
    vocab = _vocab(model)
    return vocab.tokenizer.bos_id if isinstance(vocab, TokenVocab) else None


def _lab_task(model: ModelInHand) -> TaskBase:
    """The model's task when it is one of the lab's own (examples of its own to draw from)."""
    task = model.task
    if not isinstance(task, TaskBase):
        raise PatchError(f"{task.name}: a pair from the task's own examples needs a lab task")
    return task


def encode_text(model: ModelInHand, text: str) -> list[int]:
    """``text``'s ids as the model reads it (with the special tokens its tokenizer adds)."""
    ids = list(_vocab(model).encode(text))
    if not ids:
        raise PatchError("empty input: give some text")
    return ids


def _added_ids(model: ModelInHand) -> set[int]:
    """The ids an encoder-only model's tokenizer puts around every text (none for the rest)."""
    if model_shape(model) is not Shape.ENCODER_ONLY:
        return set()
    try:
        return set(_vocab(model).encode(""))
    except LabError:
        return set()


def single_token(model: ModelInHand, text: str, what: str = "answer") -> int:
    """The one token id of ``text`` (a tokenizer's leading BOS left out; an
    encoder-decoder's answer as its decoder writes it); PatchError naming the pieces
    when it is more or less than one token."""
    vocab = _vocab(model)
    if model_shape(model) is Shape.ENCODER_DECODER:
        ids = list(decoder_input(model, text)[1:])
    else:
        ids = list(vocab.encode(text))
    bos = _bos_id(model)
    if len(ids) > 1 and bos is not None and ids[0] == bos:
        ids = ids[1:]
    added = _added_ids(model)  # an encoder's [CLS] and [SEP] around every text
    if len(ids) > 1 and added:
        ids = [i for i in ids if i not in added]
    if len(ids) != 1:
        pieces = " ".join(repr(vocab.label(int(i))) for i in ids) or "nothing"
        raise PatchError(f"the {what} {text!r} is {len(ids)} tokens ({pieces}): give one token")
    return int(ids[0])


def make_pair(model: ModelInHand, clean: str, corrupt: str, answer: str, wrong: str,
              target: str | None = None) -> PatchPair:
    """A pair from text: the two inputs (same token length) and one-token answers;
    ``target``: an encoder-decoder's decoder prefix (none: its start token alone)."""
    shape = model_shape(model)
    if target is not None and shape is not Shape.ENCODER_DECODER:
        raise PatchError("--target is the decoder's start of an encoder-decoder; this model has one stack")
    if shape is Shape.ENCODER_ONLY:
        a, c = masked_ids(model, clean), masked_ids(model, corrupt)
    else:
        a, c = encode_text(model, clean), encode_text(model, corrupt)
    if len(a) != len(c):  # before the answers: the lengths are the first thing to fix
        return PatchPair(a, c, 0, 0)  # raises, naming both lengths
    answers = single_token(model, answer), single_token(model, wrong, "wrong answer")
    if shape is Shape.ENCODER_ONLY:
        return PatchPair(a, c, *answers, position=mask_position(model, a, c))
    if shape is Shape.ENCODER_DECODER:
        return PatchPair(a, c, *answers, target=decoder_input(model, target or ""))
    return PatchPair(a, c, *answers)


def single_input(model: ModelInHand, text: str, target: str | None = None) -> PatchPair:
    """One input read as patching reads it (causal tracing's): its ids, where the answer
    is read (an encoder-only model's mask), an encoder-decoder's decoder input; the
    answers are left unset (0)."""
    shape = model_shape(model)
    if target is not None and shape is not Shape.ENCODER_DECODER:
        raise PatchError("--target is the decoder's start of an encoder-decoder; this model has one stack")
    if shape is Shape.ENCODER_ONLY:
        ids = masked_ids(model, text)
        return PatchPair(ids, ids, 0, 0, position=mask_position(model, ids, ids))
    ids = encode_text(model, text)
    if shape is Shape.ENCODER_DECODER:
        return PatchPair(ids, ids, 0, 0, target=decoder_input(model, target or ""))
    return PatchPair(ids, ids, 0, 0)


def model_shape(model: ModelInHand) -> Shape:
    """The model's shape, which says where patching reads the answer (the module docstring)."""
    return model.shape


def masked_ids(model: ModelInHand, text: str) -> list[int]:
    """An encoder-only model's ids of ``text``, its typed mask as the mask id (one line if none)."""
    from tui_lab.core.decoding.fill_mask import encode_masked

    try:
        return encode_masked(model.task, text)
    except LabError as exc:
        raise PatchError(str(exc)) from None


def mask_position(model: ModelInHand, clean: list[int], corrupt: list[int]) -> int:
    """The one mask's position, the same in both inputs; PatchError otherwise."""
    task = model.task
    if not isinstance(task, (MaskedLMTask, MaskedText)):
        raise PatchError(f"{task.name} has no mask token: patching reads an encoder's answer at its mask")
    mask = int(task.mask_id)
    where = [i for i, t in enumerate(clean) if t == mask]
    if len(where) != 1:
        raise PatchError(f"the clean input has {len(where)} masks: patching reads the answer at one mask")
    if corrupt[where[0]] != mask or corrupt.count(mask) != 1:
        raise PatchError("the corrupted input needs its one mask where the clean input has it")
    return where[0]


def decoder_input(model: ModelInHand, prefix: str) -> tuple[int, ...]:
    """An encoder-decoder's decoder input: its start token, then ``prefix``'s target tokens."""
    task = model.task
    tokenizer = task.tokenizer if isinstance(task, (Translation, TokenizedText)) else None
    if not prefix:
        ids: list[int] = []
    elif isinstance(tokenizer, TargetTokenizer):
        ids = list(tokenizer.encode_target(prefix))
    else:
        ids = list(task.vocab.encode(prefix))
    eos = task.eos_id
    if ids and eos is not None and ids[-1] == eos:
        ids = ids[:-1]
    return (int(task.decoder_start_id), *ids)


IOI_CLEAN = "When Mary and John went to the store, John gave a drink to"
IOI_CORRUPT = "When John and Mary went to the store, Mary gave a drink to"


def ioi_pair(model: ModelInHand) -> PatchPair:
    """The IOI template: " Mary" over " John", names swapped for the corruption."""
    pair = make_pair(model, IOI_CLEAN, IOI_CORRUPT, " Mary", " John")
    return PatchPair(pair.clean, pair.corrupt, pair.answer, pair.wrong, "ioi")


def _letters(model: ModelInHand, needed: int, pair: str) -> list[str]:
    """The induction run's letters; PatchError when fewer than ``needed`` (the model reads no letters)."""
    vocab = _vocab(model)
    letters = list(vocab.chars) if isinstance(vocab, Vocab) else []
    if len(letters) < needed:
        raise PatchError(f"the {pair} pair needs a vocabulary of letters (an induction run)")
    return letters


def induction_pair(model: ModelInHand, block: int = 8, shown: int = 3, seed: int = 0) -> PatchPair:
    """A random block of ``block`` distinct tokens, then its first ``shown`` tokens
    again; the answer is the block's next token. The corruption replaces the first
    copy with other tokens, so the wrong answer is what that copy would predict."""
    letters = _letters(model, 2 * block, "induction")
    rng = random.Random(f"induction-pair:{seed}")
    picked = rng.sample(letters, 2 * block)
    first, other = picked[:block], picked[block:]
    clean = "".join(first) + "".join(first[:shown])
    corrupt = "".join(other) + "".join(first[:shown])
    return PatchPair(
        encode_text(model, clean), encode_text(model, corrupt),
        single_token(model, first[shown]), single_token(model, other[shown], "wrong answer"), "induction",
    )


def induction_key_pair(model: ModelInHand, block: int = 8, shown: int = 3, seed: int = 0) -> PatchPair:
    """The induction pair whose corruption moves where the induction head looks, not what it
    copies: a block of ``block`` distinct tokens, then its first ``shown`` again (the answer:
    the block's next token). In the corruption the last shown token's copy in the block moves
    two places on (a token from outside the block takes its place), so the token after it
    there is the wrong answer, and every token of the block stays where it was but those two.
    The difference reaches the answer only through the keys: what a previous-token head
    writes at the positions after the two changed ones, read by the induction head's key."""
    moved_to = shown + 1  # the index the matching token moves to (two places on from shown - 1)
    if not 1 <= shown < moved_to + 1 < block:
        raise PatchError(f"the induction-key pair needs 1 <= shown < block - 2, got block {block}, shown {shown}")
    letters = _letters(model, block + 1, "induction-key")
    rng = random.Random(f"induction-key-pair:{seed}")
    picked = rng.sample(letters, block + 1)
    first, outside = picked[:block], picked[block]
    moved = list(first)
    moved[shown - 1], moved[moved_to] = outside, first[shown - 1]
    repeat = "".join(first[:shown])
    return PatchPair(
        encode_text(model, "".join(first) + repeat), encode_text(model, "".join(moved) + repeat),
        single_token(model, first[shown]), single_token(model, first[moved_to + 1], "wrong answer"),
        "induction-key",
    )


def sequence_task_pair(model: ModelInHand, seed: int = 0, tries: int = 2000) -> PatchPair:
    """Two inputs of the task with one token length whose answers start differently,
    as a decoder-only model reads them (input then SEP); the answer's first token."""
    from tui_lab.core.tasks.vocab import SEP

    task, vocab = _lab_task(model), _vocab(model)
    rng = random.Random(f"task-pair:{seed}")
    first_in, first_out = task.example(rng)
    for _ in range(tries):  # a first input of a few tokens, where the task allows it
        if len(first_in) >= 3:
            break
        first_in, first_out = task.example(rng)
    a = [*vocab.encode(first_in), SEP]
    for _ in range(tries):
        text, out = task.example(rng)
        b = [*vocab.encode(text), SEP]
        if len(b) == len(a) and out and first_out and out[0] != first_out[0]:
            return PatchPair(a, b, vocab.encode(first_out)[0], vocab.encode(out)[0], task.name)
    raise PatchError(f"no pair of {task.name} inputs with one length and different answers")


def divergence_pair(model: ModelInHand, clean: str, corrupt: str, name: str) -> PatchPair | None:
    """An encoder-decoder's pair from two sources of one token length: both decoded
    greedily, ``target`` what the outputs share at the start, the answers the first
    tokens where they part; None when they never part."""
    from tui_lab.core.decoding.decode import generate

    a, c = encode_text(model, clean), encode_text(model, corrupt)
    if len(a) != len(c):
        return None
    first = generate(model.model, model.task, clean, capture=False).tokens
    second = generate(model.model, model.task, corrupt, capture=False).tokens
    k = next((i for i, (x, y) in enumerate(zip(first, second, strict=False)) if x != y), None)
    if k is None:
        return None
    start = int(model.task.decoder_start_id)
    return PatchPair(a, c, int(first[k]), int(second[k]), name, target=(start, *map(int, first[:k])))


TRANSLATION_PAIRS = (("The cat sat on the mat.", "The dog sat on the mat."),
                     ("The weather is nice today.", "The weather is bad today."),
                     ("She reads a book in the garden.", "He reads a book in the garden."))


def encoder_decoder_pair(model: ModelInHand, name: str, seed: int = 0, tries: int = 200) -> PatchPair:
    """A translator's pair from fixed sentences, or a lab task's from its own examples:
    the first two inputs of one length that the model answers differently."""
    if name == "translation":
        candidates = list(TRANSLATION_PAIRS)
    else:
        rng = random.Random(f"task-pair:{seed}")
        task = _lab_task(model)
        candidates = [(task.example(rng)[0], task.example(rng)[0]) for _ in range(tries)]
    for clean, corrupt in candidates:
        pair = divergence_pair(model, clean, corrupt, name)
        if pair is not None:
            return pair
    raise PatchError(f"no {name} pair: the model answers every pair of inputs tried alike "
                     "(give --clean, --corrupt, --answer and --wrong)")


def ready_pairs(model: ModelInHand) -> list[str]:
    """The names of the ready-made pairs this model can take."""
    shape = model_shape(model)
    if shape is Shape.ENCODER_ONLY:
        return []
    if shape is Shape.ENCODER_DECODER:
        return ["translation" if model.card is not None else model.task.name]
    if model.card is not None:
        return ["ioi"]
    name = model.task.name
    if name == "induction":
        return ["induction", "induction-key"]
    if not model.task.is_lm:
        return [name]
    return []


def ready_pair(model: ModelInHand, name: str | None = None) -> PatchPair:
    """A ready-made pair by name (None: the model's first); PatchError when it has none."""
    names = ready_pairs(model)
    if name is None:
        if not names:
            raise PatchError(
                "no ready-made pair for this task: give --clean, --corrupt, --answer and --wrong"
            )
        name = names[0]
    if name == "task" and names:
        name = names[0]
    if name == "ioi" and "ioi" in names:
        return ioi_pair(model)
    if name == "induction" and "induction" in names:
        return induction_pair(model)
    if name == "induction-key" and "induction-key" in names:
        return induction_key_pair(model)
    if name in names and model_shape(model) is Shape.ENCODER_DECODER:
        return encoder_decoder_pair(model, name)
    if name in names:
        return sequence_task_pair(model)
    offered = ", ".join(names) or "none"
    raise PatchError(f"no ready-made pair {name!r} for this model (offered: {offered})")
