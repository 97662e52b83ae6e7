#!/usr/bin/env bash
# The device call behind bench/RESULTS.md's CUDA section: run on the GPU machine with OUT set
# (at most 8 files come back, so the step logs travel as one logs.tgz). TREE: the checkout
# to check (default: this one); wheels/ from scripts/fetch_wheels.sh must be in it.
set -u
export PYTHONUNBUFFERED=1
T=${TREE:-$(cd "$(dirname "$0")/.." && pwd)}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$T"/wheels/*.whl
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/nvidia.txt" 2>&1
cd "$T"
GPU_CHECK_BUDGET=${BUDGET:-300} OUT=/tmp/gc PYTHON=python3 bash bench/gpu_check.sh > /tmp/gc.out 2>&1
echo "gpu_check exit $?" >> /tmp/gc.out
cp /tmp/gc/summary.txt "$OUT/summary.txt" 2>/dev/null
cp /tmp/gc/bench.json "$OUT/bench.json" 2>/dev/null
PYTHONPATH="$T:/tmp/site" timeout ${INTERP_S:-200} python3 -m bench.gpu_interp > "$OUT/interp.json" 2> /tmp/gc/interp.err
echo "interp exit $?" >> /tmp/gc.out
cp /tmp/gc.out /tmp/gc/
tar czf "$OUT/logs.tgz" -C /tmp gc
cat "$OUT/summary.txt"; tail -c 1500 "$OUT/interp.json"
