#!/usr/bin/env bash
# The quote-policy training study (issue 29): untrained, warm start only, warm start + RL, RL only, each read
# held-out (RULER's wording, evaluation seeds) by `memagent eval` side by side. Runs in the background on CPU:
#   nohup nice bash benchmarks/quote_training_study.sh > runs/quote-study.log 2>&1 &
# A step whose output exists is skipped, so running it again goes on where it stopped.
# Then: python benchmarks/quote_training_study.py (the table and the reward plot).
set -euo pipefail
OUT=${OUT:-runs/quote-study}
RESULTS=${RESULTS:-benchmarks/results/quote_training}
SAMPLES=${SAMPLES:-40}
mkdir -p "$OUT" "$RESULTS"

train() {  # name, the run whose checkpoint it continues ("" for none), then sed edits of examples/train_quote.yaml
  local name=$1 from=$2; shift 2
  [ -d "$OUT/$name/adapter" ] && return
  sed "$@" -e "s#^output_dir: .*#output_dir: $OUT/$name#" examples/train_quote.yaml > "$OUT/$name.yaml"
  local resume=()
  if [ -n "$from" ]; then
    mkdir -p "$OUT/$name"
    [ -d "$OUT/$name/checkpoint" ] || cp -r "$OUT/$from/checkpoint" "$OUT/$name/checkpoint"
    resume=(--resume)
  fi
  memagent train rl --config "$OUT/$name.yaml" "${resume[@]}"
}

evaluate() {  # variant, length, then memagent eval options
  local variant=$1 length=$2; shift 2
  local resume=()
  [ -f "$RESULTS/$variant-$length/settings.json" ] && resume=(--resume)
  memagent eval --task two_hop,vt,niah_multikey_1 --lengths "$length" --samples "$SAMPLES" --methods memagent \
    --quiet "${resume[@]}" --output-dir "$RESULTS/$variant-$length" "$@"
}

evaluate untrained 4k
train warm "" -e 's/^steps: .*/steps: 0/'
evaluate warm 4k --adapter "$OUT/warm/adapter"
train warm_rl warm -e "s/^steps: .*/steps: 6/"  # RL from the warm-started checkpoint; 6 steps fit a session
evaluate warm_rl 4k --adapter "$OUT/warm_rl/adapter"
train rl "" -e '/^warm_start:/d'
evaluate rl 4k --adapter "$OUT/rl/adapter"
for variant in untrained warm warm_rl rl; do
  adapter=()
  [ "$variant" != untrained ] && adapter=(--adapter "$OUT/$variant/adapter")
  SAMPLES=20 evaluate "$variant" 16k "${adapter[@]}"
done
