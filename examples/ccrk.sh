#!/usr/bin/env bash
# CCR_k on the embedded default: 1-to-K contrastive learning against its 1-to-1 baseline and the English-bridge
# loss, six languages (Latin, Cyrillic, Han and Arabic scripts), every run starting from the same NLT checkpoint
# with the same steps and seed; consistency measured by MRV and the per-language recall spread.
# Usage: bash examples/ccrk.sh [RUN_DIR]   (needs `mltk` on PATH; about 60 minutes of a loaded 2-core CPU, most
# of it the native pretraining)
#
# Sizes are laptop-sized: 400 pretraining steps of batch 64, NLT 600 steps, each train-ccrk run 200 steps of 64
# images x K = 6 captions. `mltk evaluate --model` encodes the test captions through each checkpoint itself.
set -euo pipefail
run=${1:-runs/ccrk}
langs=en,de,fr,ru,zh,ar
mkdir -p "$run"

[ -f "$run/world/world.json" ] || mltk synth-data --langs "$langs" --out "$run/world"
[ -f "$run/native/manifest.json" ] || mltk pretrain "$run/world/images" --captions "$run/world/captions" \
  --steps 400 --batch-size 64 --eval-every 100 --out "$run/native"
[ -f "$run/img/manifest.json" ] || mltk encode-images "$run/world/images" --model "$run/native" --out "$run/img"

# One BPE vocabulary grown over the five non-English languages, then NLT (MSE to the frozen English features).
parent=()
for lang in de fr ru zh ar; do
  [ -f "$run/vocab/$lang/manifest.json" ] || mltk build-vocab "$run/world/captions" --lang "$lang" --size 2000 \
    "${parent[@]}" --out "$run/vocab/$lang" > /dev/null
  parent=(--parent "$run/vocab/$lang")
done
[ -f "$run/nlt/manifest.json" ] || mltk train-nlt "$run/world/captions" --images "$run/img" --model "$run/native" \
  --tokenizer "$run/vocab/ar" --lang de,fr,ru,zh,ar --steps 600 --batch-size 64 --lr 1e-3 --out "$run/nlt"

# The three losses from the same start, same steps, same seed.
for loss in one-to-k one-to-one english-bridge; do
  [ -f "$run/ccrk-$loss/manifest.json" ] || mltk train-ccrk "$run/img" --captions "$run/world/captions" \
    --init "$run/nlt" --loss "$loss" --steps 200 --batch-size 64 --lr 3e-4 --seed 0 --val-images 250 \
    --out "$run/ccrk-$loss"
done

# Recall + MRV of each checkpoint on the test split (evaluate encodes the test captions of the six languages
# through the checkpoint, each language by its own path), then the side-by-side table.
for name in nlt ccrk-one-to-k ccrk-one-to-one ccrk-english-bridge; do
  [ -f "$run/m-$name/manifest.json" ] || mltk evaluate --images "$run/img" --model "$run/$name" \
    --captions "$run/world/captions" --split test --lang "$langs" --metric mrv --out "$run/m-$name"
done
mltk compare "$run/m-nlt" "$run/m-ccrk-one-to-k" "$run/m-ccrk-one-to-one" "$run/m-ccrk-english-bridge" \
  --name NLT,1-to-K,1-to-1,english-bridge --format markdown --out "$run/compare"
