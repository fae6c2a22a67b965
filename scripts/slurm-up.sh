#!/usr/bin/env bash
# Brings up benchlab's own Slurm cluster on this one host, idempotently: cluster "benchlab", two
# nodes n1 and n2 (slurmd -N n1 / -N n2; n1 runs jobs on CPU 0 only, n2 on CPU 1 only), one
# partition "lab", with its own munged, slurmctld and slurmds on nonstandard ports (16817-16819).
# All config, keys, state, pid files and logs live in one folder,
# ${BENCHLAB_SLURM_DIR:-/tmp/benchlab-work/slurm}; nothing in /etc is edited.
#
# Run again when all is up, it only prints the status. A daemon that died is restarted alone; a
# node left DOWN or DRAINED is resumed. After (re)starting anything it runs a two-task job array
# and checks that the tasks landed on n1 with CPU 0 and on n2 with CPU 1. On failure it prints the
# tail of the relevant log and exits 1. Log lines go to stderr; the last line, on stdout, is the
# environment to use: export SLURM_CONF=<folder>/slurm.conf (also written to <folder>/env).
# Stop it all with scripts/slurm-down.sh. Needs root.
set -euo pipefail

log() { printf 'slurm-up.sh: %s\n' "$*" >&2; }
die() {
  log "$*"
  exit 1
}

