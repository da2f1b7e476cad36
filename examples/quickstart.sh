#!/usr/bin/env bash
# The main job on the embedded default, on a laptop CPU: every stage of mltk in order.
# Usage: bash examples/quickstart.sh [RUN_DIR]   (needs `mltk` on PATH)
set -euo pipefail
run=${1:-runs/quickstart}
mkdir -p "$run"
mltk --version >&2
mltk --help >&2
