#!/bin/sh
# Prints what a Rust image holds, for the lab's environment manifest: the compiler that built it
# (`rustc --version`) and every registry package of the Cargo.lock it was built from (the
# servers' own package, which has no `source`, is left out). Run in the build stage.
set -e
version=$(rustc --version | cut -d' ' -f2)
printf '{"runtime":{"name":"rustc","version":"%s"},"packages":[' "$version"
awk -F'"' '
  function out() { if (name != "" && src) printf "%s{\"name\":\"%s\",\"version\":\"%s\"}", (n++ ? "," : ""), name, ver }
  /^\[\[package\]\]/ { out(); name = ""; ver = ""; src = 0 }
  /^name = /    { name = $2 }
  /^version = / { ver = $2 }
  /^source = /  { src = 1 }
  END { out() }
' "$1"
printf ']}\n'
