#!/usr/bin/env bash
# Configures and builds one build directory: build.sh DIR [cmake args...]
set -euo pipefail
dir=$1
shift
cmake -S "$(dirname "$0")/.." -B "$dir" -G Ninja "$@"
# Two jobs: these machines have two cores and the compiler is memory-light.
cmake --build "$dir" -j "${BATON_JOBS:-2}"
