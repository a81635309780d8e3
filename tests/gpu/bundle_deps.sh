#!/usr/bin/env bash
# Unpacks the Debian packages that the GPU checks' build needs into
# .gpu-deps/ of the checkout (git ignores it), for the GPU machine, which
# has CUDA, cmake, ninja and Python but no Debian -dev packages and cannot
# fetch any: run it here, then carry .gpu-deps with the working tree (it
# must stay within the 64 MiB that travels, with the tree: checked below).
#
#   tests/gpu/bundle_deps.sh            (then run_gpu_checks.sh uses it)
#
# OpenMPI and Qt are left out: the GPU checks build without them (the
# studio off, MPI off when it is not found).
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=$SRC/.gpu-deps
LIMIT_MIB=${BATON_GPU_BUNDLE_LIMIT_MIB:-56}  # the tree's ~5 MiB and room to spare under 64

packages=(
  libdnnl-dev libdnnl2            # oneDNN (the CPU reference the GPU tests compare against)
  ocl-icd-libopencl1              # libOpenCL.so.1, which libdnnl.so.2 names
  libudev1                        # libudev.so.1, which libhwloc.so.15 names
  nlohmann-json3-dev libcli11-dev # headers only
  zlib1g-dev zlib1g               # headers, the link name and the library it names
  libsqlite3-dev libsqlite3-0
  libssl-dev libssl3
  libhwloc-dev libhwloc15
  libgtest-dev libgmock-dev       # static libraries and CMake configs
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download "${packages[@]}" >/dev/null) || {
  echo "bundle_deps: apt-get download failed (run apt-get update first?)" >&2
  exit 1
}
rm -rf "$DEST"
mkdir -p "$DEST"
for deb in "$work"/*.deb; do
  dpkg-deb -x "$deb" "$DEST"
done
# What the build does not read: documentation, and the static archives of
# the libraries that are linked shared.
rm -rf "$DEST/usr/share/doc" "$DEST/usr/share/man" "$DEST/usr/share/lintian"
find "$DEST" -name '*.a' ! -name 'libgtest*.a' ! -name 'libgmock*.a' -delete
# Absolute links (libz.so -> /lib/...) point into the bundle instead.
find "$DEST" -type l -lname '/*' | while read -r link; do
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$DEST$(readlink "$link")")" "$link"
done
# pkg-config files name /usr: point them at the bundle, wherever it lies.
for pc in "$DEST"/usr/lib/*/pkgconfig/*.pc "$DEST"/usr/share/pkgconfig/*.pc; do
  [ -f "$pc" ] && sed -i 's|^prefix=/usr$|prefix=${pcfiledir}/../../..|' "$pc"
done
size=$(du -sm "$DEST" | cut -f1)
echo "bundle_deps: ${#packages[@]} packages in $DEST, $size MiB"
if [ "$size" -gt "$LIMIT_MIB" ]; then
  echo "bundle_deps: $size MiB is over the $LIMIT_MIB MiB that may travel beside the tree" >&2
  exit 1
fi
