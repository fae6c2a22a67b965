#!/bin/sh
# Prints what a Rust image holds, for the lab's environment manifest: the compiler that built it
# (`rustc --version`) and every registry package compiled into its binaries: `cargo tree` for the
# image's target with normal and build edges, so that platform-specific entries of Cargo.lock that
# never build here (Windows, Android, wasm) are left out, as is the servers' own package (a path
# package). Run in the build stage, in the crate's folder, after `cargo fetch`.
set -e
version=$(rustc --version | cut -d' ' -f2)
printf '{"runtime":{"name":"rustc","version":"%s"},"packages":[' "$version"
cargo tree --locked --offline --target x86_64-unknown-linux-gnu -e normal,build \
    --prefix none --format '{p}' |
  grep -v '(/' | awk '{ sub(/^v/, "", $2); print $1, $2 }' | sort -u |
  awk '{ printf "%s{\"name\":\"%s\",\"version\":\"%s\"}", (NR > 1 ? "," : ""), $1, $2 }'
printf ']}\n'
