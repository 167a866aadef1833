#!/usr/bin/env bash
# Two "hosts" on one machine: network namespaces joined by a veth pair, and
# `mpirun` over TCP between them (Open MPI's rsh launcher replaced by
# `ip netns exec`). Trains nanogpt-cpu for STEPS steps as 2 ranks x 1 thread
# over TCP and over shared memory, checks both give the --grad-accum 2
# checkpoint bit for bit, and prints their MPI time per step.
# Needs root (ip netns); removes what it creates.
# Usage: bench/mpi_netns.sh [build-dir]   (env STEPS=30)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
attn="$PWD/$build/attn"
STEPS=${STEPS:-30}
[ "$(id -u)" -eq 0 ] || { echo "mpi_netns.sh: needs root (ip netns)"; exit 1; }
scripts/get-data.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d "${TMPDIR:-/tmp}/attn-netns.XXXXXX")
ns1=attn_h1_$$ ns2=attn_h2_$$ v1=attn_a$$ v2=attn_b$$
cleanup() {
  ip netns del "$ns1" 2> /dev/null || true
  ip netns del "$ns2" 2> /dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT
ip netns add "$ns1"
ip netns add "$ns2"
ip link add "$v1" type veth peer name "$v2"
ip link set "$v1" netns "$ns1"
ip link set "$v2" netns "$ns2"
ip -n "$ns1" addr add 10.77.0.1/24 dev "$v1"
ip -n "$ns2" addr add 10.77.0.2/24 dev "$v2"
for x in "$ns1 $v1" "$ns2 $v2"; do
  set -- $x
  ip -n "$1" link set lo up
  ip -n "$1" link set "$2" up
done
cat > "$out/nsrsh" <<SH
#!/bin/sh
# rsh agent: "host command..." runs the command in that host's namespace.
host=\$1; shift
case "\$host" in
  10.77.0.1) exec ip netns exec $ns1 sh -c "\$*" ;;
  10.77.0.2) exec ip netns exec $ns2 sh -c "\$*" ;;
esac
echo "nsrsh: unknown host \$host" >&2; exit 1
SH
chmod +x "$out/nsrsh"
args=(train --preset nanogpt-cpu --data "$PWD/data/tinyshakespeare.txt" --steps "$STEPS"
  --eval-iters 1 --eval-interval 1000000 --log-interval 1 --threads 1)
echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
OMP_NUM_THREADS=1 "$attn" "${args[@]}" --grad-accum 2 --out "$out/ref" > /dev/null 2>&1
ip netns exec "$ns1" mpirun --host 10.77.0.1,10.77.0.2 -np 2 --mca plm_rsh_agent "$out/nsrsh" \
  --mca oob_tcp_if_include 10.77.0.0/24 --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
  -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -x OMP_NUM_THREADS=1 \
  "$attn" "${args[@]}" --out "$out/tcp" > "$out/tcp.log" 2> "$out/tcp.err"
mpirun --oversubscribe -np 2 -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
  -x OMP_NUM_THREADS=1 "$attn" "${args[@]}" --out "$out/shm" > "$out/shm.log" 2> "$out/shm.err"
for k in tcp shm; do
  same=differ
  cmp -s "$out/ref/model.safetensors" "$out/$k/model.safetensors" && same="== --grad-accum 2 (bit for bit)"
  med=$(sed -n 's/.*, mpi \([0-9.]*\)ms$/\1/p' "$out/$k.log" | tail -n +2 | sort -g |
    awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  stp=$(sed -n 's/.*time \([0-9.]*\)ms, mpi.*/\1/p' "$out/$k.log" | tail -n +2 | sort -g |
    awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  printf '%-3s: median step %s ms, MPI %s ms/step; checkpoint %s\n' "$k" "$stp" "$med" "$same"
  grep "MPI:" "$out/$k.err"
done
