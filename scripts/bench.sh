#!/usr/bin/env bash
# The instrument's own speed: benches/http_driver.rs (the drivers against their peers) and
# benches/overhead.rs (what cells and runs cost outside measurement; needs the engine). Installs
# what they compare with, idempotently — Debian's wrk, and oha (the Rust crate, a pinned release,
# built by cargo into ~/.cargo/bin) — then runs them. Extra arguments go to cargo bench;
# BENCH_SECONDS and BENCH_ROUNDS set the closed loops' length and rounds (5 s, 9), BENCH_OPEN_SECONDS
# and BENCH_OPEN_ROUNDS the open loops' (10 s, 3) — see benches/http_driver.rs. Nothing else may
# run on this machine meanwhile: the figures are ratios taken in the same minute, not absolutes.
set -euo pipefail
cd "$(dirname "$0")/.."

oha_version=1.16.0
log() { printf 'bench.sh: %s\n' "$*" >&2; }

if ! command -v wrk >/dev/null 2>&1; then
  log "installing Debian's wrk"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends wrk >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends wrk >&2; }
fi
export PATH="$HOME/.cargo/bin:$PATH"
if [ "$(oha --version 2>/dev/null)" != "oha $oha_version" ]; then
  log "building oha $oha_version (cargo install, a few minutes once)"
  cargo install oha --version "$oha_version" --locked >&2
fi
command -v taskset >/dev/null 2>&1 || { log "taskset (util-linux) is missing"; exit 1; }
exec cargo bench --bench http_driver --bench overhead "$@"
