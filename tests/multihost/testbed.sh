#!/bin/bash
# A multi-host test bed on one machine: "hosts" as network namespaces.
#   testbed.sh up N [PREFIX]   make hosts PREFIX1..PREFIXN (default bt-h):
#                              a namespace each, a veth from it to a bridge,
#                              10.77.0.(10+i)/24 on its eth0; prints the
#                              hostfile lines ("PREFIXi slots=2")
#   testbed.sh shape HOST RATE DELAY   shape HOST's link both ways (tc tbf
#                              RATE like 200mbit, netem DELAY like 5ms; "-": none)
#   testbed.sh delay HOST MS DELAY_LINE [MBIT]   put a delay line (the
#                              delay_line program: MS milliseconds each way,
#                              and MBIT Mbit/s when given, in user space,
#                              for kernels without netem) between
#                              HOST and the bridge: two TAP devices take
#                              the place of its veth, with its address and
#                              MAC; `testbed.sh delay HOST -` takes it out
#   testbed.sh down [PREFIX]   remove every host and the bridge (always safe)
#   testbed.sh agent HOST CMD...  OpenMPI's rsh agent: runs CMD in HOST's
#                              namespace with a UTS namespace of its own whose
#                              hostname is HOST (so its ranks say where they run);
#                              HOST may be a host's address (10.77.0.11), as a
#                              hostfile of addresses names them. With
#                              BATON_TESTBED_HOST_DIRS=DIR set, DIR/local is
#                              the host's own DIR/HOST there (a mount
#                              namespace of its own): a folder each host has
#                              for itself, as hosts without a shared file
#                              system have
# Traffic stays between these namespaces and the bridge's 10.77.0.1.
set -euo pipefail
prefix_of() { echo "${1:-bt-h}"; }
bridge=btbr0

case "${1:-}" in
  up)
    n=$2; p=$(prefix_of "${3:-}")
    # A fixed address: a bridge otherwise takes its ports' lowest, which
    # changes as ports come and go (a delay line's), and the hosts' ARP
    # entries for 10.77.0.1 would point nowhere for a minute.
    ip link add "$bridge" address 02:77:00:00:00:01 type bridge 2>/dev/null || true
    ip addr add 10.77.0.1/24 dev "$bridge" 2>/dev/null || true
    ip link set "$bridge" up
    for i in $(seq 1 "$n"); do
      h="$p$i"
      # A veth left by a namespace the kernel still holds (its TCP sockets
      # retransmitting a FIN to a host already gone) would block the new one.
      ip link del "v-$h" 2>/dev/null || true
      ip netns add "$h"
      ip link add "v-$h" type veth peer name eth0 netns "$h"
      ip link set "v-$h" master "$bridge" up
      ip -n "$h" addr add "10.77.0.$((10 + i))/24" dev eth0
      ip -n "$h" link set eth0 up
      ip -n "$h" link set lo up
      echo "$h slots=2"
    done
    ;;
  shape)
    h=$2; rate=$3; delay=$4
    for dev in "v-$h" "eth0@$h"; do
      if [ "$dev" = "eth0@$h" ]; then run=(ip netns exec "$h"); d=eth0; else run=(); d=$dev; fi
      "${run[@]}" tc qdisc del dev "$d" root 2>/dev/null || true
      if [ "$delay" != "-" ]; then
        "${run[@]}" tc qdisc add dev "$d" root handle 1: netem delay "$delay"
        parent=(parent 1:1 handle 10:)
      else
        parent=(root handle 10:)
      fi
      if [ "$rate" != "-" ]; then
        "${run[@]}" tc qdisc add dev "$d" "${parent[@]}" tbf rate "$rate" burst 256kb latency 500ms
      fi
    done
    ;;
  delay)
    h=$2; ms=$3; state="/tmp/baton-testbed-delay-$h"
    if [ "$ms" = "-" ]; then
      [ -f "$state" ] || exit 0
      read -r pid addr < "$state"
      kill "$pid" 2>/dev/null || true
      while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
      rm -f "$state"
      ip link set "v-$h" up
      ip -n "$h" addr add "$addr" dev eth0
      ip -n "$h" link set eth0 up
      exit 0
    fi
    bin=$4; rate=${5:-}
    [ ! -f "$state" ] || { echo "testbed.sh: $h has a delay line already" >&2; exit 2; }
    mac=$(ip -n "$h" -o link show eth0 | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
    addr=$(ip -n "$h" -4 -o addr show dev eth0 | awk '{print $4}')
    out=$(mktemp)
    "$bin" "d-$h" "e-$h" "$ms" $rate > "$out" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do grep -q ready "$out" && break; sleep 0.05; done
    grep -q ready "$out" || { cat "$out" >&2; rm -f "$out"; kill "$pid" 2>/dev/null; exit 1; }
    rm -f "$out"
    echo "$pid $addr" > "$state"
    ip link set "e-$h" netns "$h"
    ip link set "d-$h" master "$bridge" up
    ip link set "v-$h" down
    ip -n "$h" link set eth0 down
    ip -n "$h" addr flush dev eth0
    ip -n "$h" link set "e-$h" address "$mac"
    ip -n "$h" addr add "$addr" dev "e-$h"
    ip -n "$h" link set "e-$h" up
    ;;
  down)
    p=$(prefix_of "${2:-}")
    for f in /tmp/baton-testbed-delay-"$p"*; do
      [ -f "$f" ] || continue
      read -r pid _ < "$f"
      kill "$pid" 2>/dev/null || true
      rm -f "$f"
    done
    for h in $(ip netns list | awk '{print $1}' | grep "^$p[0-9]*$" || true); do
      ip netns pids "$h" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      ip netns del "$h" || true
    done
    # Their veths go with them, unless the kernel still holds a namespace
    # (sockets of its own, closing): then they are removed here.
    for v in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^v-$p[0-9]*$" || true); do
      ip link del "$v" 2>/dev/null || true
    done
    ip link del "$bridge" 2>/dev/null || true
    ;;
  agent)
    h=$2; shift 2
    case "$h" in
      10.77.0.*)
        for ns in $(ip netns list | awk '{print $1}'); do
          if ip -n "$ns" -4 addr show dev eth0 2>/dev/null | grep -q "inet $h/"; then h=$ns; fi
        done
        ;;
    esac
    if [ -n "${BATON_TESTBED_HOST_DIRS:-}" ]; then
      # Each host's own folder: DIR/local is DIR/HOST there (a mount
      # namespace of its own), as on hosts that share no file system.
      d=$BATON_TESTBED_HOST_DIRS
      mkdir -p "$d/$h" "$d/local"
      exec ip netns exec "$h" unshare --uts --mount --propagation private /bin/sh -c \
        'hostname "$0"; mount --bind "$1/$0" "$1/local"; shift; exec /bin/sh -c "$*"' "$h" "$d" "$@"
    fi
    exec ip netns exec "$h" unshare --uts /bin/sh -c 'hostname "$0"; exec /bin/sh -c "$*"' "$h" "$@"
    ;;
  *)
    echo "usage: testbed.sh up N [PREFIX] | shape HOST RATE DELAY | delay HOST MS|- [DELAY_LINE] | down [PREFIX] | agent HOST CMD..." >&2
    exit 2
    ;;
esac
