"""The ``real_models`` item: a GPT-2-small-shaped model opened from files, the lab vs ``transformers``.

The model: GPT-2 small's shape (n_embd 768, 12 layers, 12 heads, vocabulary
50,257, 1,024 positions; 124 M parameters) with random weights, built by
``transformers`` and written with ``save_pretrained`` to a temporary folder
beside a small byte-level BPE (``bench/hf_factory.py``; fewer tokens
than the model's vocabulary, which the lab accepts). The lab opens that folder
with ``open_files``, as ``--model`` does; ``transformers`` keeps the model it
saved (the same weights). Speed does not depend on the weights' values.

- decode: greedy continuations of ``NEW_TOKENS`` tokens after the same prompt
  (the prompt's prefill included), the lab's ``generate`` (the Decode pane's
  call, KV cache, no capture) against ``transformers``' ``generate(do_sample=
  False)``, alternated in one process at the same thread count
  (``common.interleaved``; 1 thread, then torch's default, 16 tokens, where
  it is more than 1, the run is not ``--quick`` and the load average is below
  the core count). Each side's tokens are compared. With one thread the
  headline is the CPU-time ratio (steadier on a shared machine; the wall
  ratio is reported beside it).
- bandwidth: the lab's tokens/s times the bytes of weights a token reads
  (every parameter once, tied ones once) over this machine's copy speed at the
  same thread count (a 1 GiB ``copy_``, bytes read plus bytes written).
- first frame and model ready: ``tfx-lab --model FOLDER`` in a real pty
  (``bench.measure.Terminal``, 120x40), as the ``lab`` item measures first paint.
- resident memory: a fresh process imports torch and the core, opens the model
  and decodes two tokens (so every weight page has been read); the growth of its
  RSS over the weight bytes, and the absolute.
- attention capture: the weights of all 144 heads over a 128-token text, from
  one forward pass under ``capture_attention`` and from ``generate(...,
  capture=True)`` with one new token (what the Attention pane runs).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from bench.common import Contender, Row, Section, interleaved

SHAPE = dict(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257)
PROMPT = "Once upon a time there was a little girl who liked to read stories about cats"
CAPTURE_TOKENS = 128
SPEED_GOAL = 1.2  # lab tokens/s over transformers'
FIRST_FRAME_GOAL_S = 1.0
READY_GOAL_S = 3.0
RSS_GOAL = 1.3  # resident memory growth over the weight bytes
CAPTURE_GOAL_S = 1.0
COPY_BYTES = 1 << 30


def write_model(folder: Path) -> Any:
    """A random GPT-2-small-shaped model and a BPE into ``folder``; the transformers model (eval)."""
    import transformers

    from bench.hf_factory import save_tokenizer

    # Token 0 (the BPE's <|endoftext|>) ends a continuation on both sides, as in GPT-2.
    config = transformers.GPT2Config(**SHAPE, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    model.save_pretrained(folder)
    save_tokenizer(folder, SHAPE["vocab_size"])
    return model


def copy_speed(threads: int, rounds: int = 3) -> dict[str, float]:
    """GB/s of a 1 GiB tensor copy at ``threads`` (bytes read + bytes written), best of ``rounds``."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a = torch.ones(COPY_BYTES // 4)
        b = torch.zeros_like(a)  # both written once: no page faults inside the timed copies
        wall, cpu = [], []
        for _ in range(rounds):
            t0, c0 = time.perf_counter(), time.process_time()
            b.copy_(a)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        del a, b
    finally:
        torch.set_num_threads(before)
    moved = 2 * COPY_BYTES
    return {"gb_per_s": moved / min(wall) / 1e9, "gb_per_s_cpu": moved / max(min(cpu), 1e-9) / 1e9}


