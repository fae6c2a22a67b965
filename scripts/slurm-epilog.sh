#!/usr/bin/env bash
# Slurm Epilog of benchlab's lab cluster (scripts/slurm-up.sh copies it into the lab folder and
# names the copy in slurm.conf). slurmd runs it as root on each node after each job; it removes
# every Docker container, then every volume, labelled benchlab.slurm_job=$SLURM_JOB_ID (a job's
# containers are not in its cgroup, so cancelling the job alone leaves them running, and a cell's
# /lab volume outlives its containers) and logs what it removed to
# <lab folder>/log/epilog.log. It always exits 0: a failing epilog would drain the node. Without
# docker, or without a job id, it does nothing.
set -uo pipefail
trap 'exit 0' EXIT

# slurmd gives the epilog a bare environment.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

self_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" 2>/dev/null && pwd) || self_dir=
if [ -n "$self_dir" ] && [ -f "$self_dir/slurm.conf" ]; then
  lab=$self_dir
else
  lab=${BENCHLAB_SLURM_DIR:-/tmp/benchlab-work/slurm}
fi
logf=$lab/log/epilog.log
mkdir -p "$lab/log" 2>/dev/null || logf=/dev/stderr

note() { printf '%s slurm-epilog.sh: %s\n' "$(date '+%F %T')" "$*" >>"$logf" 2>/dev/null || true; }

job=${SLURM_JOB_ID:-}
node=${SLURMD_NODENAME:-?}
[[ $job =~ ^[0-9]+$ ]] || exit 0
command -v docker >/dev/null 2>&1 || exit 0

# remove KIND LIST-COMMAND... : removes what the listing names (containers before volumes: a
# volume in use cannot go).
remove() {
  local kind=$1 ids out
  shift
  if ! ids=$(timeout 30 "$@" 2>&1); then
    note "job $job on $node: listing ${kind}s failed: ${ids//$'\n'/ }"
    return
  fi
  [ -n "$ids" ] || return
  local rm=(docker rm -f)
  [ "$kind" = volume ] && rm=(docker volume rm -f)
  # shellcheck disable=SC2086 # one id per word
  if out=$(timeout 60 "${rm[@]}" $ids 2>&1); then
    note "job $job on $node: removed ${kind}s ${ids//$'\n'/ }"
  else
    note "job $job on $node: ${rm[*]} ${ids//$'\n'/ } failed: ${out//$'\n'/ }"
  fi
}
remove container docker ps -aq --filter "label=benchlab.slurm_job=$job"
remove volume docker volume ls -q --filter "label=benchlab.slurm_job=$job"
exit 0
