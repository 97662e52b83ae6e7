"""The Circuit pane by keyboard, mounted in a host that is not the lab, on a small random GPT-2
opened from files with random transcoders: trace a prompt (progress, then the graph), move
the cursor along the nodes (arrows: the side panel follows), open a feature in Features
(enter posts the request), and switch a feature off (x): the side panel shows the real
model's logit change beside the graph's, both checked against the core's own numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.message import Message

from bench.hf_factory import save_family
from tests.core.analysis.circuits.conftest import random_transcoders
from tests.ui.fake_host import STYLES, FakeHost
from tests.ui.helpers import SIZE, wait_until
from tui_lab.core.opening.model_in_hand import open_model
from tui_lab.core.sae.transcoder import save_transcoders
from tui_lab.ui.messages import OpenFeatureRequested
from tui_lab.ui.panes.circuit.circuit_pane import CircuitPane

PANE_CSS = Path(__file__).resolve().parents[4] / "tui_lab" / "ui" / "panes" / "circuit" / "circuit.tcss"


class CircuitHost(FakeHost):
    """The fake host with the pane's stylesheet, a model in hand, and the messages it got."""

    def __init__(self, pane: CircuitPane, runs_root: Path, run: object) -> None:
        super().__init__(lambda: pane, "circuit", runs_root)
        self.css_path = [STYLES / "app.tcss", PANE_CSS]
        self.state.current_run = run
        self.got: list[Message] = []

    def on_open_feature_requested(self, message: OpenFeatureRequested) -> None:
        self.got.append(message)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("circuit-pane")
    save_family(root / "model", "gpt2")
    save_transcoders(random_transcoders(open_model(root / "model")), root / "tc")
    return root / "model", root / "tc"


async def _traced(pilot, host: CircuitHost, pane: CircuitPane, folder: Path) -> None:  # type: ignore[no-untyped-def]
    pane.focus_default()  # the prompt, before any graph
    await pilot.press(*"The cat sat", "tab")  # tab: the transcoder folder
    await pilot.press(*str(folder), "enter")
    await wait_until(pilot, lambda: pane.view.graph is not None and not pane.running, 120, "the graph")
    await pilot.pause()


async def test_trace_navigate_open_and_intervene(folders: tuple[Path, Path], tmp_path: Path) -> None:
    model_dir, tc = folders
    pane = CircuitPane(id="circuit-pane")
    host = CircuitHost(pane, tmp_path / "runs", open_model(model_dir))
    async with host.run_test(size=SIZE) as pilot:
        assert host.registered == {"circuit": pane}
        await _traced(pilot, host, pane, tc)
        view = pane.view
        graph = view.graph
        assert graph is not None and view.cursor == graph.logit_start  # on the top logit
        assert "logit" in str(host.query_one("#circuit-side").render())
        await pilot.press("down")  # the top layer's nodes, or the next row that has any
        below = view.node()
        assert below is not None and below.kind.value in ("feature", "error", "token")
        # walk down to a feature (features sit in layer rows)
        for _ in range(6):
            node = view.node()
            if node is not None and node.kind.value == "feature":
                break
            await pilot.press("right" if node is not None and node.kind.value == "error" else "down")
        feature = view.node()
        assert feature is not None and feature.kind.value == "feature"
        side = str(host.query_one("#circuit-side").render())
        assert f"feature {feature.id}" in side and "strongest in" in side and "strongest out" in side
        await pilot.press("enter")
        await pilot.pause()
        assert [(m.layer, m.feature) for m in host.got] == [(feature.layer, feature.id)]  # type: ignore[attr-defined]
        await pilot.press("x")
        await wait_until(pilot, lambda: view.checks is not None, 60, "the intervention")
        await pilot.pause()
        from tui_lab.core.analysis.circuits.intervention import intervene

        expected = intervene(pane.model, graph, pane.transcoders, [feature.index], 0.0)  # type: ignore[arg-type]
        assert [(c.real, c.predicted) for c in view.checks or []] == pytest.approx(
            [(c.real, c.predicted) for c in expected], abs=1e-5)
        predicted = -float(graph.adjacency[graph.logit_start, feature.index])
        assert view.checks[0].predicted == pytest.approx(predicted, abs=1e-5)  # type: ignore[index]
        assert "real vs graph" in str(host.query_one("#circuit-side").render())


async def test_a_bad_folder_is_one_line(folders: tuple[Path, Path], tmp_path: Path) -> None:
    model_dir, _ = folders
    pane = CircuitPane(id="circuit-pane")
    host = CircuitHost(pane, tmp_path / "runs", open_model(model_dir))
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        await pilot.press(*"hi", "tab", *str(tmp_path / "nowhere"), "enter")
        await wait_until(pilot, lambda: "no such folder" in str(host.query_one("#circuit-status").render()), 30,
                         "the refusal")
        assert pane.view.graph is None


HISTORY_PRESET = """\
model: {arch: decoder-only, n_encoder_layers: 0, n_decoder_layers: 2, d_model: 32, n_heads: 2,
        d_ff: 64, positional: learned, max_len: 64}
task: {name: induction}
train: {steps: 8, batch_size: 8, eval_every: 4, eval_examples: 16, device: cpu, threads: 1}
"""


