#!/usr/bin/env bash
# The embedded reader's held-out table: `memagent eval` with the shipped defaults (quote memory, chunk 2048,
# memory 256) on RULER's wording and evaluation seed 1 (never used to set anything), every length.
# Each run keeps every answer as it comes: run this script again to go on where it stopped (--resume).
# Then: python benchmarks/embedded_lengths.py   (table and plot)
set -euo pipefail
out=benchmarks/results/embedded_lengths
run() {
  local name=$1; shift
  local resume=()
  [[ -f "$out/$name/settings.json" ]] && resume=(--resume)
  nice memagent eval --seed 1 --quiet --output-dir "$out/$name" "$@" "${resume[@]}"
}
run short --task niah_single_2,niah_multikey_1,niah_multivalue,vt --lengths 4k,16k --samples 20 --methods memagent
run short_two_hop --task two_hop --lengths 4k,16k --samples 40 --methods memagent
run long_256k --task niah_single_2,niah_multikey_1,two_hop --lengths 256k --samples 5 --methods memagent
run long_1m --task niah_single_2 --lengths 1m --samples 3 --methods memagent
run mid_64k --task niah_single_2,niah_multikey_1,niah_multivalue,vt --lengths 64k --samples 20 --methods memagent
run mid_64k_two_hop --task two_hop --lengths 64k --samples 40 --methods memagent
run baselines --task niah_single_2,niah_multikey_1,niah_multivalue,vt,two_hop --lengths 4k,16k --samples 20 \
  --methods bm25,embedding,truncation
