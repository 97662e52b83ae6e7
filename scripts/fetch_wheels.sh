#!/usr/bin/env bash
# scripts/fetch_wheels.sh: download, here, the wheels bench/gpu_check.sh installs offline on
# the GPU device machine (Python 3.12, x86-64, PyTorch preinstalled, no package registry).
#
#   bash scripts/fetch_wheels.sh            # what that machine lacks for the core: platformdirs
#   ALL=1 bash scripts/fetch_wheels.sh      # also the core's other needs, for a bare Python 3.12
#
# Wheels land in wheels/ (git-ignored); name it in the device call's carry list. The
# device machine already has pyyaml, safetensors, numpy, rich and pytest (its package
# list: /work/.library/device/KINDS.md); textual is not needed there (tests/gpu and the
# headless commands never import it). gpu_check.sh installs the wheels only when one of
# the modules it needs fails to import, into a temporary --target folder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || command -v python3 )}
PKGS=(platformdirs==4.3.8)
if [ "${ALL:-0}" = 1 ]; then
    PKGS+=(pyyaml==6.0.2 safetensors==0.5.3 numpy==2.2.6 rich==14.0.0 markdown-it-py==3.0.0 mdurl==0.1.2 pygments==2.19.1)
fi
mkdir -p wheels
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 --platform any -d wheels "${PKGS[@]}"
ls -l wheels
du -sh wheels
