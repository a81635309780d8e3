#!/usr/bin/env bash
# Installs the Debian packages Baton needs to build and test. Idempotent:
# packages already present are skipped, and `apt-get update` runs only when
# something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libdnnl-dev            # CPU GEMM (oneDNN): picks the right ISA by itself
  nlohmann-json3-dev     # JSON
  libcli11-dev           # CLI parsing
  zlib1g-dev             # .gz datasets, CRC32 checksums
  libsqlite3-dev         # run history
  libssl-dev             # HMAC-SHA256 for the parameter servers' job secret (libcrypto)
  libhwloc-dev           # topology discovery
  libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev
  qt6-base-dev libqcustomplot-dev
  file dpkg-dev          # used by cpack's DEB generator (dpkg-shlibdeps)
)
# `deps.sh test`: what the tests need beyond the build.
if [ "${1:-}" = test ]; then
  packages+=(bindfs fuse3)  # a FUSE mount: the history on a network-like file system
  packages+=(iproute2 util-linux)  # the multi-host test bed: ip netns, tc, unshare
  packages+=(clang libclang-rt-14-dev)  # libFuzzer targets (tests/fuzz)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
