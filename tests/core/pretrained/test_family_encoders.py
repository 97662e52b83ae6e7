"""BERT, DistilBERT and RoBERTa masked LMs against ``transformers`` on random-weight
``save_pretrained`` folders: logits, attention, top-5 fillers, parameter counts and
tokenization (tokenizer.json and the slow tokenizers' files); a bare encoder opens
for attention, params and hooks but cannot fill masks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from bench.hf_factory import save_masked_lm, write_slow_vocab
from tui_lab.core.decoding.decode import DecodeInputError
from tui_lab.core.decoding.fill_mask import fill_mask
from tui_lab.core.model.capture import capture_attention
from tui_lab.core.model.params import parameter_report
from tui_lab.core.opening.from_files import open_files

pytestmark = pytest.mark.usefixtures("no_network")
FAMILIES = ("bert", "distilbert", "roberta")
TEXTS = ("The cat sat on the mat.", "Once upon a time there was a little girl", "dogs, CATS and the sea!  x")


@pytest.fixture(scope="module", params=FAMILIES)
def saved(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Any]:
    import transformers

    folder = tmp_path_factory.mktemp(request.param)
    save_masked_lm(folder, request.param)
    reference = transformers.AutoModelForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    return request.param, folder, reference


def _masked(lab: Any) -> str:
    m = lab.task.mask_token
    return f"The cat sat on the {m}. Once upon a {m} there was"


def test_logits_and_attention_match(saved: tuple[str, Path, Any]) -> None:
    family, folder, reference = saved
    lab = open_files(str(folder))
    ids = lab.task.vocab.encode(_masked(lab))
    short = lab.task.vocab.encode("The dog sat.")
    pad = lab.model.pad_id
    rows = torch.tensor([ids, short + [pad] * (len(ids) - len(short))])  # right-padded second row
    mask = (torch.arange(len(ids))[None] < torch.tensor([[len(ids)], [len(short)]])).long()
    with torch.no_grad():
        want = reference(rows, attention_mask=mask, output_attentions=True)
        with capture_attention(lab.model) as store:
            got = lab.model(rows)
    real = mask.bool()
    torch.testing.assert_close(got[real], want.logits[real], atol=1e-4, rtol=0)
    patterns = store.matrices()
    assert len(patterns) == len(want.attentions) == 2
    for i, w in enumerate(want.attentions):
        g = patterns[f"encoder.{i}.self"]
        torch.testing.assert_close(g[real[:, None, :, None].expand_as(g)], w[real[:, None, :, None].expand_as(w)],
                                   atol=1e-5, rtol=0)
        assert g[0, 0].triu(1).abs().sum() > 0  # bidirectional: keys after the query are read


def test_top5_fillers_and_parameter_count(saved: tuple[str, Path, Any]) -> None:
    family, folder, reference = saved
    lab = open_files(str(folder))
    text = _masked(lab)
    result = fill_mask(lab.model, lab.task, text, top_k=5)
    ids = lab.task.vocab.encode(text)
    with torch.no_grad():
        probs = reference(torch.tensor([ids])).logits[0].softmax(-1)
    positions = [i for i, t in enumerate(ids) if t == lab.task.mask_id]
    assert [m.position for m in result.masks] == positions and len(positions) == 2
    for m in result.masks:
        want = probs[m.position].topk(5)
        assert [i for i, _ in m.ids] == want.indices.tolist()
        torch.testing.assert_close(torch.tensor([p for _, p in m.ids]), want.values, atol=1e-5, rtol=0)
    assert len(result.steps) == 2 and lab.task.mask_token not in result.output
    report = parameter_report(lab.config.model, lab.config.model.vocab_size or 0)
    n_lab = sum(p.numel() for p in {id(p): p for p in lab.model.parameters()}.values())
    assert report.total == n_lab == reference.num_parameters()


@pytest.mark.parametrize("slow", [False, True], ids=["tokenizer.json", "vocab files"])
def test_tokenization_matches(saved: tuple[str, Path, Any], tmp_path: Path, slow: bool) -> None:
    import shutil

    import transformers

    family, folder, _ = saved
    copy = tmp_path / family
    shutil.copytree(folder, copy)
    if slow:
        write_slow_vocab(copy, family)
    reference = transformers.AutoTokenizer.from_pretrained(folder)
    lab = open_files(str(copy))
    m = lab.task.mask_token
    for text in (*TEXTS, f"the {m} sat", f"a{m}b {m}."):
        assert lab.task.vocab.encode(text) == reference(text)["input_ids"], text


def test_bare_encoder_opens_but_cannot_fill(tmp_path: Path) -> None:
    import transformers

    reference = save_masked_lm(tmp_path, "bert", bare=True)
    assert isinstance(reference, transformers.BertModel)
    lab = open_files(str(tmp_path))
    ids = lab.task.vocab.encode("The cat sat on the mat.")
    with torch.no_grad():
        want = reference(torch.tensor([ids]), output_attentions=True).attentions
        with capture_attention(lab.model) as store:
            lab.model(torch.tensor([ids]))
    torch.testing.assert_close(store.matrices()["encoder.1.self"], want[1], atol=1e-5, rtol=0)
    pooler = sum(p.numel() for n, p in reference.named_parameters() if n.startswith("pooler"))
    assert parameter_report(lab.config.model, 120).total == reference.num_parameters() - pooler
    names = lab.hook_names()
    assert "blocks.1.attn.hook_pattern" in names and "mlm_head.hook_normalized" not in names
    with pytest.raises(DecodeInputError, match="no masked-LM head") as err:
        fill_mask(lab.model, lab.task, "The [MASK] sat.")
    assert "\n" not in str(err.value)


def test_no_mask_is_one_line(saved: tuple[str, Path, Any]) -> None:
    _, folder, _ = saved
    lab = open_files(str(folder))
    with pytest.raises(DecodeInputError, match=f"write {lab.task.mask_token.replace('[', '.')}") as err:
        fill_mask(lab.model, lab.task, "no mask here")
    assert "\n" not in str(err.value)
