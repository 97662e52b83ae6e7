#!/usr/bin/env bash
# bench/gpu_check.sh: the lab's GPU path, checked in one call on a CUDA machine (issue 17).
#
#   OUT=/tmp/gpucheck bash bench/gpu_check.sh      # here: every GPU step says "skipped: no CUDA"
#   bash bench/gpu_check.sh                         # results in runs/gpu-check/
#
# Steps (each with its own time limit, all inside GPU_CHECK_BUDGET seconds, 440 by
# default, so one hang cannot eat a device call of 8 minutes):
#
#   env         nvidia-smi, Python/torch/CUDA/NCCL versions; carried wheels (wheels/*.whl,
#               see scripts/fetch_wheels.sh) installed offline when a module is missing
#   tests       pytest tests/gpu (bf16 training, fused vs explicit attention, KV-cache
#               decoding GPU vs CPU, GPU checkpoint on the CPU, torch.compile training)
#   gpu-decode  tfx-lab train --preset copy --device cuda, then greedy decoding with the
#               KV cache on the GPU against the CPU on held-out inputs (python -m bench.cuda)
#   cpu-load    that GPU-trained run in a process that sees no GPU: decode, eval, resume
#   ddp         torchrun --nproc_per_node=1: the lab's DDP path over NCCL (python -m bench.cuda ddp)
#   bench       python -m bench --only cuda: tokens/s and MFU, bf16 + fused (+ compile) vs fp32
#
# Each step's output goes to $OUT/<step>.log, the bench's JSON to $OUT/bench.json and one
# line per step to $OUT/summary.txt (8 files: what a device call brings back at most).
# Without CUDA the same steps run on tiny sizes on the CPU to check the plumbing and are
# reported as "skipped: no CUDA". Exit status: 0 unless a step failed or timed out.

set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
OUT=${OUT:-$ROOT/runs/gpu-check}
BUDGET=${GPU_CHECK_BUDGET:-440}
mkdir -p "$OUT" || exit 2
rm -f "$OUT"/{env,tests,gpu-decode,cpu-load,ddp,bench}.log "$OUT/bench.json" "$OUT/summary.txt"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
START=$SECONDS

if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x "$ROOT/.venv/bin/python" ]; then PY=$ROOT/.venv/bin/python
else PY=$(command -v python3 || command -v python); fi
# The checkout is imported in place (no install); an empty user-preset folder keeps
# platformdirs out of the way and the user's own presets out of the results.
mkdir -p "$WORK/presets"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TFX_LAB_PRESETS="$WORK/presets"
export PY OUT WORK ROOT

summary() { printf '%s\n' "$*" | tee -a "$OUT/summary.txt"; }
note() { printf '%s\n' "$*" >"$WORK/$STEP.note"; }  # one line for summary.txt
tfx() { "$PY" -m tui_lab.cli "$@"; }
json_get() {  # json_get FILE FORMAT: str.format(FORMAT, **last JSON line of FILE)
    "$PY" - "$1" "$2" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
d = json.loads(lines[-1]) if lines else {}
try:
    print(sys.argv[2].format(**d))
except Exception as exc:  # a missing key shows as such, not as a traceback
    print(f"? ({type(exc).__name__}: {exc})")
EOF
}
export -f note tfx json_get

# run_step NAME LIMIT_S FUNCTION: run FUNCTION with its output in $OUT/NAME.log under a
# time limit cut to what is left of the budget. FUNCTION exits 0 (pass), 3 (skipped: its
# note says why) or anything else (failed); a note, if written, ends the summary line.
FAILED=0
run_step() {
    local name=$1 limit=$2 fn=$3 left rc status t0
    left=$((BUDGET - (SECONDS - START)))
    if [ "$left" -lt 20 ]; then
        summary "$(printf '%-10s %-7s %4ss  %s' "$name" SKIP 0 "skipped: out of time (budget ${BUDGET}s)")"
        FAILED=1
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "[gpu_check] $name (limit ${limit}s, $((SECONDS - START))s so far)" >&2
    t0=$SECONDS
    STEP=$name timeout -k 10 "$limit" bash -c "set -o pipefail; $fn" >"$OUT/$name.log" 2>&1
    rc=$?
    case $rc in
        0) status=PASS ;;
        3) status=SKIP ;;
        124 | 137) status=TIMEOUT; FAILED=1; echo "[gpu_check] killed after ${limit}s" >>"$OUT/$name.log" ;;
        *) status=FAIL; FAILED=1 ;;
    esac
    local msg=""
    [ -f "$WORK/$name.note" ] && msg=$(head -c 600 "$WORK/$name.note")
    [ "$status" = TIMEOUT ] && msg="timed out after ${limit}s${msg:+; $msg}"
    [ "$status" = FAIL ] && msg="exit $rc${msg:+; $msg} (see $name.log)"
    summary "$(printf '%-10s %-7s %4ss  %s' "$name" "$status" $((SECONDS - t0)) "$msg")"
}

