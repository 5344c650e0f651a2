#!/bin/sh
# Rebuilds fault.bpf.o, the BPF collector that src/record/bpf.rs embeds,
# from fault.bpf.c (or into $1). Needs clang (Debian: apt-get install clang).
# The object is committed so that `cargo build` needs no clang; the test
# record::bpf::tests::object_matches_its_source rebuilds it and compares.
set -eu
cd "$(dirname "$0")"
exec clang -O2 -target bpf -I"/usr/include/$(uname -m)-linux-gnu" \
  -c fault.bpf.c -o "${1:-fault.bpf.o}"
