#!/usr/bin/env bash
# Several "hosts" on this machine: one network namespace (and UTS namespace: its own host name)
# per node, joined by veth pairs to a bridge, with addresses inside them only. mpirun starts
# one Open MPI daemon per node through an rsh agent that enters the node's namespaces, so
# each node's ranks see only each other over symcoll's abstract-socket rendezvous (abstract
# sockets are per network namespace) and MPI's traffic between nodes crosses the veth links
# over TCP. Everything is removed on exit.
#
# Usage: tests/netns.sh NODES RANKS_PER_NODE [mpirun options --] COMMAND [ARGS...]
# Exit status: COMMAND's (through mpirun); 77 (skip) without root, ip netns or mpirun.
set -uo pipefail
nodes=$1 per=$2
shift 2
mpi_opts=()
if printf '%s\n' "$@" | grep -qx -- '--'; then
  while [ "$1" != "--" ]; do mpi_opts+=("$1"); shift; done
  shift
fi
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
command -v ip >/dev/null || skip "no ip (iproute2)"
command -v unshare >/dev/null || skip "no unshare (util-linux)"
command -v mpirun >/dev/null || skip "no mpirun (Open MPI)"

# Names and a /24 of our own, so that runs in parallel do not meet.
tag=$(( ($$ % 200) + 20 ))
br=symbr$tag
net=10.213.$tag
dir=$(mktemp -d /tmp/symcoll-netns.XXXXXX)
cleanup() {
  for i in $(seq 0 $((nodes - 1))); do ip netns del symn$tag-$i 2>/dev/null; ip link del symv$tag-$i 2>/dev/null; done
  ip link del "$br" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip link add "$br" type bridge 2>/dev/null || skip "cannot create a bridge (no CAP_NET_ADMIN?)"
ip addr add "$net.1/24" dev "$br" && ip link set "$br" up
hosts=""
for i in $(seq 0 $((nodes - 1))); do
  ns=symn$tag-$i
  ip netns add "$ns" || skip "ip netns add failed"
  ip link add "symv$tag-$i" type veth peer name eth0 netns "$ns"
  ip link set "symv$tag-$i" master "$br" up
  ip -n "$ns" addr add "$net.$((10 + i))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  echo "$net.$((10 + i)) $ns node$i" >>"$dir/map"
  hosts+="${hosts:+,}$net.$((10 + i)):$per"
done
# The rsh agent: "agent HOST COMMAND..." runs COMMAND inside HOST's namespaces.
cat >"$dir/agent" <<EOF
#!/bin/sh
host="\$1"; shift
set -- \$(grep "^\$host " "$dir/map") "\$@"
addr=\$1 ns=\$2 name=\$3; shift 3
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name; exec \$*"
EOF
chmod +x "$dir/agent"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Knobs set here reach every rank.
for v in $(env | grep -oE '^(SYMCOLL_[A-Z_]+|TH_[A-Z_]+|LD_LIBRARY_PATH)='); do mpi_opts+=(-x "${v%=}"); done
timeout --kill-after=10 "${NETNS_WALL_S:-600}" \
  mpirun --oversubscribe --host "$hosts" -np $((nodes * per)) \
  --mca plm_rsh_agent "$dir/agent" --mca btl tcp,self,vader \
  --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" \
  "${mpi_opts[@]}" "$@"