@pytest.fixture(scope="module")
def history_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny induction run with MLPs and history snapshots, random transcoders at steps 2 and 8."""
    from tui_lab.core.config.presets import load_preset
    from tui_lab.core.training.train import TrainingRun

    root = tmp_path_factory.mktemp("circuit-history")
    (root / "tiny.yaml").write_text(HISTORY_PRESET)
    TrainingRun(load_preset(str(root / "tiny.yaml")), root / "run").run()
    for step in (2, 8):
        model = open_model(root / "run", at_step=step)
        save_transcoders(random_transcoders(model, seed=step), root / "run" / "transcoders" / f"step_{step}")
    return root / "run"


async def test_history_keys_step_through_the_snapshots(history_run: Path, tmp_path: Path) -> None:
    from types import SimpleNamespace

    from tui_lab.core.opening.from_run import load_for_inference

    run = load_for_inference(history_run, "cpu")
    handle = SimpleNamespace(model=run.model, task=run.task, config=run.config, card=None, step=run.step,
                             out_dir=history_run)
    pane = CircuitPane(id="circuit-pane")
    host = CircuitHost(pane, tmp_path / "runs", handle)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        await pilot.press(*"abcdabc", "enter")  # the run's own transcoders/ folder, its last step's set
        await wait_until(pilot, lambda: pane.view.graph is not None and not pane.running, 60, "the graph")
        assert pane.view.graph is not None and pane.view.graph.step == 8 and pane.view.step_index is None
        seen = []
        for key in ("left_square_bracket", "left_square_bracket", "right_square_bracket", "right_square_bracket"):
            await pilot.press(key)
            await pilot.pause()
            await wait_until(pilot, lambda: not pane.running, 60, f"the graph after {key}")
            await pilot.pause()
            seen.append((pane.view.step_index, pane.view.graph.step if pane.view.graph else None))
        assert seen == [(1, 8), (0, 2), (1, 8), (None, 8)]
        assert "history" in str(host.query_one("#circuit-title").render())


async def test_a_shows_the_heads_carrying_an_edge_and_the_top_heads_qk(tmp_path: Path) -> None:
    """On the answer, ``a`` finds the heads carrying its strongest earlier-position edge and
    QK-traces the top one; then on that edge's source (reached with the arrows) the same.
    Both checked against the core's own functions on the pane's graph."""
    from tui_lab.core.analysis.circuits.edge_heads import earlier_sources, edge_carriers
    from tui_lab.core.analysis.circuits.qk_tracing import qk_trace

    run = Path(__file__).resolve().parents[3] / "data" / "induction-mlp-run"  # the trained induction run
    model = open_model(run)
    save_transcoders(random_transcoders(model), tmp_path / "tc")
    pane = CircuitPane(id="circuit-pane")
    host = CircuitHost(pane, tmp_path / "runs", model)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        await pilot.press(*"qwertyuqwerty", "tab", *str(tmp_path / "tc"), "enter")  # the answer 'u' sits at 6
        await wait_until(pilot, lambda: pane.view.graph is not None and not pane.running, 120, "the graph")
        view, graph = pane.view, pane.view.graph
        assert graph is not None and view.pruned is not None
        target = graph.logit_start
        source = (earlier_sources(graph, target, view.pruned) or earlier_sources(graph, target))[0]
        await pilot.press("a")
        await wait_until(pilot, lambda: view.carriers is not None and not pane.running, 60, "the carriers")
        await pilot.pause()
        expected = edge_carriers(pane.model, graph, pane.transcoders, target, source)  # type: ignore[arg-type]
        assert view.carriers is not None and (view.carriers.target, view.carriers.source) == (target, source)
        assert [(c.name, c.key) for c in view.carriers.carriers] == [(c.name, c.key) for c in expected.carriers]
        top = expected.carriers[0]
        assert view.qk is not None and (view.qk.layer, view.qk.head, view.qk.key) == (top.layer, top.head, top.key)
        traced = qk_trace(pane.model, graph.tokens, pane.transcoders, top.layer, top.head, top.query, top.key)  # type: ignore[arg-type]
        assert view.qk.score == pytest.approx(traced.score, abs=1e-6)
        side = str(host.query_one("#circuit-side").render())
        assert "carried by" in side and top.name in side and f"QK {top.name}" in side and "key side" in side
        assert top.name in str(host.query_one("#circuit-status").render())
        # the arrows to the source node when pruning kept it, then a: its strongest edge to a later position
        assert bool(view.pruned.node_mask[source])  # kept: an edge into the answer that pruning kept
        flat = view._flat()
        row = next(r for r, nodes in enumerate(flat) if source in nodes)
        for _ in range(len(flat)):
            if view.cursor in flat[row]:
                break
            await pilot.press("down")
        assert view.cursor in flat[row]
        step = "right" if flat[row].index(source) > flat[row].index(view.cursor) else "left"  # type: ignore[arg-type]
        for _ in range(len(flat[row])):
            if view.cursor == source:
                break
            await pilot.press(step)
        assert view.cursor == source
        view.carriers = None
        await pilot.press("a")
        await wait_until(pilot, lambda: view.carriers is not None and not pane.running, 60, "the source's carriers")
        assert view.carriers is not None and view.carriers.source == source
        assert "QK L" in str(host.query_one("#circuit-side").render())


async def test_a_without_an_edge_between_positions_says_so(folders: tuple[Path, Path], tmp_path: Path) -> None:
    model_dir, _ = folders
    pane = CircuitPane(id="circuit-pane")
    host = CircuitHost(pane, tmp_path / "runs", open_model(model_dir))
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        pane.action_carriers()  # no graph yet
        await pilot.pause()
        assert "edge between positions" in str(host.query_one("#circuit-status").render())
        assert pane.view.carriers is None and not pane.running
