"""The lab's tasks' base: ``TaskBase``, ``Batch`` and how rows of ids become batches.

Every task makes examples, the reference answer for any input, input checks
for the UI, and training batches for either architecture:

- encoder-decoder: ``src`` = input ids (PAD-padded), ``tgt_in`` = BOS + answer
  (PAD-padded), ``tgt_out`` = answer + EOS (padded with ``IGNORE``);
- decoder-only: the sequence ``input SEP answer EOS``; ``tgt_in`` = sequence[:-1],
  ``tgt_out`` = sequence[1:] with every position that does not predict the
  answer or EOS set to ``IGNORE`` (so the loss teaches answering, not
  guessing the random input).

``IGNORE`` is -100, the default ``ignore_index`` of ``F.cross_entropy``.
Batches are built on the CPU; the training loop moves them with ``Batch.to``.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass

import torch

from tui_lab.core.config.lab_config import ARCHS, TaskConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.tasks.vocab import BOS, EOS, PAD, SEP, Vocab

IGNORE = -100

PAD_CHAR = chr(PAD)
BOS_CHAR = chr(BOS)
EOS_CHAR = chr(EOS)
SEP_CHAR = chr(SEP)
_UTF32_NATIVE = "utf-32-le" if sys.byteorder == "little" else "utf-32-be"


@dataclass
class Batch:
    """One training or evaluation batch (CPU tensors until ``to`` moves them).

    ``n_tokens`` counts the target positions that are not ``IGNORE``: the
    loss is averaged over exactly these, and tokens/s is reported from them.
    """

    src: torch.Tensor | None  # (B, S) long, PAD-padded; None for decoder-only
    tgt_in: torch.Tensor  # (B, T) long, PAD-padded
    tgt_out: torch.Tensor  # (B, T) long, IGNORE where no loss is taken
    n_tokens: int
    # The (input, answer) pairs the rows were built from (None for char-lm
    # windows): lets the trainer note which inputs it has seen without
    # generating examples one by one.
    examples: list[tuple[str, str]] | None = None

    @property
    def size(self) -> int:
        """Number of sequences in the batch."""
        return self.tgt_in.shape[0]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """The same batch on ``device``."""
        return Batch(
            src=None if self.src is None else self.src.to(device, non_blocking=non_blocking),
            tgt_in=self.tgt_in.to(device, non_blocking=non_blocking),
            tgt_out=self.tgt_out.to(device, non_blocking=non_blocking),
            n_tokens=self.n_tokens,
            examples=self.examples,
        )


def id_rows_to_tensor(rows: list[str], width: int) -> torch.Tensor:
    """(B, width) long tensor from id strings (``Vocab.id_string``), right-padded with PAD.

    One join and one buffer conversion for the whole batch: far cheaper than
    ``torch.tensor`` over nested lists of Python ints.
    """
    flat = "".join([r.ljust(width, PAD_CHAR) for r in rows])
    buf = bytearray(flat.encode(_UTF32_NATIVE))  # one int32 per id, in machine byte order
    return torch.frombuffer(buf, dtype=torch.int32).view(len(rows), width).long()


def as_shape(arch: Shape | str) -> Shape:
    """``arch`` as a ``Shape``: a member as it is, a preset's spelling (``model.arch``) checked."""
    if isinstance(arch, Shape):
        return arch
    if arch not in ARCHS:
        raise ValueError(f"arch: {arch!r} is not one of {', '.join(ARCHS)}")
    return Shape(arch)