start_ns=$(date +%s%N)
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
[ "$(id -u)" = 0 ] || die "run as root (slurmd must be root to confine jobs to their CPUs)"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${BENCHLAB_SLURM_DIR:-/tmp/benchlab-work/slurm}
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
conf=$dir/slurm.conf
sock=$dir/run/munge.socket
key=$dir/munge/munge.key
epilog=$dir/slurm-epilog.sh
export SLURM_CONF=$conf
# A unix socket path holds at most 107 bytes.
((${#sock} <= 100)) || die "BENCHLAB_SLURM_DIR is too long for a unix socket path: $sock"
[ -f "$here/slurm-epilog.sh" ] || die "missing $here/slurm-epilog.sh"

# --- packages --------------------------------------------------------------------------------
pkgs=(slurmctld slurmd slurm-client munge)
missing=0
for bin in slurmctld slurmd sbatch squeue sinfo scontrol scancel munged mungekey munge unmunge; do
  if ! path=$(command -v "$bin" 2>/dev/null) || [ ! -x "$path" ]; then missing=1; fi
done
if ((missing)); then
  log "installing ${pkgs[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q --no-install-recommends "${pkgs[@]}" >&2; then
    apt-get update -q >&2
    apt-get install -y -q --no-install-recommends "${pkgs[@]}" >&2
  fi
fi

# --- folder and lock ---------------------------------------------------------------------------
mkdir -p "$dir" "$dir/run" "$dir/log" "$dir/state" "$dir/spool" "$dir/verify" "$dir/munge"
# munged refuses keys and sockets in directories others may write to.
chmod 0755 "$dir" "$dir/run" "$dir/log"
chmod 0700 "$dir/munge" "$dir/state"
exec 9>"$dir/lock"
flock -w 120 9 || die "another slurm-up.sh or slurm-down.sh holds $dir/lock"

# --- process helpers (same rules as slurm-down.sh) ----------------------------------------------
# shellcheck source=scripts/slurm-lib.sh
source "$here/slurm-lib.sh"

tail_log() {
  local f=$1
  if [ -s "$f" ]; then
    log "last lines of $f:"
    tail -n 25 "$f" | sed 's/^/    /' >&2
  else
    log "$f is empty or missing"
  fi
}

# stop_pid PID WHAT: TERM, up to 10 s, then KILL (used to restart on a config change).
stop_pid() {
  local pid=$1 what=$2 i
  log "stopping $what (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    running "$pid" || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  sleep 0.2
}

# --- configuration -----------------------------------------------------------------------------
[ "$(nproc --all)" -ge 2 ] || die "this host has fewer than 2 CPUs; n1 and n2 need CPU 0 and CPU 1"
host=$(hostname -s 2>/dev/null || hostname)
[ -n "$host" ] || die "this host has no host name"
if getent hosts "$(hostname)" >/dev/null 2>&1 && getent hosts "$host" >/dev/null 2>&1; then
  ctld_host=$host
  node_addr=
else
  # The host name does not resolve (fresh machine): talk over the loopback address.
  ctld_host="$host(127.0.0.1)"
  node_addr=" NodeAddr=127.0.0.1"
fi

changed=()
# put FILE: writes stdin to FILE when the content differs; records the change.
put() {
  local f=$1 tmp
  tmp=$(mktemp "$f.XXXXXX")
  cat >"$tmp"
  if cmp -s "$tmp" "$f"; then
    rm -f "$tmp"
  else
    chmod 0644 "$tmp"
    mv -f "$tmp" "$f"
    changed+=("$(basename "$f")")
  fi
}

put "$conf" <<EOF
# benchlab's lab cluster; written by scripts/slurm-up.sh (edits are overwritten on its next run).
ClusterName=benchlab
SlurmctldHost=$ctld_host
SlurmctldPort=16817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: job credentials live 10 s (default 120), so a requeued job may start again 11 s
# after its node failed instead of 121 s.
AuthInfo=socket=$sock,cred_expire=10
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/cgroup
TaskPlugin=task/affinity,task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=2,bf_interval=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
MinJobAge=300
ReturnToService=2
JobRequeue=1
KillWait=5
InactiveLimit=0
Epilog=$epilog
# Two nodes on this one host: n1 keeps CPU 1 for itself (jobs get CPU 0), n2 keeps CPU 0 (jobs get CPU 1).
NodeName=n1 NodeHostname=$host$node_addr Port=16818 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=8000 CpuSpecList=1 State=UNKNOWN
NodeName=n2 NodeHostname=$host$node_addr Port=16819 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=8000 CpuSpecList=0 State=UNKNOWN
PartitionName=lab Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF

put "$dir/cgroup.conf" <<EOF
# benchlab's lab cluster; written by scripts/slurm-up.sh.
CgroupPlugin=cgroup/v1
ConstrainCores=yes
ConstrainRAMSpace=yes
EOF

# An own (empty) SPANK config, so plugins configured for the host's Slurm stay out.
put "$dir/plugstack.conf" </dev/null

put "$epilog" <"$here/slurm-epilog.sh"
chmod 0755 "$epilog"
# The epilog is read afresh for every job; only the daemons' config needs a restart.
slurm_changed=0
for f in "${changed[@]}"; do
  case $f in slurm.conf | cgroup.conf | plugstack.conf) slurm_changed=1 ;; esac
done
put "$dir/env" < <(printf 'export SLURM_CONF=%s\n' "$conf")
((${#changed[@]} == 0)) || log "wrote ${changed[*]} in $dir"

# --- daemons left without their pid files ------------------------------------------------------
# When the folder was removed while the cluster ran, its daemons still hold the ports and socket
# path: found by their command lines, they are stopped before the cluster is brought up afresh.
if ! munged_pid >/dev/null; then
  for pid in $(orphans munged "--socket=$sock"); do stop_pid "$pid" "munged (its pid file is gone)"; done
fi
if ! slurmctld_pid >/dev/null; then
  for pid in $(orphans slurmctld "$conf"); do stop_pid "$pid" "slurmctld (its pid file is gone)"; done
fi
for n in n1 n2; do
  if ! slurmd_pid "$n" >/dev/null; then
    for pid in $(orphans slurmd "-N $n" "$conf"); do stop_pid "$pid" "slurmd $n (its pid file is gone)"; done
  fi
done

# --- munged ------------------------------------------------------------------------------------
started=()
munge_works() { munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1; }
if ! munged_pid >/dev/null; then
  if [ ! -s "$key" ]; then
    log "creating munge key $key"
    mungekey --create --keyfile="$key" --force >&2
  fi
  chmod 0600 "$key"
  log "starting munged (socket $sock)"
  munged --force --key-file="$key" --socket="$sock" --pid-file="$dir/run/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" \
    </dev/null >>"$dir/log/munged.log" 2>&1 9>&- || {
    tail_log "$dir/log/munged.log"
    die "munged did not start"
  }
  started+=(munged)
fi
for ((i = 0; i < 50; i++)); do
  munge_works && break
  sleep 0.1
done
munge_works || {
  tail_log "$dir/log/munged.log"
  die "munged does not answer on $sock"
}

# --- slurmctld and slurmd ----------------------------------------------------------------------
if ((slurm_changed)); then
  for n in n1 n2; do
    if pid=$(slurmd_pid "$n"); then stop_pid "$pid" "slurmd $n (config changed)"; fi
  done
  if pid=$(slurmctld_pid); then stop_pid "$pid" "slurmctld (config changed)"; fi
fi

# start_daemon WHAT PIDFN LOGFILE CMD...: starts CMD (it daemonizes) and waits for its pid file.
start_daemon() {
  local what=$1 pidfn=$2 logf=$3 i
  shift 3
  log "starting $what"
  if ! "$@" </dev/null >>"$logf" 2>&1 9>&-; then
    tail_log "$logf"
    die "$what did not start: $*"
  fi
  for ((i = 0; i < 100; i++)); do
    # shellcheck disable=SC2086 # pidfn is a function name with an optional node argument
    $pidfn >/dev/null && return 0
    sleep 0.1
  done
  tail_log "$logf"
  die "$what did not stay up: $*"
}

if ! slurmctld_pid >/dev/null; then
  start_daemon slurmctld slurmctld_pid "$dir/log/slurmctld.log" slurmctld -f "$conf"
  started+=(slurmctld)
fi
for n in n1 n2; do
  if ! slurmd_pid "$n" >/dev/null; then
    mkdir -p "$dir/spool/$n"
    start_daemon "slurmd $n" "slurmd_pid $n" "$dir/log/slurmd-$n.log" slurmd -N "$n" -f "$conf"
    started+=("slurmd-$n")
  fi
done

# --- nodes -------------------------------------------------------------------------------------
# node_state N: the node's State= (e.g. IDLE, IDLE+DRAIN, DOWN+NOT_RESPONDING) from slurmctld.
node_state() {
  timeout 10 scontrol -o show node "$1" 2>/dev/null | tr ' ' '\n' | sed -n 's/^State=//p'
}
resumed=()
ready=0
for ((i = 0; i < 300; i++)); do
  ready=1
  for n in n1 n2; do
    st=$(node_state "$n") || st=
    case $st in
      "" | *NOT_RESPONDING* | *UNKNOWN* | *FUTURE* | *POWER*) ready=0 ;;
      DOWN* | *DRAIN* | *FAIL*)
        ready=0
        if ((i % 10 == 0)); then
          log "node $n is $st; resuming it"
          timeout 10 scontrol update nodename="$n" state=resume >&2 || true
          resumed+=("$n")
        fi
        ;;
      IDLE* | ALLOCATED* | MIXED* | COMPLETING*) ;;
      *) ready=0 ;;
    esac
  done
  ((ready)) && break
  sleep 0.1
done
if ! ((ready)); then
  timeout 10 sinfo -N -o '%N %T %E' >&2 || true
  if ! slurmctld_pid >/dev/null; then
    tail_log "$dir/log/slurmctld.log"
  else
    for n in n1 n2; do
      case $(node_state "$n" || true) in IDLE* | ALLOCATED* | MIXED* | COMPLETING*) ;; *) tail_log "$dir/log/slurmd-$n.log" ;; esac
    done
    tail_log "$dir/log/slurmctld.log"
  fi
  die "nodes n1 and n2 are not both up after 30 s"
