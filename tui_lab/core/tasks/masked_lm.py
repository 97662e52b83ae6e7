"""Masked-language modelling (BERT's objective) on a text: fill in hidden characters.

The text is char-lm's (Python's help text, or a user's file, cleaned the same
way) and so are the windows: ``block_size`` characters from the training split.
Each batch hides characters by BERT's rule (``mask_tokens``):

- each position is *chosen* with probability 15%;
- of the chosen, 80% become the mask id, 10% a random character, 10% stay;
- the loss (and the accuracy) is taken on the chosen positions only: the
  others' targets are ``IGNORE``.

The metric is masked-token accuracy: the share of chosen positions whose
argmax is the original character (``scores_tokens``: evaluation reports it as
the run's accuracy, which ``train.target_accuracy`` reads). Validation masks
its windows with a fixed generator, so every evaluation scores the same
positions.

The vocabulary is char-lm's plus one id at the end, the mask (``⟨mask⟩``); a
typed ``_`` stands for it in fill-mask (``decoding/fill_mask.py``).

``MaskedText`` is the same task for a real encoder-only model opened from files
(BERT, DistilBERT, RoBERTa): its tokenizer, its mask token, its context.
"""

from __future__ import annotations

import random

import torch

from tui_lab.core.config.lab_config import TaskConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.tasks.base import IGNORE, Batch, as_shape, check_sequence_input
from tui_lab.core.tasks.char_lm import CharLMTask
from tui_lab.core.tasks.tokenized import TokenizedText, Tokenizer
from tui_lab.core.tasks.vocab import N_SPECIALS, PAD, TEXT_VOCAB, Vocab

# BERT's rule: the share of positions chosen, and of those the share masked and made random.
CHOOSE_P = 0.15
MASK_P = 0.8
RANDOM_P = 0.1
MASK_CHAR = "_"  # how a user types a mask for the lab's own models
MASK_LABEL = "⟨mask⟩"
_VAL_SEED = 1234  # validation's masking: the same positions at every evaluation


class MaskVocab(Vocab):
    """A character vocabulary with one more id after the characters: the mask."""

    @property
    def mask_id(self) -> int:
        return N_SPECIALS + len(self.chars)

    def __len__(self) -> int:
        return super().__len__() + 1

    def label(self, id: int) -> str:
        return MASK_LABEL if int(id) == self.mask_id else super().label(id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MaskVocab) and other.chars == self.chars

    def __hash__(self) -> int:
        return hash(("mask", self.chars))


MASK_VOCAB = MaskVocab(TEXT_VOCAB.chars)