def decode_speed(lab: Any, hf: Any, threads: int, new_tokens: int, budget_s: float) -> dict[str, Any]:
    """Both generates alternated at ``threads``; rates, ratios and whether the tokens agree."""
    from tui_lab.core.decoding.decode import generate

    ids = lab.task.vocab.encode(PROMPT)
    x = torch.tensor([ids])
    mask = torch.ones_like(x)

    def run_lab(_: int) -> float:
        return float(len(generate(lab.model, lab.task, PROMPT, max_new_tokens=new_tokens, capture=False).tokens))

    def run_hf(_: int) -> float:
        with torch.inference_mode():
            out = hf.generate(x, attention_mask=mask, do_sample=False, max_new_tokens=new_tokens, pad_token_id=0)
        return float(out.shape[1] - len(ids))

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        lab_tokens = generate(lab.model, lab.task, PROMPT, max_new_tokens=new_tokens, capture=False).tokens
        with torch.inference_mode():
            hf_tokens = hf.generate(x, attention_mask=mask, do_sample=False, max_new_tokens=new_tokens,
                                    pad_token_id=0)[0, len(ids):].tolist()
        res = interleaved([Contender("transformers", run_hf), Contender("lab", run_lab)], reference="transformers",
                          budget_s=budget_s, window_s=0.5, min_rounds=3, warmup=1)
    finally:
        torch.set_num_threads(before)
    res["identical"] = lab_tokens == hf_tokens
    res["new_tokens"] = len(lab_tokens)
    res["prompt_tokens"] = len(ids)
    res["threads"] = threads
    return res


def time_per_token(lab: Any, hf: Any, new_tokens: int, rounds: int) -> dict[str, float]:
    """Where a lab token's time goes (1 thread, CPU ms, medians of alternated ``rounds``):
    the weights' matrix-vector products alone (every projection once, in the layouts the
    model uses), the lab's cached forward step, its ``generate`` per token, and the same
    two for transformers (its forward with ``past_key_values``, its ``generate``)."""
    import torch.nn.functional as F

    from tui_lab.core.decoding.decode import generate

    model = lab.model
    mats: list[tuple[torch.Tensor, torch.Tensor | None]] = []
    for layer in model.decoder.layers:
        a = layer.self_attn
        mats.append(a.packed_weights())  # the stacked q/k/v projection a decode uses
        mats += [(m.weight, m.bias) for m in (a.w_o, *(getattr(layer.ff, n, None) for n in ("gate", "lin1", "lin2")))
                 if m is not None]
    mats.append((model.lm_head.weight, None))
    inputs = {w.shape[1]: torch.randn(1, 1, w.shape[1]) for w, _ in mats}
    ids = lab.task.vocab.encode(PROMPT)
    x = torch.tensor([ids])

    def matvecs() -> float:
        c0 = time.process_time()
        with torch.inference_mode():
            for w, b in mats:
                F.linear(inputs[w.shape[1]], w, b)
        return time.process_time() - c0

    def lab_step() -> float:
        with torch.inference_mode():
            cache = model.new_cache()
            model(x, cache=cache, last_only=True)
            c0 = time.process_time()
            for _ in range(new_tokens):
                model(x[:, -1:], cache=cache, last_only=True)
        return (time.process_time() - c0) / new_tokens

    def hf_step() -> float:
        with torch.inference_mode():
            past = hf(x, use_cache=True).past_key_values
            c0 = time.process_time()
            for _ in range(new_tokens):
                past = hf(x[:, -1:], past_key_values=past, use_cache=True).past_key_values
        return (time.process_time() - c0) / new_tokens

    def lab_generate() -> float:
        c0 = time.process_time()
        n = len(generate(model, lab.task, PROMPT, max_new_tokens=new_tokens, capture=False).tokens)
        return (time.process_time() - c0) / n

    def hf_generate() -> float:
        c0 = time.process_time()
        with torch.inference_mode():
            out = hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=new_tokens,
                              pad_token_id=0)
        return (time.process_time() - c0) / (out.shape[1] - len(ids))

    fns = {"matvecs": matvecs, "lab_step": lab_step, "transformers_step": hf_step,
           "lab_generate": lab_generate, "transformers_generate": hf_generate}
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    times: dict[str, list[float]] = {k: [] for k in fns}
    try:
        for r in range(rounds):
            for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                times[name].append(fns[name]())
    finally:
        torch.set_num_threads(before)
    return {f"{k}_ms": statistics.median(v) * 1e3 for k, v in times.items()}


