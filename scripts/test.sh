#!/usr/bin/env bash
# The whole test suite: make the machine ready (engine.sh: Docker; slurm-up.sh: the lab's
# two-node Slurm cluster; Debian's docker-registry for the cluster's images), then every unit,
# bridge, Docker and Slurm end-to-end test. Docker and Slurm tests fail, never skip, when no
# engine or cluster answers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/engine.sh
if ! command -v docker-registry >/dev/null 2>&1; then
  echo "test.sh: installing Debian's docker-registry (the Slurm tests' image registry)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker-registry >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker-registry >&2; }
fi
bash scripts/slurm-up.sh >/dev/null
# The Python that tests/attest.rs runs tests/attest_check.py with, the independent check of
# `benchlab attest`: securesystemslib (DSSE, keys), in-toto and the in-toto attestation framework;
# and tests/hlog.rs's tests/hlog_check.py: HdrHistogram's Python port (hdrhistogram, module hdrh).
attest_venv=/tmp/benchlab-work/attest-venv
if ! "$attest_venv/bin/python3" -c 'import securesystemslib.dsse, securesystemslib.signer, in_toto, in_toto_attestation.v1.statement, hdrh.log' >/dev/null 2>&1; then
  echo "test.sh: installing securesystemslib, in-toto, in-toto-attestation and hdrhistogram into $attest_venv" >&2
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv >&2 ||
      { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv >&2; }
  fi
  python3 -m venv "$attest_venv" >&2
  "$attest_venv/bin/pip" install -q ${SSL_CERT_FILE:+--cert "$SSL_CERT_FILE"} \
    'securesystemslib[crypto]>=1,<2' 'in-toto>=3,<4' 'in-toto-attestation>=0.9,<1' 'hdrhistogram>=0.10,<1' >&2
fi
# Debian's Chromium and its WebDriver, which tests/site_browser.rs drives to check the static site
# of `benchlab site` in a real browser (it fails, never skips, without them).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  echo "test.sh: installing Debian's chromium and chromium-driver (tests/site_browser.rs)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver fonts-liberation >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver fonts-liberation >&2; }
fi
# Every target is compiled first. Then tests/e2e_soak.rs (two servers under 20 calls/s for about
# four minutes: it mostly waits, and what it checks is memory) runs beside tests/e2e_all_images.rs
# (every image built and both gates run: it keeps the CPUs busy and times nothing), which a cold
# machine spends most of the suite on; everything else runs after them, one test binary at a
# time, with the host to itself.
cargo test --all-targets --no-run "$@"
soak_log=$(mktemp)
# The soak in a process group of its own: an interrupted or failed suite stops it (benchlab takes
# SIGTERM as an interruption and removes the cell's containers) rather than leaving it running.
setsid cargo test --test e2e_soak "$@" >"$soak_log" 2>&1 &
soak=$!
stop_soak() {
  if kill -0 "$soak" 2>/dev/null; then
    kill -TERM -- "-$soak" 2>/dev/null || true
    wait "$soak" 2>/dev/null || true
  fi
  rm -f "$soak_log"
}
trap stop_soak EXIT
trap 'exit 130' INT TERM
all_images=0
cargo test --test e2e_all_images "$@" || all_images=$?
soak_status=0
wait "$soak" || soak_status=$?
echo "---- tests/e2e_soak.rs, which ran beside tests/e2e_all_images.rs ----"
cat "$soak_log"
if [ "$all_images" -ne 0 ] || [ "$soak_status" -ne 0 ]; then
  echo "test.sh: tests/e2e_all_images.rs exited $all_images and tests/e2e_soak.rs $soak_status" >&2
  exit 1
fi
rest=()
for t in tests/*.rs; do
  t=$(basename "$t" .rs)
  case $t in e2e_soak | e2e_all_images) ;; *) rest+=(--test "$t") ;; esac
done
cargo test --lib --bins --benches "${rest[@]}" "$@"

# Fuzz targets (fuzz/): every corpus and a seeded mutation run of each target, as plain tests on
# stable, always (sharing target/, so only the lab itself is rebuilt).
CARGO_TARGET_DIR=target cargo test --manifest-path fuzz/Cargo.toml --no-default-features
# Then a short libFuzzer run of each, which needs nightly Rust and cargo-fuzz; without them the
# step is skipped, loudly (the plain-test run above still covered every target).
fuzz_seconds=${BENCHLAB_FUZZ_SECONDS:-20}
if cargo +nightly fuzz --version >/dev/null 2>&1; then
  # Outside the checkout, so CI's fresh clones on this machine reuse the nightly build.
  fuzz_target=${BENCHLAB_FUZZ_TARGET_DIR:-${TMPDIR:-/tmp}/benchlab-fuzz-target}
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  for t in scenario claims mcp_response sse; do
    seeds=("$PWD/fuzz/corpus/$t")
    case $t in scenario | claims) seeds+=("$PWD/scenarios") ;; esac
    mkdir -p "$scratch/$t"
    # New inputs go to the scratch folder (the first), never into the committed corpus.
    (cd fuzz && cargo +nightly fuzz run --sanitizer none --target-dir "$fuzz_target" "$t" "$scratch/$t" "${seeds[@]}" -- \
      -max_total_time="$fuzz_seconds" -max_len=65536 -timeout=10 -print_final_stats=1)
  done
else
  echo "!!! SKIPPED: the ${fuzz_seconds}s libFuzzer run of each fuzz target needs nightly Rust and" >&2
  echo "!!! cargo-fuzz (rustup toolchain install nightly; cargo install cargo-fuzz). Their corpora" >&2
  echo "!!! and a seeded mutation run did run above as plain tests." >&2
fi
