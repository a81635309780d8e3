#!/usr/bin/env bash
# Installs what Baton needs, builds it (Release) and runs the main job:
# with a display, baton-studio opens (the Train view holds the digits
# example: press Start); without one, the CLI trains the digits MLP and
# prints the progress, the summary and where the run's files went.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/packaging/deps.sh"
bash "$root/packaging/build.sh" "$root/build" -DCMAKE_BUILD_TYPE=Release -DBATON_BUILD_TESTS=OFF
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x "$root/build/bin/baton-studio" ]; then
  exec "$root/build/bin/baton-studio"
fi
exec "$root/build/bin/baton" train "$root/resources/examples/digits.json"
