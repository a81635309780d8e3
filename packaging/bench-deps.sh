#!/usr/bin/env bash
# Installs what the benchmarks compare against (PyTorch with OpenBLAS).
# Large: kept out of packaging/test.sh and CI. Idempotent.
set -euo pipefail
missing=()
for p in python3-torch libopenblas0; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