fi

status() {
  log "status (munged $(munged_pid), slurmctld $(slurmctld_pid), slurmd n1 $(slurmd_pid n1), slurmd n2 $(slurmd_pid n2)):"
  timeout 10 sinfo -N -o '%N %P %T %m %E' | sed 's/^/    /' >&2 || true
}

if ((${#started[@]} == 0 && slurm_changed == 0 && ${#resumed[@]} == 0)); then
  status
  log "already up"
  printf 'export SLURM_CONF=%s\n' "$conf"
  exit 0
fi
((${#started[@]} == 0)) || log "started ${started[*]}"

# --- check it really works: a two-task array, one task per node, each on its own CPU -------------
if [ "$(node_state n1)" = IDLE ] && [ "$(node_state n2)" = IDLE ]; then
  rm -f "$dir/verify/"*.out
  t0=$(date +%s%N)
  # shellcheck disable=SC2016 # expanded by the job's shell
  job=$(timeout 20 sbatch --parsable -p lab -c1 --array=0-1 -t 1 -J benchlab-verify \
    -D "$dir/verify" -o "$dir/verify/%A_%a.out" \
    --wrap 'echo "$SLURMD_NODENAME:$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"') ||
    die "sbatch of the check job failed"
  job=${job%%;*}
  for ((i = 0; i < 300; i++)); do
    if left=$(timeout 10 squeue -h -j "$job" -o %i 2>/dev/null) && [ -z "$left" ]; then break; fi
    sleep 0.1
  done
  t1=$(date +%s%N)
  got=$(cat "$dir/verify/${job}_0.out" "$dir/verify/${job}_1.out" 2>/dev/null | sort | tr '\n' ' ')
  if [ "$got" != "n1:0 n2:1 " ]; then
    timeout 10 scontrol -o show job "$job" >&2 || true
    tail_log "$dir/log/slurmd-n1.log"
    tail_log "$dir/log/slurmd-n2.log"
    tail_log "$dir/log/slurmctld.log"
    die "check job $job: expected 'n1:0 n2:1' (node:CPUs), got '${got% }'"
  fi
  log "check job $job ran n1 on CPU 0 and n2 on CPU 1 in $(((t1 - t0) / 1000000)) ms"
else
  log "nodes are busy; skipping the check job"
fi

status
log "up in $((($(date +%s%N) - start_ns) / 1000000)) ms"
printf 'export SLURM_CONF=%s\n' "$conf"