def text_of(tokenizer: Any, n: int) -> tuple[str, list[int]]:
    """A text that the tokenizer encodes as exactly ``n`` tokens (as near as it gets), and its ids."""
    from bench.hf_factory import TEXT

    ids = tokenizer.encode(TEXT * (1 + n // 20))
    best: tuple[str, list[int]] | None = None
    for k in range(n, n + 8):  # decode then encode may merge across the cut: try a few cuts
        text = tokenizer.decode(ids[:k])
        again = tokenizer.encode(text)
        if len(again) == n:
            return text, again
        if best is None or abs(len(again) - n) < abs(len(best[1]) - n):
            best = (text, again)
    assert best is not None
    return best


def capture_times(lab: Any, reps: int, threads: int = 1) -> dict[str, Any]:
    """Seconds to capture every head's weights over a ``CAPTURE_TOKENS``-token text (median of ``reps``),
    wall clock and this process's CPU time, at ``threads``."""
    from tui_lab.core.decoding.decode import generate
    from tui_lab.core.model.capture import capture_attention

    text, ids = text_of(lab.task.vocab, CAPTURE_TOKENS)
    x = torch.tensor([ids])
    times: dict[str, list[float]] = {"forward_s": [], "forward_cpu_s": [], "generate_s": [], "generate_cpu_s": []}
    heads, shown, rows = 0, 0, set()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            with torch.no_grad(), capture_attention(lab.model) as store:
                lab.model(x)
            times["forward_s"].append(time.perf_counter() - t0)
            times["forward_cpu_s"].append(time.process_time() - c0)
            heads = sum(int(w.shape[1]) for w in store.matrices().values())
            t0, c0 = time.perf_counter(), time.process_time()
            result = generate(lab.model, lab.task, text, max_new_tokens=1, capture=True)
            times["generate_s"].append(time.perf_counter() - t0)
            times["generate_cpu_s"].append(time.process_time() - c0)
            shown = sum(int(w.shape[0]) for w in result.attention.values())
            rows = {int(w.shape[1]) for w in result.attention.values()}
    finally:
        torch.set_num_threads(before)
    out: dict[str, Any] = {k: statistics.median(v) for k, v in times.items()}
    out.update(tokens=len(ids), heads=heads, heads_in_generate=shown, query_rows=sorted(rows), threads=threads)
    return out


_RSS_CHILD = r"""
import json, sys, time
def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) * 1024
    return out
t0, c0 = time.perf_counter(), time.process_time()
import torch
from tui_lab.core.decoding.decode import generate
from tui_lab.core.opening.from_files import open_files, weight_bytes
imported, imported_cpu = time.perf_counter() - t0, time.process_time() - c0
base = status()
t0, c0 = time.perf_counter(), time.process_time()
loaded = open_files(sys.argv[1], dtype=sys.argv[3] if len(sys.argv) > 3 else "float32")
opened, opened_cpu = time.perf_counter() - t0, time.process_time() - c0
after_open = status()
t0, c0 = time.perf_counter(), time.process_time()
generate(loaded.model, loaded.task, sys.argv[2], max_new_tokens=2, capture=False)
decoded, decoded_cpu = time.perf_counter() - t0, time.process_time() - c0
after_decode = status()
print(json.dumps({"import_s": imported, "open_s": opened, "decode_2_s": decoded, "import_cpu_s": imported_cpu,
                  "open_cpu_s": opened_cpu, "decode_2_cpu_s": decoded_cpu, "base": base,
                  "after_open": after_open, "after_decode": after_decode,
                  "weight_bytes": weight_bytes(loaded.model), "threads": torch.get_num_threads()}))
"""


def resident_memory(folder: Path, dtype: str = "float32") -> dict[str, Any]:
    """RSS of a fresh process around ``open_files`` (see the module docstring)."""
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", _RSS_CHILD, str(folder), PROMPT, dtype],
                          capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[1])
    if proc.returncode != 0:
        raise RuntimeError(f"the memory probe failed: {proc.stderr.strip().splitlines()[-1:]}")
    res: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    weights = res["weight_bytes"]
    res["growth_over_weights"] = (res["after_decode"]["VmRSS"] - res["base"]["VmRSS"]) / weights
    res["growth_over_weights_after_open"] = (res["after_open"]["VmRSS"] - res["base"]["VmRSS"]) / weights
    return res


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used so far (its threads included)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_frame(folder: Path) -> dict[str, Any]:
    """``tfx-lab --model FOLDER`` in a pty: seconds to the first frame and to the model ready.

    The first frame shows the model's name (the folder) in the status line while torch
    loads; the status goes from "loading torch" to "opening FOLDER" to "torch ... ready"
    once the model is open. Each moment is also taken as the CPU seconds the lab had
    used by then (on a busy machine, the time it would take on an idle one).
    """
    from bench import measure

    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(measure.COLS), LINES=str(measure.ROWS))
    # An installed lab runs from cached bytecode; where PYTHONDONTWRITEBYTECODE is set (this
    # machine sets it) every launch compiled the package again. Compiled once, then cached.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(__file__).resolve().parents[1] / "tui_lab")],
                   env=env, check=False, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="tfx-bench-real-") as runs:
        env["TFX_LAB_RUNS"] = runs
        code = "import sys; from tui_lab.cli import main; sys.exit(main())"
        term = measure.Terminal([sys.executable, "-W", "ignore", "-c", code, "--model", str(folder)], env)
        try:
            term.expect(folder.name.encode(), 60)
            painted, painted_cpu = time.perf_counter() - term.started, _cpu_seconds(term.proc.pid)
            term.expect(b"opening", 180)
            # The status line's words once the model is open (nothing else on screen says them).
            term.expect(f"torch {torch.__version__.split('+')[0]} ready".encode(), 180)
            ready, ready_cpu = time.perf_counter() - term.started, _cpu_seconds(term.proc.pid)
            if b"failed" in term.buffer:
                raise RuntimeError("the lab could not open the model")
        finally:
            term.close()
    return {"first_frame_s": painted, "first_frame_cpu_s": painted_cpu, "ready_s": ready, "ready_cpu_s": ready_cpu}


