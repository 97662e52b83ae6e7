#!/usr/bin/env bash
# Installs Debian's chromium when /usr/bin/chromium is missing: tests/browser drives it
# (playwright never downloads a browser of its own). As root, or through sudo.
set -uo pipefail

[ -x /usr/bin/chromium ] && exit 0
echo "ensure_chromium: /usr/bin/chromium missing: installing Debian's chromium for tests/browser"

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "ensure_chromium: not root and no sudo: cannot install chromium; tests/browser will fail" >&2
        exit 0
    fi
    sudo=(sudo)
fi
install=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive
         apt-get install -y -q --no-install-recommends chromium)
# apt-get update only when the package lists lack chromium or are too old to fetch it.
if apt-cache show chromium >/dev/null 2>&1; then
    echo "ensure_chromium: ${install[*]}"
    "${install[@]}" >/dev/null && exit 0
fi
echo "ensure_chromium: apt-get update"
"${sudo[@]}" apt-get update -q >/dev/null || { echo "ensure_chromium: apt-get update failed; tests/browser will fail" >&2; exit 0; }
echo "ensure_chromium: ${install[*]}"
"${install[@]}" >/dev/null || echo "ensure_chromium: could not install chromium; tests/browser will fail" >&2
exit 0
