"""The user's keymap.yaml: ids remap keys; an unknown id or a clash is one line, the default stands."""

from __future__ import annotations

from pathlib import Path

from tests.data.make_pane_runs import write_pane_runs
from tests.ui.helpers import SIZE, plain, ready, runs_pane, tiny_app, wait_until
from tui_lab.ui import pane_registry
from tui_lab.ui.screens.help import HelpScreen
from tui_lab.ui.user_keymap import check_keymap, keymap_path, read_keymap


def write_keymap(text: str) -> Path:
    """``text`` as the keymap.yaml the lab reads (XDG_CONFIG_HOME is the test's own)."""
    path = keymap_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_every_binding_has_an_id_and_ids_name_one_action() -> None:
    actions: dict[str, set[str]] = {}
    for binding in pane_registry.all_bindings():
        assert binding.id, binding
        owner, _, name = binding.id.partition(".")
        assert owner and name, binding.id
        actions.setdefault(binding.id, set()).add(binding.action)
    # Only Train's space shares an id across actions (start, pause and resume are one key).
    assert {i for i, a in actions.items() if len(a) > 1} == {"train.toggle"}


def test_the_keymap_lives_in_the_config_folder(lab_folders: Path) -> None:
    assert keymap_path() == lab_folders / "config" / "tfx-lab" / "keymap.yaml"
    assert read_keymap().entries == {} and read_keymap().problems == []  # no file: defaults


async def test_a_remapped_key_runs_the_action_and_the_old_key_does_not() -> None:
    write_keymap("runs.sort: t  # Runs: sort by the next column\n")
    write_pane_runs(Path("runs"))
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await runs_pane(pilot)
        assert app.user_keymap.problems == []
        first = pane.sort_key
        await pilot.press("s")  # the default key no longer sorts
        await pilot.pause()
        assert pane.sort_key == first
        await pilot.press("t")
        await wait_until(pilot, lambda: pane.sort_key != first, 5, "the next sort column")
        help_rows = dict(dict(app.help_sections())["6 Runs"])
        assert "Sort by" in help_rows["t"] and "s" not in help_rows  # help shows the new key
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert commands["Runs: Sort by"].endswith("(t · runs.sort)")


async def test_a_conflict_and_an_unknown_id_are_one_line_each_and_defaults_stand() -> None:
    write_keymap("runs.sort: l\nruns.nosuch: z\n")  # l is the Runs pane's Log scale
    write_pane_runs(Path("runs"))
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await runs_pane(pilot)
        problems = app.user_keymap.problems
        assert len(problems) == 2, problems
        assert all("\n" not in p for p in problems)
        clash = next(p for p in problems if "runs.sort" in p)
        assert "runs.log_scale" in clash and "default stands" in clash
        assert any("unknown binding id 'runs.nosuch'" in p for p in problems)
        notes = [str(n.message) for n in app._notifications]
        assert set(problems) <= set(notes)  # each shown at start-up, as it is
        first = pane.sort_key
        await pilot.press("s")  # the default stands
        await wait_until(pilot, lambda: pane.sort_key != first, 5, "the next sort column")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), 5, "help")
        note = app.screen._keymap_note()
        assert str(keymap_path()) in note and "runs.nosuch" in note


def test_clashes_are_found_per_scope() -> None:
    # q is the app's Quit in every pane; a key free in a pane's scope is fine there.
    kept, problems = check_keymap({"train.stop": "q", "attention.next_head": "n"})
    assert kept == {"attention.next_head": "n"}
    assert len(problems) == 1 and "app.quit" in problems[0]
    # Two remaps onto one key both fall back; moving a default away frees its key.
    kept, problems = check_keymap({"train.stop": "z", "train.reset": "z"})
    assert kept == {} and len(problems) == 2
    kept, problems = check_keymap({"train.log_scale": "g", "train.stop": "l"})
    assert kept == {"train.log_scale": "g", "train.stop": "l"} and problems == []
    # Train's space is three bindings with one id: remapping it clashes with none of them.
    assert check_keymap({"train.toggle": "t"}) == ({"train.toggle": "t"}, [])
    # Keys are read as Textual names them: "?" is question_mark, the app's Help.
    assert "app.help" in check_keymap({"runs.mark": "?"})[1][0]


def test_a_file_that_is_not_a_keymap_is_one_line(lab_folders: Path) -> None:
    write_keymap("- just\n- a list\n")
    assert len(read_keymap().problems) == 1
    write_keymap("train.toggle: [t\n")
    assert "not YAML" in read_keymap().problems[0]
    write_keymap("train.toggle: {a: 1}\n")
    assert "is not a key" in read_keymap().problems[0]


async def test_pane_text_that_names_a_key_names_the_remapped_one() -> None:
    """Train's title line says the keys a user's keymap gives train.toggle and train.stop."""
    write_keymap("train.toggle: t\ntrain.stop: x\n")
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("2")
        status = app.query_one("#train-status")
        await wait_until(pilot, lambda: "to train" in plain(status), 30, "the Train hint")
        assert "press t to train" in plain(status) and "space" not in plain(status)