def _lab_accepts_model() -> bool:
    import argparse

    from tui_lab.cli.lab import add_options

    parser = argparse.ArgumentParser()
    add_options(parser)
    return any("--model" in a.option_strings for a in parser._actions)


def real_models(quick: bool) -> Section:
    from tui_lab.core.model.device import default_threads
    from tui_lab.core.opening.from_files import open_files, weight_bytes

    sec = Section("real_models", "real models: GPT-2-small-shaped (124 M, random weights) from save_pretrained")
    new_tokens = 16 if quick else 32
    values: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tfx-bench-gpt2-") as tmp:
        folder = Path(tmp)
        t_write, hf = _timed(lambda: write_model(folder))
        t_open, lab = _timed(lambda: open_files(str(folder)))
        weights = weight_bytes(lab.model)
        n_params = sum(p.numel() for p in {p.data_ptr(): p for p in lab.model.parameters()}.values())
        values["real_models_setup"] = {"write_s": round(t_write, 2), "open_model_s": round(t_open, 3),
                                       "params": n_params, "weight_bytes": weights,
                                       "transformers_params": hf.num_parameters()}

        many = default_threads()
        load = os.getloadavg()[0]
        thread_counts = [1]
        if quick or many <= 1:
            values["real_models_threads_note"] = "default thread count not measured (--quick or 1 core)"
        elif load > many:
            # More runnable processes than cores: several threads spin at every barrier
            # waiting for a descheduled peer, and the figure says nothing (see the thread probe).
            values["real_models_threads_note"] = (f"{many} threads not measured: load average {load:.1f} on "
                                                  f"{os.cpu_count()} cores")
        else:
            thread_counts.append(many)
        speeds = {}
        for n in thread_counts:
            budget = 12 if quick else (30 if n == 1 else 10)
            speeds[n] = res = decode_speed(lab, hf, n, new_tokens if n == 1 else 16, budget)
            res["copy"] = copy_speed(n)
            rate = res["lab"]["median_cpu"] if n == 1 else res["lab"]["median"]
            copy = res["copy"]["gb_per_s_cpu"] if n == 1 else res["copy"]["gb_per_s"]
            res["bandwidth_fraction"] = weights * rate / (copy * 1e9)
            res["bandwidth_fraction_wall"] = weights * res["lab"]["median"] / (res["copy"]["gb_per_s"] * 1e9)
        values["real_models_decode"] = speeds
        one = speeds[1]
        values["real_models_speed_ratio"] = round(one["lab"]["ratio_cpu"], 3)
        values["real_models_speed_ratio_wall"] = round(one["lab"]["ratio"], 3)
        values["real_models_bandwidth_fraction"] = round(one["bandwidth_fraction"], 3)

        values["real_models_per_token"] = time_per_token(lab, hf, new_tokens, 2 if quick else 3)
        cap = capture_times(lab, 2 if quick else 3)
        values["real_models_capture"] = cap
        del hf
        mem = resident_memory(folder)
        values["real_models_memory"] = mem
        values["real_models_rss_over_weights"] = round(mem["growth_over_weights"], 3)
        if _lab_accepts_model():
            frames = [first_frame(folder) for _ in range(1 if quick else 3)]
            ui = {k: statistics.median(f[k] for f in frames) for k in frames[0]}
            ui["runs"] = len(frames)
        else:
            ui = {"first_frame_s": None, "ready_s": None, "runs": 0,
                  "note": "tfx-lab has no --model option yet: open_files alone measured"}
        values["real_models_ui"] = ui
    sec.values = values
    sec.rows = _rows(values, new_tokens)
    return sec


