#!/usr/bin/env bash
# Makes this machine ready for benchlab, idempotently: Debian's docker.io and debootstrap
# installed, and a Docker engine that answers (dockerd started and waited for when none does).
# Exits non-zero with the engine's log tail when no engine can be brought up.
set -euo pipefail

log() { printf 'engine.sh: %s\n' "$*" >&2; }

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if ((${#need[@]})); then
  if [ "$(id -u)" != 0 ]; then
    log "missing ${need[*]}; install them as root: apt-get install ${need[*]}"
    exit 1
  fi
  log "installing ${need[*]} from Debian"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
fi

engine_answers() { docker info >/dev/null 2>&1; }

if engine_answers; then
  exit 0
fi

logfile=/var/log/benchlab-dockerd.log
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  log "starting docker with systemd"
  systemctl start docker >&2 || true
fi
if ! engine_answers; then
  if [ "$(id -u)" != 0 ]; then
    log "no engine answers and starting dockerd needs root"
    exit 1
  fi
  if ! pgrep -x dockerd >/dev/null 2>&1; then
    log "starting dockerd (log: $logfile)"
    # A pid file left by an engine that was killed would stop the new one from starting.
    if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
      rm -f /var/run/docker.pid
    fi
    nohup dockerd >"$logfile" 2>&1 &
  fi
fi

for _ in $(seq 1 120); do
  if engine_answers; then
    log "engine ready: $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo unknown)"
    exit 0
  fi
  sleep 0.5
done
log "no Docker engine answered within 60 s; last lines of $logfile:"
tail -n 30 "$logfile" >&2 2>/dev/null || true
exit 1