class TaskBase:
    """The lab's own tasks (a ``Task``, ``protocol.py``) and what training asks of them; see the
    module docstring for batch layout."""

    name: str
    vocab: Vocab
    is_lm: bool = False
    truncates_prompt = True  # a prompt longer than the context keeps its end
    banned_ids: tuple[int, ...] = ()
    decoder_start_id = BOS
    scores_tokens = False  # evaluation reports the scored tokens' accuracy as the run's (induction, masked-lm)
    exact_from_forward = False  # a fixed one-token answer: the teacher-forced argmax is the greedy one

    @property
    def eos_id(self) -> int | None:
        """The id that ends an answer: EOS, or None for a language model (it runs to its length)."""
        return None if self.is_lm else EOS

    def __init__(self, config: TaskConfig) -> None:
        self.config = config
        self.name = config.name

    # -- examples ---------------------------------------------------------------
    def sample_input(self, rng: random.Random) -> str:
        """One random input, drawn only from ``rng`` (so a seed reproduces it)."""
        raise NotImplementedError

    def sample_inputs(self, rng: random.Random, n: int) -> list[str]:
        """``n`` random inputs; tasks override this with one draw for the whole batch."""
        return [self.sample_input(rng) for _ in range(n)]

    def solve(self, input_text: str) -> str:
        """The reference answer for ``input_text`` (which must pass ``validate_input``)."""
        raise NotImplementedError

    def example(self, rng: random.Random) -> tuple[str, str]:
        """A random ``(input, answer)`` pair."""
        text = self.sample_input(rng)
        return text, self.solve(text)

    def validate_input(self, text: str) -> str | None:
        """None if the model can be asked ``text``, else a one-line reason."""
        raise NotImplementedError

    def examples_for_display(self, n: int = 5, seed: int = 0) -> list[str]:
        """A few inputs to offer in the UI: the tutorials' classics, then random ones."""
        out = [s for s in self._classic_inputs() if self.validate_input(s) is None][:n]
        rng = random.Random(f"display:{seed}")
        for _ in range(50 * n):
            if len(out) >= n:
                break
            s = self.sample_input(rng)
            if s not in out:
                out.append(s)
        return out

    def _classic_inputs(self) -> list[str]:
        return []

    def held_out(self, n: int, seed: int) -> list[tuple[str, str]]:
        """``n`` evaluation examples, distinct while the task has that many inputs.

        The generator is seeded from a string built on ``seed``, so even with
        the training seed it never replays the training stream (which uses
        ``random.Random(seed)``).
        """
        rng = random.Random(f"held-out:{seed}")
        space = self.input_space_size()
        want = n if space is None else min(n, space)
        seen: dict[str, str] = {}
        # Inputs are not drawn uniformly from the space, so collecting a small
        # space completely takes a few passes; the cap keeps this bounded.
        for _ in range(max(50 * n, 10_000)):
            if len(seen) >= want:
                break
            text, answer = self.example(rng)
            seen.setdefault(text, answer)
        pairs = list(seen.items())
        if not pairs:
            return []
        # A space smaller than n: repeat rather than return fewer than asked.
        return [pairs[i % len(pairs)] for i in range(n)]

    def input_space_size(self) -> int | None:
        """How many distinct inputs exist (None: effectively unbounded)."""
        return None

    def training_set(self) -> list[tuple[str, str]] | None:
        """The whole training set, for a task that has a finite one (None: drawn at random)."""
        return None

    # -- batches ----------------------------------------------------------------
    def batch(self, rng: random.Random, batch_size: int, arch: Shape | str) -> Batch:
        """A random training batch for ``arch``."""
        solve = self.solve
        return self.collate([(s, solve(s)) for s in self.sample_inputs(rng, batch_size)], arch)

    def collate(self, pairs: list[tuple[str, str]], arch: Shape | str) -> Batch:
        """A batch for the given ``(input, answer)`` pairs (unknown characters become UNK).

        Rows are assembled as id strings, with PAD standing in for "no loss" in
        ``tgt_out`` until one ``masked_fill`` turns it into ``IGNORE`` (answers
        never contain PAD). ``tgt_in`` and ``tgt_out`` share one conversion.
        """
        shape = as_shape(arch)
        if not pairs:
            raise ValueError("collate: no examples")
        ids = self.vocab.id_string
        inputs = [ids(i) for i, _ in pairs]
        answers = [ids(a) for _, a in pairs]
        if shape is Shape.ENCODER_DECODER:
            src = id_rows_to_tensor(inputs, max(map(len, inputs)))  # (B, S)
            rows_in = [BOS_CHAR + a for a in answers]
            rows_out = [a + EOS_CHAR for a in answers]
        else:
            src = None
            # Sequence: input SEP answer EOS. tgt_out[j] predicts sequence[j+1]:
            # the first len(input) of those are the input's tail and SEP, no loss.
            rows_in = [i + SEP_CHAR + a for i, a in zip(inputs, answers, strict=True)]
            rows_out = [
                PAD_CHAR * len(i) + a + EOS_CHAR for i, a in zip(inputs, answers, strict=True)
            ]
        both = id_rows_to_tensor(rows_in + rows_out, max(map(len, rows_out)))  # (2B, T)
        tgt_in, tgt_out = both.view(2, len(pairs), -1)  # (B, T) each
        tgt_out = tgt_out.masked_fill(tgt_out == PAD, IGNORE)
        n_tokens = sum(map(len, answers)) + len(pairs)  # answer + EOS per row
        return Batch(src, tgt_in, tgt_out, n_tokens, examples=list(pairs))


def quoted(chars: list[str]) -> str:
    """Up to three offending characters for a message, quoted so spaces show."""
    more = ", ..." if len(chars) > 3 else ""
    return ", ".join(repr(c) for c in chars[:3]) + more


def outside(chars: list[str], vocab: Vocab) -> str:
    """'is/are outside the vocabulary', or 'not allowed here' for vocabulary characters."""
    verb = "is" if len(chars) == 1 else "are"
    if any(c not in vocab for c in chars):
        return f"{verb} outside the vocabulary"
    return f"{verb} not allowed here"


def check_sequence_input(text: str, vocab: Vocab, block: int, empty_hint: str, chars_hint: str) -> str | None:
    """Why a sequence-task input (char-lm, induction) cannot be decoded, or None.

    ``empty_hint`` follows "empty input: ", ``chars_hint`` follows the characters
    outside the vocabulary; the length limit is the model's block.
    """
    if not text:
        return f"empty input: {empty_hint}"
    unknown = vocab.unknown_chars(text)
    if unknown:
        return f"{quoted(unknown)} {outside(unknown, vocab)}: {chars_hint}"
    if len(text) > block:
        return f"too long: {len(text)} characters; the model sees at most {block}"
    return None
