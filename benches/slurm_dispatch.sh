#!/usr/bin/env bash
# The Slurm dispatch benchmark: the same eight-cell shared-core sweep (scenarios/cluster-sweep.toml)
# run three ways in one go, on this machine's lab cluster (scripts/slurm-up.sh):
#   local   — on this host, one cell at a time (the peer);
#   1 node  — through Slurm, every job pinned to node n1 (--nodelist=n1): one cell at a time;
#   2 nodes — through Slurm on n1 and n2 at once.
# It prints the wall times, the per-cell overhead of the Slurm path against the local one
# ((1 node - local) / cells), the 2-node / 1-node ratio (target <= 0.6) and `benchlab compare`
# of the local run against the 2-node run (per-cell figures, flagged only beyond noise).
# Each Slurm run starts its own registry and pushes (cache hits after the first), and that time
# is in its wall time, as a user would see it. Usage: bash benches/slurm_dispatch.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-1}
bash scripts/engine.sh
eval "$(bash scripts/slurm-up.sh)"
cargo build --release --quiet
bin=target/x86_64-unknown-linux-gnu/release/benchlab
[ -x "$bin" ] || bin=target/release/benchlab
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
scenario=scenarios/cluster-sweep.toml
cells=8

# One warm-up through Slurm, so every image is in the registry's storage (a push is then only
# the registry saying it has every layer).
"$bin" run "$scenario" --backend slurm --results "$out/warm" --run-id warm >/dev/null 2>&1

wall() { # label, then the benchlab run arguments
  local label=$1
  shift
  local t0 t1
  t0=$(date +%s.%N)
  "$bin" run "$scenario" "$@" >/dev/null 2>"$out/$label.log" || {
    echo "run $label failed:" >&2
    tail -20 "$out/$label.log" >&2
    exit 1
  }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}

declare -A sum=([local]=0 [one]=0 [two]=0)
add() { # key, seconds
  sum[$1]=$(echo "${sum[$1]} + $2" | bc -l)
}
for r in $(seq 1 "$rounds"); do
  # Interleaved, so a slow spell of this shared machine falls on all three alike.
  s=$(wall "local-$r" --results "$out/r" --run-id "local-$r") || exit 1
  add local "$s"
  s=$(wall "one-$r" --backend slurm --slurm-opt=--nodelist=n1 --results "$out/r" --run-id "one-$r") || exit 1
  add one "$s"
  s=$(wall "two-$r" --backend slurm --results "$out/r" --run-id "two-$r") || exit 1
  add two "$s"
  printf 'round %d: local %.1f s, 1 node %.1f s, 2 nodes %.1f s (cumulative)\n' "$r" "${sum[local]}" "${sum[one]}" "${sum[two]}" >&2
done
l=$(echo "${sum[local]} / $rounds" | bc -l)
o=$(echo "${sum[one]} / $rounds" | bc -l)
t=$(echo "${sum[two]} / $rounds" | bc -l)
printf 'cluster-sweep (%d cells), mean of %d round(s), wall seconds of the whole command:\n' "$cells" "$rounds"
printf '  local (this host, one at a time)   %7.1f s\n' "$l"
printf '  slurm, 1 node (n1)                 %7.1f s\n' "$o"
printf '  slurm, 2 nodes (n1, n2)            %7.1f s\n' "$t"
printf 'per-cell overhead of the Slurm path: %.2f s  ((1 node - local) / %d)\n' "$(echo "($o - $l) / $cells" | bc -l)" "$cells"
printf 'speed-up: 2 nodes / 1 node = %.2f (target <= 0.60)\n' "$(echo "$t / $o" | bc -l)"
# The Slurm path alone (one cell at a time, as locally) and two cells at once on one host's two
# CPUs (the lab's nodes share caches, memory and the engine) are told apart here.
echo "per-cell figures, local (a) against 1 node (b), last round:"
"$bin" compare "$out/r/cluster-sweep/local-$rounds" "$out/r/cluster-sweep/one-$rounds" || true
echo "per-cell figures, local (a) against 2 nodes (b), last round:"
"$bin" compare "$out/r/cluster-sweep/local-$rounds" "$out/r/cluster-sweep/two-$rounds" || true
