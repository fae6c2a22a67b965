#!/usr/bin/env bash
# Shared by scripts/slurm-up.sh and scripts/slurm-down.sh (sourced, never run): finding the lab
# cluster's daemons by their pid files, so a reused pid is never taken for one of ours. The caller
# sets $dir (the lab's Slurm folder), $conf (its slurm.conf) and $sock (its munge socket).

# live_pid PIDFILE NAME ARG...: prints the pid in PIDFILE when that process runs, its program is
# NAME and its command line holds every ARG (so a reused pid is never taken for our daemon).
live_pid() {
  local pidfile=$1 name=$2 pid cmd
  shift 2
  pid=$(cat "$pidfile" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  local -a argv=()
  mapfile -d '' -t argv 2>/dev/null <"/proc/$pid/cmdline" || return 1
  ((${#argv[@]})) || return 1
  [ "$(basename "${argv[0]}")" = "$name" ] || return 1
  cmd=" ${argv[*]} "
  local a
  for a in "$@"; do
    [[ $cmd == *" $a "* ]] || return 1
  done
  echo "$pid"
}
# running PID: the process exists and is no zombie (a zombie's command line is empty).
running() { [ -n "$(tr -d '\0' 2>/dev/null <"/proc/$1/cmdline")" ]; }
munged_pid() { live_pid "$dir/run/munged.pid" munged "--socket=$sock"; }
slurmctld_pid() { live_pid "$dir/run/slurmctld.pid" slurmctld "$conf"; }
slurmd_pid() { live_pid "$dir/run/slurmd-$1.pid" slurmd "-N $1" "$conf"; }
# orphans NAME ARG...: the pids of running NAME processes whose command line holds every ARG but
# that no pid file names any more (their folder was removed while they ran): still the lab's
# daemons by their config path or socket, holding its ports.
orphans() {
  local name=$1 pid a cmd ok
  shift
  for pid in $(pgrep -x "$name" 2>/dev/null); do
    local -a argv=()
    mapfile -d '' -t argv 2>/dev/null <"/proc/$pid/cmdline" || continue
    cmd=" ${argv[*]} "
    ok=1
    for a in "$@"; do
      [[ $cmd == *" $a "* ]] || ok=0
    done
    ((ok)) && echo "$pid"
  done
  return 0
}