# ---- env: versions, the GPU, carried wheels ---------------------------------------------
NEEDED="import yaml, safetensors, numpy, rich, platformdirs, pytest"
{
    echo "### machine"; uname -a; nproc; echo "python: $PY"; "$PY" -V
    echo "### nvidia-smi"
    if command -v nvidia-smi >/dev/null; then timeout 30 nvidia-smi; else echo "nvidia-smi: not found"; fi
    echo "### packages"
    if "$PY" -c "$NEEDED" 2>/dev/null; then
        echo "all needed modules import; no wheels installed"
    elif ls "$ROOT"/wheels/*.whl >/dev/null 2>&1; then
        echo "installing carried wheels offline into $WORK/site:"; ls "$ROOT"/wheels/
        timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --upgrade --target "$WORK/site" "$ROOT"/wheels/*.whl
    else
        echo "missing modules and no wheels/ (run scripts/fetch_wheels.sh, carry wheels)"
    fi
} >"$WORK/env-pre.log" 2>&1
[ -d "$WORK/site" ] && export PYTHONPATH="$PYTHONPATH:$WORK/site"
HAS_CUDA=$(timeout 60 "$PY" -c "import torch; print(int(torch.cuda.is_available()))" 2>>"$WORK/env-pre.log" | tail -1)
[ "$HAS_CUDA" = 1 ] || HAS_CUDA=0
if [ "$HAS_CUDA" = 1 ]; then DEV=cuda; else DEV=cpu; fi
export HAS_CUDA DEV

step_env() {
    cat "$WORK/env-pre.log"
    "$PY" - <<'EOF'
import importlib, os, platform, torch
print("### versions")
print("python", platform.python_version(), "| torch", torch.__version__, "| CUDA", torch.version.cuda,
      "| cuDNN", torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)
for mod in ("yaml", "safetensors", "numpy", "rich", "platformdirs", "pytest", "triton"):
    try:
        m = importlib.import_module(mod)
        print(f"{mod} {getattr(m, '__version__', '?')} ({m.__file__})")
    except Exception as exc:
        print(f"{mod}: MISSING ({exc})")
import tui_lab.core.training.train, tui_lab.core.decoding.decode  # noqa: E401 - the core imports without the UI
print("core imports: ok")
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"device: {p.name}, {p.total_memory / 2**30:.0f} GiB, sm_{p.major}{p.minor}, {p.multi_processor_count} SMs")
    print("bf16 supported:", torch.cuda.is_bf16_supported(), "| flash sdp:", torch.backends.cuda.flash_sdp_enabled(),
          "| NCCL:", torch.cuda.nccl.version(), "| device count:", torch.cuda.device_count())
    with open(os.environ["WORK"] + "/env.note", "w") as f:
        f.write(f"{p.name}, torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {torch.cuda.nccl.version()}\n")
else:
    print("CUDA: not available")
    with open(os.environ["WORK"] + "/env.note", "w") as f:
        f.write(f"no CUDA; torch {torch.__version__}\n")
EOF
}

step_tests() {
    "$PY" -m pytest -q -rA -p no:cacheprovider tests/gpu 2>&1 | tee "$WORK/tests.out"
    local rc=${PIPESTATUS[0]}
    local last
    last=$(grep -E "(passed|failed|skipped|error)" "$WORK/tests.out" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')
    if [ "$HAS_CUDA" = 0 ] && [ "$rc" = 0 ]; then note "skipped: no CUDA ($last)"; exit 3; fi
    note "$last"
    exit "$rc"
}

step_gpu_decode() {
    local steps=1000 limit=90 extra=""
    [ "$HAS_CUDA" = 0 ] && { steps=40; extra=" (cpu vs cpu, tiny run)"; }
    echo "### train copy on $DEV"
    tfx train --preset copy --device "$DEV" --steps $steps --max-seconds $limit --out "$WORK/gpu-run" --json \
        | tee "$WORK/train.json" || exit 1
    echo "### decode-compare: $DEV (KV cache, and without) vs cpu"
    "$PY" -m bench.cuda decode-compare --run "$WORK/gpu-run" --device "$DEV" --n 30 | tee "$WORK/compare.json"
    local rc=${PIPESTATUS[0]}
    local fig
    fig=$(json_get "$WORK/compare.json" \
        "{same_as_cpu}/{inputs} greedy outputs same as the CPU's, cache = no cache {cache_same_as_no_cache}/{inputs}, max prob diff {max_prob_diff}")
    local trained
    trained=$(json_get "$WORK/train.json" "trained {step} steps in {elapsed:.0f}s ({reason}), exact match {exact_match}, {tokens_per_s:.0f} tok/s on {device}")
    if [ "$HAS_CUDA" = 0 ]; then
        [ "$rc" = 0 ] || { note "plumbing failed on the CPU: $fig"; exit 1; }
        note "skipped: no CUDA; plumbing checked$extra: $fig"; exit 3
    fi
    note "$trained; $fig"
    exit "$rc"
}

step_cpu_load() {
    [ -f "$WORK/gpu-run/state.json" ] || { note "no run from gpu-decode"; exit 1; }
    export CUDA_VISIBLE_DEVICES=""  # this process sees no GPU at all
    echo "### decode on the CPU"
    tfx decode --run "$WORK/gpu-run" --input 31415 --json | tee "$WORK/decode.json" || exit 1
    echo "### eval on the CPU"
    tfx eval --run "$WORK/gpu-run" --n 200 --json | tee "$WORK/eval.json" || exit 1
    echo "### resume on the CPU for 10 steps (a copy of the run)"
    cp -r "$WORK/gpu-run" "$WORK/cpu-resume"
    local step
    step=$("$PY" -c "import json; print(json.load(open('$WORK/gpu-run/state.json'))['step'])")
    tfx train --resume "$WORK/cpu-resume" --device cpu --steps $((step + 10)) --json | tee "$WORK/resume.json" || exit 1
    local fig
    fig="decode 31415 -> $(json_get "$WORK/decode.json" '{output}'), eval exact match $(json_get "$WORK/eval.json" '{exact_match}') on 200, resumed to step $(json_get "$WORK/resume.json" '{step}')"
    if [ "$HAS_CUDA" = 0 ]; then note "skipped: no CUDA (a CPU-trained run loaded instead: $fig)"; exit 3; fi
    note "GPU-trained run on the CPU: $fig"
}

step_ddp() {
    local steps=200
    [ "$HAS_CUDA" = 0 ] && steps=20
    export NCCL_DEBUG=${NCCL_DEBUG:-INFO}
    "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 \
        -m bench.cuda ddp --out "$WORK/ddp-run" --device "$DEV" --steps $steps | tee "$WORK/ddp.json"
    local rc=${PIPESTATUS[0]}
    echo "### the DDP-written run, evaluated on the CPU"
    CUDA_VISIBLE_DEVICES="" tfx eval --run "$WORK/ddp-run" --n 100 --json || rc=1
    local fig
    fig=$(json_get "$WORK/ddp.json" "backend {backend}, {ddp_wrapped}, {steps} steps ({done}), loss {first_loss} -> {last_loss}")
    if [ "$HAS_CUDA" = 0 ]; then
        [ "$rc" = 0 ] || { note "gloo plumbing failed on the CPU: $fig"; exit 1; }
        note "skipped: no CUDA; torchrun plumbing checked with gloo: $fig"; exit 3
    fi
    note "torchrun --nproc_per_node=1: $fig"
    exit "$rc"
}

step_bench() {
    "$PY" -m bench --only cuda --json >"$OUT/bench.json" || { note "bench exited non-zero"; exit 1; }
    if [ "$HAS_CUDA" = 0 ]; then
        echo "### code path on the CPU, tiny sizes (--cuda-section-on-cpu --quick)"
        "$PY" -m bench --only cuda --cuda-section-on-cpu --quick || { note "CPU code path failed"; exit 1; }
        note "skipped: no CUDA (code path checked on the CPU at tiny sizes)"; exit 3
    fi
    "$PY" - "$OUT/bench.json" <<'EOF' | tee "$WORK/bench.fig"
import json, sys
d = json.load(open(sys.argv[1]))
rows = []
for name, r in d["cuda"].items():
    if "tokens_per_s" in r:
        mfu = "n/a" if r.get("mfu") is None else f"{r['mfu']:.1%}"
        rows.append(f"{name} {r['tokens_per_s']:,.0f} tok/s ({r.get('speedup_vs_fp32', '?')}x, MFU {mfu})")
    else:
        rows.append(f"{name}: {r.get('error') or r.get('skipped')}")
print("; ".join(rows) + f"; {d.get('cuda_sizes')}; matmul {d.get('cuda_matmul_bf16_tflops_measured')} TFLOP/s")
EOF
    note "$(cat "$WORK/bench.fig")"
    "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if 'tokens_per_s' in d['cuda'].get('bf16_fused', {}) else 1)" "$OUT/bench.json"
}
export -f step_env step_tests step_gpu_decode step_cpu_load step_ddp step_bench

summary "gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), device $DEV, budget ${BUDGET}s"
run_step env 60 step_env
run_step tests 150 step_tests
run_step gpu-decode 120 step_gpu_decode
run_step cpu-load 90 step_cpu_load
run_step ddp 120 step_ddp
run_step bench 270 step_bench
summary "total $((SECONDS - START))s; $([ $FAILED = 0 ] && echo 'no step failed' || echo 'SOME STEPS FAILED')"
rm -rf "$WORK"
exit $FAILED
