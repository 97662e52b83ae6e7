"""Steering in Decode (3): s asks for a hook, two prompt sets and a coefficient; every decode
then shows the steered output beside the plain one, equal to the core's steered decode of
the same weights (never a number written here); s again turns it off."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input, Static

from tests.ui.helpers import SIZE, decode, open_trained, plain, tiny_app, wait_until
from tui_lab.core.analysis.patching.steering import steering_hooks, steering_vector
from tui_lab.core.decoding.decode import generate
from tui_lab.core.model.hook_points import using_hooks
from tui_lab.core.opening.from_run import load_for_inference
from tui_lab.ui.screens.steer import SteerScreen, prompt_set

LEARNED = Path(__file__).resolve().parents[3] / "data" / "learned-copy"
HOOK = "encoder.0.hook_resid_post"
TEXT = "31415"


async def steer_dialog(pilot, app):  # type: ignore[no-untyped-def]
    """The learned run opened, TEXT decoded, and s pressed: (Decode, its steer dialog)."""
    await open_trained(pilot)
    pane = await decode(pilot, TEXT)
    pane.focus()
    await pilot.press("s")
    await wait_until(pilot, lambda: isinstance(app.screen, SteerScreen), 10, "the steer dialog")
    return pane, app.screen


async def test_steering_by_keyboard_matches_the_core(learned_run: Path, tmp_path: Path) -> None:
    negative = tmp_path / "negative.txt"
    negative.write_text("99999\n88888\n")
    loaded = load_for_inference(LEARNED)
    vector = steering_vector(loaded, HOOK, ["11111", "22222"], ["99999", "88888"])
    plain_out = generate(loaded.model, loaded.task, TEXT, capture=False).output
    with using_hooks(steering_hooks(HOOK, vector, 2.0)):
        steered_out = generate(loaded.model, loaded.task, TEXT, capture=False).output
    assert steered_out != plain_out  # the vector changes the answer: the test can tell

    app = tiny_app(run_dir=str(learned_run))
    async with app.run_test(size=SIZE) as pilot:
        pane, dialog = await steer_dialog(pilot, app)
        dialog.query_one("#steer-hook", Input).value = HOOK
        dialog.query_one("#steer-positive", Input).value = "11111 | 22222"
        dialog.query_one("#steer-negative", Input).value = str(negative)
        dialog.query_one("#steer-coef", Input).value = "2"
        dialog.query_one("#steer-coef", Input).focus()
        await pilot.press("enter")
        output = pane.query_one("#decode-output", Static)
        await wait_until(pilot, lambda: "steered" in plain(output), 30, "the steered decode")
        await app.workers.wait_for_complete()
        await pilot.pause()
        lines = plain(output).splitlines()
        assert any(line.startswith("output") and plain_out in line for line in lines)
        steered = next(line for line in lines if line.startswith("steered"))
        assert steered.split()[1] == steered_out.strip() and HOOK in steered
        pane.focus()
        await pilot.press("s")  # off: plain decodes again
        assert pane.steering is None
        pane = await decode(pilot, TEXT)
        assert "steered" not in plain(pane.query_one("#decode-output", Static))


async def test_a_bad_hook_or_coefficient_is_one_line_in_the_dialog(learned_run: Path) -> None:
    app = tiny_app(run_dir=str(learned_run))
    async with app.run_test(size=SIZE) as pilot:
        pane, dialog = await steer_dialog(pilot, app)
        dialog.query_one("#steer-hook", Input).value = "blocks.9.nowhere"
        dialog.query_one("#steer-hook", Input).focus()
        await pilot.press("enter")
        assert "no hook point 'blocks.9.nowhere'" in plain(dialog.query_one("#steer-error", Static))
        dialog.query_one("#steer-hook", Input).value = HOOK
        dialog.query_one("#steer-positive", Input).value = "111"
        dialog.query_one("#steer-negative", Input).value = "999"
        dialog.query_one("#steer-coef", Input).value = "lots"
        await pilot.press("enter")
        assert "not a number" in plain(dialog.query_one("#steer-error", Static))
        await pilot.press("escape")
        assert not isinstance(app.screen, SteerScreen) and pane.steering is None


def test_a_prompt_set_is_a_file_or_bars(tmp_path: Path) -> None:
    f = tmp_path / "p.txt"
    f.write_text("one\n\n two \n")
    assert prompt_set(str(f)) == ["one", "two"]
    assert prompt_set("a | b |") == ["a", "b"]


async def test_a_coefficient_or_prompt_the_command_refuses_is_refused_in_one_line(learned_run: Path) -> None:
    """Issue 55: NaN or infinity as the coefficient is refused in the dialog, and a prompt past the
    model's context by the worker, in one line each, with ``tfx-lab steer``'s words."""
    app = tiny_app(run_dir=str(learned_run))
    async with app.run_test(size=SIZE) as pilot:
        pane, dialog = await steer_dialog(pilot, app)
        dialog.query_one("#steer-hook", Input).value = HOOK
        dialog.query_one("#steer-positive", Input).value = "111"
        dialog.query_one("#steer-negative", Input).value = "999"
        for typed in ("nan", "inf"):
            dialog.query_one("#steer-coef", Input).value = typed
            dialog.query_one("#steer-coef", Input).focus()
            await pilot.press("enter")
            said = plain(dialog.query_one("#steer-error", Static))
            assert f"--coef: must be a finite number, got {typed}" in said and len(said.splitlines()) == 1
        dialog.query_one("#steer-positive", Input).value = "1" * 5000
        dialog.query_one("#steer-coef", Input).value = "2"
        await pilot.press("enter")
        error = pane.query_one("#decode-error", Static)
        await wait_until(pilot, lambda: "reads at most" in plain(error), 30, "the refusal")
        assert "a positive prompt of 5000 tokens" in plain(error) and len(plain(error).splitlines()) == 1
        assert pane.steering is None
