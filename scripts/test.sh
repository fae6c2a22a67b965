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
# The tiers: plain `cargo test` is the tier that needs nothing of the host; `--features e2e` adds
# the tests that need the engine, root, Chromium, Slurm or the venv made ready above (Cargo.toml
# lists them). Every target is compiled first. Then two phases, so that no test that measures
# shares the host with an image build:
#   1. tests/e2e_images.rs (every image built, three builds at once; the lockers run), which a
#      cold machine spends most of the suite on, beside the test binaries that time nothing at
#      all (pure checks of files, records, reports and schemas) and the fuzz corpora: they use
#      the CPU the builds leave while they wait on downloads.
#   2. everything else, one test binary at a time, on a host no build is using: the gates, every
#      other end-to-end test, and the unit tests; beside them, from its start, tests/e2e_soak.rs,
#      which mostly waits (two servers at 20 calls/s for about four minutes) and asserts only
#      relations between what the lab recorded, never a wall-clock window.
# --no-fail-fast: a failing binary does not stop the others, so one run shows every failure.
tier=(--features e2e)
cargo test "${tier[@]}" --all-targets --no-run "$@"
phase() { printf '\n==== test.sh: %s (%s) ====\n' "$1" "$(date -u +%H:%M:%S)"; }
failed=()
untimed=(architecture audit compare readme_figures report_snapshots site_cli site_published source_fetch stored_shapes verify hlog attest)
started=$(date +%s)
phase "phase 1: tests/e2e_images.rs (nothing timed), beside ${untimed[*]} and the fuzz corpora"
beside_log=$(mktemp)
untimed_args=()
for t in "${untimed[@]}"; do untimed_args+=(--test "$t"); done
(
  status=0
  cargo test "${tier[@]}" --no-fail-fast "${untimed_args[@]}" "$@" || status=1
  # Fuzz targets (fuzz/): every corpus and a seeded mutation run of each target, as plain tests
  # on stable (sharing target/, so only the lab itself is rebuilt).
  CARGO_TARGET_DIR=target cargo test --manifest-path fuzz/Cargo.toml --no-default-features || status=1
  exit $status
) >"$beside_log" 2>&1 &
beside=$!
trap 'kill -TERM "$beside" 2>/dev/null || true' EXIT
cargo test "${tier[@]}" --test e2e_images "$@" || failed+=(e2e_images)
wait "$beside" || failed+=("${untimed[*]} or the fuzz corpora")
echo "---- what ran beside tests/e2e_images.rs ----"
cat "$beside_log"
rm -f "$beside_log"
built=$(date +%s)
phase "phase 2: every other test binary, one at a time"
soak_log=$(mktemp)
# In a process group of its own: an interrupted suite stops it (benchlab takes SIGTERM as an
# interruption and removes its cell's containers) rather than leaving it running.
setsid cargo test "${tier[@]}" --test e2e_soak "$@" >"$soak_log" 2>&1 &
soak=$!
trap 'kill -TERM "$beside" 2>/dev/null || true; kill -TERM -- "-$soak" 2>/dev/null || true' EXIT
rest=()
for t in tests/*.rs; do
  t=$(basename "$t" .rs)
  case " e2e_images e2e_soak ${untimed[*]} " in *" $t "*) ;; *) rest+=(--test "$t") ;; esac
done
cargo test "${tier[@]}" --no-fail-fast --lib --bins --benches "${rest[@]}" "$@" || failed+=(phase 2)
wait "$soak" || failed+=(e2e_soak)
echo "---- tests/e2e_soak.rs, which ran beside phase 2 ----"
cat "$soak_log"
rm -f "$soak_log"
phase "phases done: phase 1 $((built - started)) s, phase 2 $(($(date +%s) - built)) s"
if ((${#failed[@]})); then
  echo "test.sh: failed: ${failed[*]}" >&2
  exit 1
fi

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
