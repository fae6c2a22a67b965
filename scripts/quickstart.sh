#!/usr/bin/env bash
# The main job: make the machine ready (engine.sh), build benchlab, run the quickstart scenario
# and print its table. Safe to run again: bases and images are cache hits the second time.
# When no container engine can be brought up (a host where dockerd cannot start), the run falls
# back to the native engine — host processes in lab cgroups, servers installed from the same
# lockfiles — and says so; `--engine docker` insists on containers.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! bash scripts/engine.sh; then
  echo "quickstart.sh: no container engine could be started; benchlab will use its native engine (see the notice below)" >&2
  # The native engine makes venvs with the host's python3 (Debian ships venv separately).
  if [ "$(id -u)" = 0 ] && ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3 python3-venv >&2
  fi
fi
cargo build --release --quiet
exec target/x86_64-unknown-linux-gnu/release/benchlab run scenarios/quickstart.toml "$@"
