"""The Params pane on an encoder-only model: rows for its own parts (token-type embedding,
embedding norm, MLM head) and a breakdown that adds up to the model's parameter count."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from tests.ui.conftest import TINY_MLM
from tests.ui.helpers import SIZE, plain, ready, tiny_app, wait_until
from tui_lab.ui.panes.params.params_pane import ParamsPane
from tui_lab.ui.widgets.text_table import TextTable


async def test_encoder_only_rows_add_up(lab_folders: Path) -> None:
    preset = lab_folders / "typed-mlm.yaml"  # the tiny encoder with BERT's token types, untied
    preset.write_text(
        TINY_MLM.read_text().replace("  embed_norm: true", "  embed_norm: true\n  type_vocab_size: 2\n"
                                     "  tie_embeddings: false")
    )
    app = tiny_app(preset=str(preset))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("5")
        pane = app.query_one(ParamsPane)
        await wait_until(pilot, lambda: pane.report is not None, 30, "the report")
        report = pane.report
        names = [r.name for r in report.rows]
        assert {"type_embed", "embed_norm", "mlm_head", "lm_head"} <= set(names)
        assert not any(n.startswith("decoder") for n in names)
        from tui_lab.core.model.models import build_model
        from tui_lab.core.tasks import make_task

        model = build_model(app.config.model, len(make_task(app.config.task).vocab))
        count = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
        assert sum(r.params for r in report.rows) == report.total == count
        table = pane.query_one(TextTable).text
        for name in ("type_embed", "embed_norm", "mlm_head"):
            assert name in table
        title = plain(pane.query_one("#params-title", Static))
        assert "encoder-only" in title and "2 encoder layers" in title and "decoder" not in title
        await pilot.press("g")  # grouped: embeddings and the output head hold the new rows
        groups = report.groups()
        assert sum(groups.values()) == count and "decoder" not in " ".join(groups)
