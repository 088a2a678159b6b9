#!/usr/bin/env bash
# The held-out real-text table: `memagent eval --task realtext` (questions mined from Genesis, the project's test
# book; evaluation seed 1) with the shipped embedded defaults, MemAgent against the three fair baselines (the
# sentences BM25, MiniLM or both fused rank highest, in MemAgent's memory budget, answered by its answer step),
# at 16K (a window of Genesis) and 64K (all of Genesis, ~50K tokens). Each run keeps every answer as it comes:
# run this script again to go on where it stopped (--resume). Then: python benchmarks/real_text.py
set -euo pipefail
out=benchmarks/results/real_text
methods=memagent,bm25-sentences,minilm-sentences,hybrid-sentences
run() {
  local name=$1; shift
  local resume=()
  [[ -f "$out/$name/settings.json" ]] && resume=(--resume)
  nice memagent eval --task realtext --seed 1 --quiet --methods "$methods" --output-dir "$out/$name" "$@" "${resume[@]}"
}
run 16k --lengths 16k --samples "${SAMPLES:-100}"
run 64k --lengths 64k --samples "${SAMPLES:-100}"