def _timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def _rows(v: dict[str, Any], new_tokens: int) -> list[Row]:
    rows = []
    setup = v["real_models_setup"]
    for n, res in v["real_models_decode"].items():
        lab, hf = res["lab"], res["transformers"]
        ratio = lab["ratio_cpu"] if n == 1 else lab["ratio"]
        rows.append(Row(
            f"greedy tokens/s, lab / transformers ({n} thread{'s' if n > 1 else ''})", f"{ratio:.2f}x",
            f">= {SPEED_GOAL:g}x", ratio >= SPEED_GOAL,
            f"{'CPU-time' if n == 1 else 'wall'} ratio, median of {res['rounds']} rounds; lab {lab['median_cpu']:.1f} "
            f"vs {hf['median_cpu']:.1f} tok/s on CPU time, {lab['median']:.1f} vs {hf['median']:.1f} wall "
            f"(wall ratio {lab['ratio']:.2f}x, range {lab['ratio_min']:.2f}-{lab['ratio_max']:.2f}); "
            f"{res['new_tokens']} new tokens after a {res['prompt_tokens']}-token prompt, prefill included; "
            f"tokens {'identical' if res['identical'] else 'DIFFER'}"))
        rows.append(Row(
            f"  as a fraction of the copy speed ({n} thread{'s' if n > 1 else ''})",
            f"{res['bandwidth_fraction']:.0%}", "", None,
            f"{setup['weight_bytes'] / 1e6:.0f} MB of weights per token (tied once) x lab tok/s over a 1 GiB copy at "
            f"{res['copy']['gb_per_s_cpu' if n == 1 else 'gb_per_s']:.1f} GB/s (read + write; wall copy "
            f"{res['copy']['gb_per_s']:.1f} GB/s, wall fraction {res['bandwidth_fraction_wall']:.0%})"))
    if "real_models_threads_note" in v:
        rows.append(Row("greedy tokens/s at the default thread count", "n/a", "", None, v["real_models_threads_note"]))
    per = v["real_models_per_token"]
    rows.append(Row("where a lab token's time goes (1 thread, CPU ms)", f"{per['lab_generate_ms']:.1f} ms", "", None,
                    f"the weights' matrix-vector products alone {per['matvecs_ms']:.1f} ms; the lab's cached forward "
                    f"step {per['lab_step_ms']:.1f} ms; generate per token {per['lab_generate_ms']:.1f} ms (the rest: "
                    f"the prompt's prefill, the step table); transformers: forward step {per['transformers_step_ms']:.1f}"
                    f" ms, generate per token {per['transformers_generate_ms']:.1f} ms"))
    ui = v["real_models_ui"]
    if ui["first_frame_s"] is None:
        rows.append(Row("tfx-lab --model: first frame / model ready", "n/a", f"<= {FIRST_FRAME_GOAL_S:g} s", None,
                        ui["note"]))
    else:
        for key, label, goal in (("first_frame", "first painted frame", FIRST_FRAME_GOAL_S),
                                 ("ready", "model ready", READY_GOAL_S)):
            wall, cpu = ui[f"{key}_s"], ui[f"{key}_cpu_s"]
            rows.append(Row(f"tfx-lab --model: {label}", f"{wall:.2f} s", f"<= {goal:g} s", wall <= goal,
                            f"real pty 120x40, wall clock from process start, median of {ui['runs']}; the lab's "
                            f"CPU time by then {cpu:.2f} s" + ("" if key == "first_frame" else
                                                               " (torch import, then open_files)")))
    mem = v["real_models_memory"]
    rows.append(Row("open_files in a fresh process", f"{mem['open_s']:.2f} s", "", None,
                    f"CPU {mem['open_cpu_s']:.2f} s; after importing torch and the core ({mem['import_s']:.1f} s, CPU "
                    f"{mem['import_cpu_s']:.1f} s); the first 2-token decode then {mem['decode_2_s']:.2f} s (CPU "
                    f"{mem['decode_2_cpu_s']:.2f} s: the weights' pages are read in)"))
    grow = mem["after_decode"]["VmRSS"] - mem["base"]["VmRSS"]
    rows.append(Row("resident memory / weight bytes", f"{mem['growth_over_weights']:.2f}x", f"<= {RSS_GOAL:g}x",
                    mem["growth_over_weights"] <= RSS_GOAL,
                    f"RSS growth {grow / 1e6:.0f} MB over {mem['weight_bytes'] / 1e6:.0f} MB of weights, after open and "
                    f"a 2-token decode (after open alone {mem['growth_over_weights_after_open']:.2f}x); absolute "
                    f"{mem['after_decode']['VmRSS'] / 1e6:.0f} MB (anon {mem['after_decode']['RssAnon'] / 1e6:.0f}, "
                    f"file {mem['after_decode']['RssFile'] / 1e6:.0f}), {mem['base']['VmRSS'] / 1e6:.0f} MB after "
                    "importing torch and the core"))
    cap = v["real_models_capture"]
    for key, label in (("generate", "generate(capture=True), 1 new token"), ("forward", "one forward pass")):
        wall, cpu = cap[f"{key}_s"], cap[f"{key}_cpu_s"]
        rows.append(Row(f"attention of {cap['tokens']} tokens, {cap['heads']} heads: {label}", f"{cpu:.2f} s",
                        f"<= {CAPTURE_GOAL_S:g} s", cpu <= CAPTURE_GOAL_S,
                        f"CPU time, median; wall {wall:.2f} s; {cap['threads']} thread; generate shows "
                        f"{cap['heads_in_generate']} heads, query rows {cap['query_rows']}"))
    return rows
