#!/usr/bin/env bash
# Stops benchlab's lab Slurm cluster brought up by scripts/slurm-up.sh: cancels every job of the
# cluster (and waits for their epilogs, which remove the jobs' Docker containers), then stops
# slurmd n2, slurmd n1, slurmctld and munged by the pids recorded in
# ${BENCHLAB_SLURM_DIR:-/tmp/benchlab-work/slurm}/run/ (TERM, up to 10 s, then KILL), and waits
# until they are gone. A pid whose command line is not that daemon's with the lab's config is never
# signalled. Idempotent: with nothing running it says so and exits 0. Config, key, state and logs
# stay in the folder for the next slurm-up.sh. Needs root.
set -euo pipefail

log() { printf 'slurm-down.sh: %s\n' "$*" >&2; }

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
[ "$(id -u)" = 0 ] || {
  log "run as root"
  exit 1
}
dir=${BENCHLAB_SLURM_DIR:-/tmp/benchlab-work/slurm}
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
conf=$dir/slurm.conf
sock=$dir/run/munge.socket
export SLURM_CONF=$conf

if [ ! -d "$dir/run" ]; then
  log "nothing runs (no $dir/run)"
  exit 0
fi
exec 9>"$dir/lock"
flock -w 120 9 || {
  log "another slurm-up.sh or slurm-down.sh holds $dir/lock"
  exit 1
}

# shellcheck source=scripts/slurm-lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/slurm-lib.sh"

# --- jobs --------------------------------------------------------------------------------------
if slurmctld_pid >/dev/null && munged_pid >/dev/null; then
  job_ids=$(timeout 20 squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ') || job_ids=
  if [ -n "${job_ids// /}" ]; then
    log "cancelling jobs $job_ids"
    # shellcheck disable=SC2086 # one job id per word
    timeout 20 scancel $job_ids >&2 || true
    # Let them finish (KillWait=5) and their epilogs remove their containers while slurmd runs.
    for ((i = 0; i < 200; i++)); do
      if left=$(timeout 10 squeue -h -o %A 2>/dev/null) && [ -z "$left" ]; then break; fi
      sleep 0.1
    done
    left=$(timeout 10 squeue -h -o '%A %T' 2>/dev/null | tr '\n' ' ') || left=
    [ -z "$left" ] || log "jobs still not finished after 20 s (stopping anyway): $left"
  fi
fi

# --- daemons -----------------------------------------------------------------------------------
stopped=()
# stop WHAT PIDFILE PIDFN...: TERM, wait up to 10 s, then KILL; waits until the process is gone.
stop() {
  local what=$1 pidfile=$2 pid i
  shift 2
  pid=$("$@") || {
    rm -f "$pidfile"
    return 0
  }
  log "stopping $what (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    "$@" >/dev/null || break
    sleep 0.1
  done
  if "$@" >/dev/null; then
    log "$what (pid $pid) still runs after 10 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      "$@" >/dev/null || break
      sleep 0.1
    done
    if "$@" >/dev/null; then
      log "$what (pid $pid) survives SIGKILL"
      return 1
    fi
  fi
  rm -f "$pidfile"
  stopped+=("$what")
}

rc=0
stop "slurmd n2" "$dir/run/slurmd-n2.pid" slurmd_pid n2 || rc=1
stop "slurmd n1" "$dir/run/slurmd-n1.pid" slurmd_pid n1 || rc=1
stop slurmctld "$dir/run/slurmctld.pid" slurmctld_pid || rc=1
stop munged "$dir/run/munged.pid" munged_pid || rc=1

if ((${#stopped[@]})); then
  log "stopped ${stopped[*]}"
else
  log "nothing runs"
fi
exit "$rc"
