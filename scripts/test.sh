#!/usr/bin/env bash
# The whole test suite: make the machine ready (engine.sh), then every unit, bridge and Docker
# end-to-end test. Docker tests fail, never skip, when no engine answers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/engine.sh
cargo test --all-targets "$@"
