"""Every key of the lab as data: each ``Binding`` with an id a user's keymap can remap.

A class's ``BINDINGS`` is one of the lists below (``BINDINGS = key_bindings.TRAIN``), so
a key is written once; the help screen and the command palette read the mounted panes'
bindings, and ``user_keymap.py`` checks a user's ``keymap.yaml`` against
``pane_registry.SCOPES`` (which lists are live together) without importing a pane. The
keys that show a pane (1-N) are made from the list of panes (``pane_registry.APP``). Ids
are ``<owner>.<what it does>``; bindings that are one key in different states (Train's
space: start, pause, resume) share an id, so a remap moves them together.

Imports only ``textual.binding``: the app reads this before its first frame.
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

# The app's keys besides the pane keys (pane_registry.APP puts those first).
EVERYWHERE: list[BindingType] = [
    Binding("question_mark", "help", "Help", id="app.help"),
    Binding(
        "b", "basics", "Basics", show=False, id="app.basics",
        tooltip="Basics: the tutorials' pictures (positions, masks, scaling, schedule)",
    ),
    # ctrl+s is Build's Save as, ctrl+e a text field's End: the screenshot is f12.
    Binding(
        "f12", "save_svg", "Save SVG", show=False, id="app.save_svg",
        tooltip="Save SVG of the screen (in <runs>/screenshots)",
    ),
    Binding("q", "quit", "Quit", id="app.quit"),
    Binding("escape", "leave_field", "Leave field", show=False, id="app.leave_field"),
]

BUILD: list[BindingType] = [
    Binding("ctrl+s", "save_as", "Save as", id="build.save_as"),
    Binding("ctrl+r", "revert", "Revert", id="build.revert"),
    Binding("p", "focus_presets", "Focus the preset list", show=False, id="build.focus_presets"),
    Binding("f", "focus_form", "Focus the form", show=False, id="build.focus_form"),
]

FORM: list[BindingType] = [
    Binding("up", "move(-1)", "Previous field", show=False, id="form.previous_field"),
    Binding("down", "move(1)", "Next field", show=False, id="form.next_field"),
    Binding("tab", "tab(1)", "Next field", show=False, id="form.tab"),
    Binding("shift+tab", "tab(-1)", "Previous field", show=False, id="form.shift_tab"),
    Binding(
        "enter", "activate", "Edit / choose", id="form.activate",
        tooltip="Edit / choose: resume editing, next field; open a choice list, pick",
    ),
    Binding("space", "toggle_field", "Toggle a switch, open a choice list", show=False, id="form.toggle"),
    Binding("left", "cycle(-1)", "Previous choice", show=False, id="form.previous_choice"),
    Binding("right", "cycle(1)", "Next choice", show=False, id="form.next_choice"),
    Binding(
        "escape", "leave", "Close the list, or stop editing (the pane keys and q work again)", show=False,
        id="form.leave",
    ),
]

TRAIN: list[BindingType] = [
    Binding("space", "start", "Start", id="train.toggle"),
    Binding("space", "pause", "Pause", id="train.toggle"),
    Binding("space", "resume", "Resume", id="train.toggle"),
    Binding("s", "stop", "Stop", id="train.stop"),
    Binding("r", "reset", "Reset", id="train.reset"),
    Binding("l", "toggle_log", "Log scale", id="train.log_scale"),
    Binding("o", "open_run", "Open run", id="train.open_run"),
    Binding("a", "toggle_accuracy", "Accuracy chart", show=False, id="train.accuracy"),
    Binding(
        "c", "cycle_chart", "Loss / lr / grad norm / update ratio", show=False, id="train.chart",
        tooltip="Loss / lr / grad norm / update ratio: the chart beside the figures (per parameter "
        "group the learning rate, gradient norm and update-to-weight ratio)",
    ),
    Binding(
        "f", "fourier", "Fourier", id="train.fourier",
        tooltip="Fourier view: the embedding's spectrum (modular-addition runs)",
    ),
]

# Attention and Decode both step the last decode through a run's history.
TIME_TRAVEL: list[BindingType] = [
    Binding(
        "left_square_bracket", "snapshot('prev')", "Earlier snapshot", show=False,
        id="time_travel.earlier",
    ),
    Binding(
        "right_square_bracket", "snapshot('next')", "Later snapshot (then latest)", show=False,
        id="time_travel.later",
    ),
    Binding(
        "left_curly_bracket", "snapshot('first')", "First snapshot", show=False,
        id="time_travel.first",
    ),
    Binding(
        "right_curly_bracket", "snapshot('last')", "Last snapshot", show=False,
        id="time_travel.last",
    ),
    Binding("p", "play_snapshots", "Play the history / stop", show=False, id="time_travel.play"),
]

DECODE: list[BindingType] = [
    Binding("i,slash", "edit_input", "Edit input", id="decode.edit_input"),
    Binding("ctrl+n", "next_example", "Example", id="decode.next_example"),
    Binding("ctrl+t", "toggle_sampling", "Sampling", id="decode.sampling"),
    Binding("v", "toggle_lens", "Logit lens", id="decode.lens"),
    Binding("V", "switch_lens", "Switch lens: logit, tuned, Jacobian", show=False, id="decode.lens_kind"),
    Binding("s", "steer", "Steer", id="decode.steer",
            tooltip="Steer every decode by a vector from two prompt sets (s again: off)"),
    *TIME_TRAVEL,
]

ATTENTION: list[BindingType] = [
    Binding("k", "cycle_kind(1)", "Kind", id="attention.next_kind"),
    Binding("l", "cycle_layer(1)", "Layer", id="attention.next_layer"),
    Binding("h", "cycle_head(1)", "Head", id="attention.next_head"),
    Binding("K", "cycle_kind(-1)", "Previous kind", show=False, id="attention.previous_kind"),
    Binding("L", "cycle_layer(-1)", "Previous layer", show=False, id="attention.previous_layer"),
    Binding("H", "cycle_head(-1)", "Previous head", show=False, id="attention.previous_head"),
    Binding("a", "toggle_overview", "All heads", id="attention.all_heads"),
    Binding("w", "toggle_walkthrough", "Walkthrough", id="attention.walkthrough"),
    Binding(
        "x", "toggle_ablation", "Ablate", id="attention.ablate",
        tooltip="Ablate the head on show / restore it",
    ),
    Binding("m", "cycle_ablation_mode", "Ablation mode", show=False, id="attention.ablation_mode"),
    Binding("X", "restore_heads", "Restore all heads and features", show=False, id="attention.restore_heads"),
    Binding("i", "toggle_importance", "Importance", id="attention.importance"),
    Binding(
        "v", "probes", "Probes", id="attention.probes",
        tooltip="Probes: where the task's variable is readable by layer, and over training when readable and causal",
    ),
    *TIME_TRAVEL,
]

HEATMAP: list[BindingType] = [
    Binding("up", "move(-1, 0)", "Cursor to the previous query row", show=False, id="heatmap.up"),
    Binding("down", "move(1, 0)", "Cursor to the next query row", show=False, id="heatmap.down"),
    Binding("left", "move(0, -1)", "Cursor to the previous key", show=False, id="heatmap.left"),
    Binding("right", "move(0, 1)", "Cursor to the next key", show=False, id="heatmap.right"),
    Binding("home", "jump(0)", "First key", show=False, id="heatmap.first_key"),
    Binding("end", "jump(-1)", "Last key", show=False, id="heatmap.last_key"),
    Binding("pageup", "page(-1)", "Cursor a window's rows up", show=False, id="heatmap.page_up"),
    Binding(
        "pagedown", "page(1)", "Cursor a window's rows down", show=False, id="heatmap.page_down"
    ),
]

PARAMS: list[BindingType] = [Binding("g", "toggle_grouped", "Group rows", id="params.group_rows")]

RUNS: list[BindingType] = [
    Binding("space", "mark", "Mark", id="runs.mark"),
    Binding("enter", "open_run", "Open in lab", id="runs.open"),
    Binding("s", "cycle_sort", "Sort by", id="runs.sort"),
    Binding("r", "reverse_sort", "Reverse", id="runs.reverse"),
    Binding("slash", "filter", "Filter", id="runs.filter"),
    Binding("escape", "clear_filter", "Clear filter", show=False, id="runs.clear_filter"),
    Binding("m", "cycle_metric", "Metric", id="runs.metric"),
    Binding("x", "toggle_x", "Step/seconds", id="runs.x_axis"),
    Binding("l", "toggle_log", "Log scale", id="runs.log_scale"),
    Binding("o", "add_folder", "Add folder", id="runs.add_folder"),
    Binding(
        "e", "export('csv')", "Export CSV", show=False, id="runs.export_csv",
        tooltip="Export CSV of the table as shown (<runs>/runs-<time>.csv)",
    ),
    Binding(
        "E", "export('json')", "Export JSON", show=False, id="runs.export_json",
        tooltip="Export JSON of the same (runs-<time>.json)",
    ),
]

FEATURES: list[BindingType] = [
    Binding("t", "train", "Train an SAE / stop", id="features.train"),
    Binding("A", "cycle_arch", "Architecture t trains", show=False, id="features.arch",
            tooltip="TopK, BatchTopK or Matryoshka BatchTopK (tfx-lab sae train --arch topk|batchtopk|matryoshka)"),
    Binding("o", "open_sae", "Open an SAE folder", id="features.open"),
    Binding("s", "cycle_sort", "Sort by", id="features.sort"),
    Binding("slash", "focus_prompt", "Type text", id="features.prompt"),
    Binding("l", "focus_list", "Feature list", show=False, id="features.list"),
    Binding("x", "intervene('ablate')", "Decode without it", id="features.ablate",
            tooltip="Decode the typed text plainly and with the feature ablated (error term kept)"),
    Binding("v", "intervene('steer')", "Decode steered", id="features.steer",
            tooltip="Decode the typed text plainly and with its decoder row added (its largest activation)"),
    Binding("a", "ablate_in_decode", "Off in Decode", id="features.ablate_in_decode",
            tooltip="Switch the feature off (or on again) in every decode of the Decode pane"),
    Binding("c", "crosscoder_diff", "Crosscoder diff", id="features.crosscoder",
            tooltip="Features new, gone and shared between two snapshots (c again: the SAE's features)"),
]

CROSSCODER_DIFF: list[BindingType] = [
    Binding("g", "cycle_group", "New / gone / shared", id="crosscoder.group",
            tooltip="The next list: features new at the later source, gone at it, shared"),
    Binding("e", "ask", "Open or train a crosscoder / stop", id="crosscoder.ask",
            tooltip="A crosscoder folder, or two snapshot steps of the run in hand (A,B) to train one; "
                    "e while one trains stops it"),
]

FEATURE_LIST: list[BindingType] = [
    Binding("up", "move(-1)", "Previous", show=False, id="feature_list.up"),
    Binding("down", "move(1)", "Next", show=False, id="feature_list.down"),
    Binding("pageup", "move(-10)", "Page up", show=False, id="feature_list.page_up"),
    Binding("pagedown", "move(10)", "Page down", show=False, id="feature_list.page_down"),
    Binding("home", "move(-1000000)", "First", show=False, id="feature_list.first"),
    Binding("end", "move(1000000)", "Last", show=False, id="feature_list.last"),
    Binding("enter", "choose", "Show the feature", show=False, id="feature_list.choose"),
]

PATCH: list[BindingType] = [
    Binding("r", "run", "Patch", id="patch.run", tooltip="Patch the pair at the site on show"),
    Binding("e", "edit_pair", "Pair", id="patch.edit_pair",
            tooltip="Pair: pick a ready-made one or type the clean and corrupted texts and answers"),
    Binding("s", "cycle_site(1)", "Site", id="patch.next_site"),
    Binding("S", "cycle_site(-1)", "Previous site", show=False, id="patch.previous_site"),
    Binding("m", "toggle_method", "Exact/attribution", id="patch.method"),
    Binding("d", "toggle_view('dla')", "Logit attribution", id="patch.dla",
            tooltip="Direct logit attribution as bars (again: the heatmap)"),
    Binding("t", "toggle_view('history')", "Over training", id="patch.history",
            tooltip="Each head's patching effect over the run's snapshots, beside the atlas's curves"),
    Binding("g", "toggle_view('edges')", "Edges", show=False, id="patch.edges",
            tooltip="Edges: every edge scored (EAP-IG), the top ones, the faithfulness curve and its history"),
    Binding("k", "known_circuit", "Known circuit check", show=False, id="patch.known_circuit",
            tooltip="On an induction run: is the previous-token head's edge into an induction head's key on top?"),
    Binding("left_square_bracket", "snapshot('prev')", "Earlier snapshot", show=False,
            id="patch.earlier"),
    Binding("right_square_bracket", "snapshot('next')", "Later snapshot (then the model in hand)",
            show=False, id="patch.later"),
    Binding("left_curly_bracket", "snapshot('first')", "First snapshot", show=False, id="patch.first"),
    Binding("right_curly_bracket", "snapshot('last')", "Last snapshot", show=False, id="patch.last"),
    Binding("escape", "cancel", "Cancel patching / close the pair", show=False, id="patch.cancel"),
]

CIRCUIT: list[BindingType] = [
    Binding("r", "trace", "Trace", id="circuit.trace", tooltip="Trace the prompt's graph again"),
    Binding("slash", "focus_prompt", "Prompt", id="circuit.prompt"),
    Binding("t", "focus_transcoders", "Transcoders", id="circuit.transcoders",
            tooltip="The transcoder set's folder (a folder of step_<N> sets steps through the history)"),
    Binding("enter", "open_feature", "Open in Features", id="circuit.open_feature"),
    Binding("space", "mark", "Mark feature", id="circuit.mark",
            tooltip="Mark (or unmark) the feature under the cursor for an intervention"),
    Binding("x", "intervene(0.0)", "Switch off", id="circuit.off",
            tooltip="Switch the marked features (else the one under the cursor) off in the real model: logit change beside the graph's"),
    Binding("v", "intervene(0.5)", "Halve", show=False, id="circuit.halve",
            tooltip="Scale the marked features (else the cursor's) by 0.5 in the real model"),
    Binding("a", "carriers", "Heads & QK", id="circuit.qk",
            tooltip="Which heads carry the cursor's strongest edge between positions, and the top head's QK tracing"),
    Binding("up", "move(-1, 0)", "Row above", show=False, id="circuit.up"),
    Binding("down", "move(1, 0)", "Row below", show=False, id="circuit.down"),
    Binding("left", "move(0, -1)", "Previous node", show=False, id="circuit.left"),
    Binding("right", "move(0, 1)", "Next node", show=False, id="circuit.right"),
    Binding("left_square_bracket", "snapshot(-1)", "Earlier snapshot", id="circuit.earlier"),
    Binding("right_square_bracket", "snapshot(1)", "Later snapshot (then the model in hand)", id="circuit.later"),
    Binding("escape", "cancel", "Cancel tracing", show=False, id="circuit.cancel"),
]

PICK_LIST: list[BindingType] = [
    Binding("up", "move(-1)", "Previous", show=False, id="pick_list.up"),
    Binding("down", "move(1)", "Next", show=False, id="pick_list.down"),
    Binding("home", "move_to(0)", "First", show=False, id="pick_list.first"),
    Binding("end", "move_to(-1)", "Last", show=False, id="pick_list.last"),
    Binding("pageup", "page(-1)", "Page up", show=False, id="pick_list.page_up"),
    Binding("pagedown", "page(1)", "Page down", show=False, id="pick_list.page_down"),
    Binding("enter", "pick", "Pick", show=False, id="pick_list.pick"),
]

RUN_TABLE: list[BindingType] = [
    Binding("up", "move(-1)", "Up", show=False, id="run_table.up"),
    Binding("down", "move(1)", "Down", show=False, id="run_table.down"),
    Binding("pageup", "move(-10)", "Page up", show=False, id="run_table.page_up"),
    Binding("pagedown", "move(10)", "Page down", show=False, id="run_table.page_down"),
    Binding("home", "move(-1000000)", "First", show=False, id="run_table.first"),
    Binding("end", "move(1000000)", "Last", show=False, id="run_table.last"),
    Binding("enter", "select", "Select", show=False, id="run_table.select"),
]

BASICS: list[BindingType] = [
    Binding(
        "p", "view('positions')", "Positions", id="basics.positions",
        tooltip="positions: the model's positional table",
    ),
    Binding(
        "m", "view('masks')", "Masks", id="basics.masks",
        tooltip="masks: padding, causal, both; a row before/after",
    ),
    Binding(
        "s", "view('scaling')", "Scaling", id="basics.scaling",
        tooltip="scaling: why q.k is divided by sqrt(d_k)",
    ),
    Binding(
        "r", "view('schedule')", "Schedule", id="basics.schedule",
        tooltip="schedule: the learning rate beside Noam",
    ),
    Binding("escape,b,q", "close", "Close", id="basics.close", tooltip="close the basics screen"),
]

PROBES: list[BindingType] = [
    Binding("t", "history", "Over training", id="probes.history",
            tooltip="Probes (and DAS while on) at every layer of every history snapshot"),
    Binding("d", "toggle_das", "DAS on/off", id="probes.das"),
    Binding("s", "toggle_stack", "Stack", id="probes.stack",
            tooltip="Stack: an encoder-decoder's encoder or decoder, where probes read and DAS swaps"),
    Binding("c", "cycle_position(1)", "Position", id="probes.next_position"),
    Binding("C", "cycle_position(-1)", "Previous position", show=False, id="probes.previous_position"),
    Binding("escape,v", "close", "Cancel / back to Attention", id="probes.close"),
]

FOURIER: list[BindingType] = [
    Binding("left_square_bracket", "snapshot('prev')", "Earlier snapshot", id="fourier.earlier"),
    Binding(
        "right_square_bracket", "snapshot('next')", "Later snapshot (then latest)",
        id="fourier.later",
    ),
    Binding(
        "left_curly_bracket", "snapshot('first')", "First snapshot", show=False, id="fourier.first"
    ),
    Binding(
        "right_curly_bracket", "snapshot('last')", "Last snapshot", show=False, id="fourier.last"
    ),
    Binding("p", "play", "Play the history / stop", id="fourier.play"),
    Binding("escape,f", "close", "Back to Train", id="fourier.close"),
]

HELP: list[BindingType] = [Binding("escape,question_mark,q", "close", "Close", id="help.close")]
OPEN_RUN: list[BindingType] = [Binding("escape", "cancel", "Cancel", id="open_run.cancel")]
SAVE_PRESET: list[BindingType] = [Binding("escape", "cancel", "Cancel", id="save_preset.cancel")]
STEER: list[BindingType] = [Binding("escape", "cancel", "Cancel", id="steer.cancel")]
