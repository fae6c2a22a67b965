#!/usr/bin/env bash
# The main job: make the machine ready (engine.sh), build benchlab, run the quickstart scenario
# and print its table. Safe to run again: bases and images are cache hits the second time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/engine.sh
cargo build --release --quiet
exec target/x86_64-unknown-linux-gnu/release/benchlab run scenarios/quickstart.toml "$@"