def mask_tokens(
    ids: torch.Tensor,
    mask_id: int,
    random_ids: tuple[int, int],
    generator: torch.Generator | None = None,
    choose_p: float = CHOOSE_P,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking of ``ids`` (any shape): (inputs, targets).

    Each position is chosen with probability ``choose_p``; a chosen one becomes
    ``mask_id`` (80%), a random id in ``[random_ids[0], random_ids[1])`` (10%), or
    stays (10%). ``targets`` holds the original id at chosen positions and
    ``IGNORE`` everywhere else, so the loss reads nothing else.
    """
    u = torch.rand(ids.shape, generator=generator)  # which positions are chosen
    r = torch.rand(ids.shape, generator=generator)  # what a chosen one becomes
    chosen = u < choose_p
    masked = chosen & (r < MASK_P)
    randomised = chosen & (r >= MASK_P) & (r < MASK_P + RANDOM_P)
    noise = torch.randint(random_ids[0], random_ids[1], ids.shape, generator=generator, dtype=ids.dtype)
    inputs = torch.where(masked, torch.full_like(ids, mask_id), ids)
    inputs = torch.where(randomised, noise, inputs)
    targets = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    return inputs, targets


class MaskedLMTask(CharLMTask):
    """Masked characters of a text (default: Python's help text); see the module docstring."""

    vocab = MASK_VOCAB
    is_lm = True  # no (input, answer) pairs: evaluation reads validation windows
    scores_tokens = True  # the accuracy of the chosen positions is the run's accuracy

    def __init__(self, config: TaskConfig) -> None:
        super().__init__(config)
        self.mask_id = MASK_VOCAB.mask_id
        # A random replacement is an ordinary character (no special, no mask).
        self.random_ids = (N_SPECIALS, MASK_VOCAB.mask_id)

    def _masked(self, windows: torch.Tensor, generator: torch.Generator) -> Batch:
        clean = windows.long()  # (B, block)
        inputs, targets = mask_tokens(clean, self.mask_id, self.random_ids, generator)
        n_tokens = int((targets != IGNORE).sum())
        return Batch(src=None, tgt_in=inputs, tgt_out=targets, n_tokens=n_tokens)

    def batch(self, rng: random.Random, batch_size: int, arch: Shape | str = Shape.ENCODER_ONLY) -> Batch:
        """``batch_size`` random windows of the training split, masked by BERT's rule."""
        if as_shape(arch) is not Shape.ENCODER_ONLY:
            raise ValueError("masked-lm trains encoder-only models")
        g = torch.Generator().manual_seed(rng.getrandbits(63))
        starts = torch.randint(0, len(self._train_in), (batch_size,), generator=g)  # (B,)
        return self._masked(self._train_in.index_select(0, starts), g)

    def val_batches(self, batch_size: int, max_batches: int) -> list[Batch]:
        """Validation windows evenly spread over the split, masked the same way every time."""
        block = self.config.block_size
        last = len(self._val_in) - 1
        count = max(1, min(last // block + 1, batch_size * max_batches))
        starts = torch.zeros(1, dtype=torch.long) if count == 1 else torch.linspace(0, last, count).round().long()
        g = torch.Generator().manual_seed(_VAL_SEED)
        return [self._masked(self._val_in.index_select(0, chunk), g) for chunk in starts.split(batch_size)]

    def collate(self, pairs: list[tuple[str, str]], arch: Shape | str = Shape.ENCODER_ONLY) -> Batch:
        """A PAD-padded batch of typed texts (``_`` for each mask) and the characters behind
        their masks, in order (``held_out``'s pairs): the loss only at the masks."""
        if as_shape(arch) is not Shape.ENCODER_ONLY:
            raise ValueError("masked-lm trains encoder-only models")
        if not pairs:
            raise ValueError("collate: no examples")
        width = max(len(text) for text, _ in pairs)
        tgt_in = torch.full((len(pairs), width), PAD, dtype=torch.long)
        tgt_out = torch.full((len(pairs), width), IGNORE, dtype=torch.long)
        for row, (text, answer) in enumerate(pairs):
            ids = [self.mask_id if c == MASK_CHAR else i for c, i in zip(text, self.vocab.encode(text), strict=True)]
            tgt_in[row, : len(ids)] = torch.tensor(ids)
            at = [j for j, c in enumerate(text) if c == MASK_CHAR]
            for j, char in zip(at, self.vocab.encode(answer), strict=False):
                tgt_out[row, j] = char
        return Batch(None, tgt_in, tgt_out, int((tgt_out != IGNORE).sum()), examples=list(pairs))

    def solve(self, input_text: str) -> str:
        """No single reference: the text's own characters are the answers of its windows."""
        return ""

    def validate_input(self, text: str) -> str | None:
        """Text of the vocabulary's characters with ``_`` for each mask, within the block."""
        return check_sequence_input(
            text.replace(MASK_CHAR, " "), TEXT_VOCAB, self.config.block_size,
            f"type text with {MASK_CHAR} for each character to fill", "type printable ASCII",
        )

    def examples_for_display(self, n: int = 5, seed: int = 0) -> list[str]:
        """Openings of lines of the text with a few letters masked."""
        rng = random.Random(f"display-mask:{seed}")
        out = []
        for line in super().examples_for_display(n, seed):
            chars = list(line)
            letters = [i for i, c in enumerate(chars) if c.isalpha()]
            for i in rng.sample(letters, min(len(letters), max(1, len(chars) // 8))):
                chars[i] = MASK_CHAR
            out.append("".join(chars))
        return out

    def held_out(self, n: int, seed: int) -> list[tuple[str, str]]:
        """Masked openings and the characters behind their masks (for display; evaluation
        reads ``val_batches``)."""
        rng = random.Random(f"held-out:{seed}")
        pairs = []
        for _ in range(n):
            prompt, more = self._pair_at(self.val_text, rng)
            text = prompt + more
            i = rng.randrange(len(text))
            pairs.append((text[:i] + MASK_CHAR + text[i + 1 :], text[i]))
        return pairs


# Prompts the Decode pane offers for a real encoder-only model; {mask} is its mask token.
MASKED_PROMPTS = (
    "The capital of France is {mask}.",
    "The cat sat on the {mask}.",
    "Once upon a time, there was a little {mask}.",
    "She went to the {mask} to buy some bread.",
    "one two three {mask} five six",
)


class MaskedText(TokenizedText):
    """The task of a real encoder-only model (BERT...): fill its mask tokens in a text.

    ``mask_token`` is how a mask is typed (``[MASK]``, ``<mask>``), ``mask_id`` its
    id; ``special_ids`` are the tokens the tokenizer adds around a text
    (``[CLS]``/``[SEP]``, ``<s>``/``</s>``), left out of a filled text.
    """

    name = "masked-lm"

    def __init__(
        self, tokenizer: Tokenizer, context: int, mask_token: str, mask_id: int, special_ids: set[int]
    ) -> None:
        super().__init__(tokenizer, context)
        self.mask_token = mask_token
        self.mask_id = mask_id
        self.special_ids = special_ids - {mask_id}

    @property
    def eos_id(self) -> int | None:
        return None  # nothing is continued

    def validate_input(self, text: str) -> str | None:
        """One line when ``text`` (with the tokens the tokenizer adds) does not fit the context."""
        n = len(self.tokenizer.encode(text))
        if n > self.context:
            return f"the input is {n:,} tokens; this model reads at most {self.context:,}: shorten it"
        return None

    def examples_for_display(self, n: int = 5, seed: int = 0) -> list[str]:
        return [p.format(mask=self.mask_token) for p in MASKED_PROMPTS[:n]]

    def fill_text(self, ids: list[int]) -> str:
        """The text of ``ids`` without the added tokens (an open mask shown as typed)."""
        return self.tokenizer.decode([i for i in ids if i not in self.special_ids])
