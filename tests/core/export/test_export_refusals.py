"""What no family represents exactly is refused in one line naming the setting, and nothing is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.core.pretrained.export_runs import save_run
from tui_lab.core.export.export_choice import ExportError
from tui_lab.core.export.export_hf import export_hf

LEARNED_COPY = Path(__file__).resolve().parents[2] / "data" / "learned-copy"

# settings -> what the one line must name
REFUSED: list[tuple[dict[str, Any], str]] = [
    (dict(norm="post"), "model.norm post"),
    (dict(d_ff=0), "model.d_ff 0"),
    (dict(gated_ff=True), "model.gated_ff true with norm_kind layernorm"),
    (dict(norm_kind="rmsnorm", positional="rope"), "model.norm_kind rmsnorm without gated_ff"),
    (dict(norm_kind="rmsnorm", gated_ff=True, positional="learned"), "model.positional learned with rmsnorm"),
    (dict(norm_kind="rmsnorm", gated_ff=True, positional="rope", rope_fraction=0.5), "model.rope_fraction 0.5"),
    (dict(positional="rope", attention_windows=(0, 4)), "model.attention_windows with rope"),
    (dict(positional="learned", parallel_residual=True), "model.parallel_residual with positional learned"),
    (dict(positional="learned", attention_windows=(2, 4), qkv_bias=False), "model.attention_windows [2, 4]"),
    (dict(positional="learned", attention_windows=(0, 4)), "model.qkv_bias true with attention_windows"),
]


@pytest.mark.parametrize(("settings", "named"), REFUSED, ids=[n for _, n in REFUSED])
def test_refused_in_one_line_naming_the_setting(tmp_path: Path, settings: dict[str, Any], named: str) -> None:
    run, _ = save_run(tmp_path / "run", **settings)
    with pytest.raises(ExportError) as caught:
        export_hf(run, tmp_path / "hf")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"cannot export: {named}")
    assert list(tmp_path.iterdir()) == [tmp_path / "run", tmp_path / "run.txt"]  # no folder, no temp


def test_an_encoder_decoder_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match=r"^cannot export: model\.arch encoder-decoder: [^\n]*$"):
        export_hf(LEARNED_COPY, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_an_existing_folder_is_left_alone(tmp_path: Path) -> None:
    run, _ = save_run(tmp_path / "run", positional="learned")
    out = tmp_path / "hf"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="already exists"):
        export_hf(run, out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_written_beside_out_and_a_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While files are written, ``out`` does not exist (a temporary folder beside it does):
    a crash never leaves a half-written ``out``; a failure removes the temporary folder."""
    from tui_lab.core.export import export_hf as module

    run, _ = save_run(tmp_path / "run", positional="learned")
    out = tmp_path / "hf"
    seen: list[tuple[bool, list[str]]] = []

    def broken(vocab: Any, folder: Path, context: int) -> list[str]:
        seen.append((out.exists(), sorted(p.name for p in folder.iterdir())))
        assert folder.parent == out.parent and folder.name.startswith(".hf.partial-")
        raise OSError("No space left on device")

    monkeypatch.setattr(module, "write_vocab_tokenizer", broken)
    with pytest.raises(OSError):
        export_hf(run, out)
    assert seen == [(False, ["config.json", "generation_config.json", "model.safetensors"])]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "run.txt"]
