#!/usr/bin/env bash
# Installs what Baton needs, builds it (Release) and trains the digits MLP:
# prints the progress, the summary and where the run's files went.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/packaging/deps.sh"
bash "$root/packaging/build.sh" "$root/build" -DCMAKE_BUILD_TYPE=Release -DBATON_BUILD_TESTS=OFF
exec "$root/build/bin/baton" train "$root/resources/examples/digits.json"
