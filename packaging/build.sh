#!/usr/bin/env bash
# Configures and builds one build directory: build.sh DIR [cmake args...]
set -euo pipefail
dir=$1
shift
# A unity build (CMakeLists.txt, BATON_UNITY_BUILD): a clean build's
# compile in well under half the CPU time; later arguments may turn it off.
cmake -S "$(dirname "$0")/.." -B "$dir" -G Ninja -DBATON_UNITY_BUILD=ON "$@"
# Two jobs: these machines have two cores and the compiler is memory-light.
cmake --build "$dir" -j "${BATON_JOBS:-2}"
