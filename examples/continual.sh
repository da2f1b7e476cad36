#!/usr/bin/env bash
# CLL-CLIP on the embedded default: six languages in sequence (Latin, Cyrillic, Greek and Han scripts; es and it
# share many tokens), plain CLL-CLIP against TEIR and its two halves (the paper's ablation), on a laptop CPU.
# Usage: bash examples/continual.sh [RUN_DIR] [SEEDS]   (needs `mltk` on PATH)
#   RUN_DIR default runs/continual; SEEDS default "0 1 2": the training seeds. The world (1,000 test images, so
#   that one caption moves R@1 by 0.03 points), the native CLIP and the vocabularies are shared by all runs.
# Measured: 34 minutes for the three default seeds with set-up, on 2 cores shared with another job
# (OMP_NUM_THREADS=1).
#
# The tiny world is learnt in a few epochs only with a larger learning rate than the paper's 5e-5 (which is sized
# for ViT-B/32 and 3 epochs of COCO-sized data); everything else keeps the paper's settings.
set -euo pipefail
run=${1:-runs/continual}
seeds=${2:-0 1 2}
langs=en,es,it,ru,el,zh
mkdir -p "$run"

[ -f "$run/world/world.json" ] || mltk synth-data --test 1000 --out "$run/world"
[ -f "$run/native/manifest.json" ] || mltk pretrain "$run/world/images" --captions "$run/world/captions" \
  --steps 500 --out "$run/native"
[ -f "$run/img/manifest.json" ] || mltk encode-images "$run/world/images" --model "$run/native" --out "$run/img"

# One vocabulary per task, each grown from the previous one (V_t = V_{t-1} ∪ V̂_t); all four runs share them.
parent=()
for lang in ${langs//,/ }; do
  [ -f "$run/vocab/$lang/manifest.json" ] || mltk build-vocab "$run/world/captions" --lang "$lang" --size 2000 \
    "${parent[@]}" --out "$run/vocab/$lang" > /dev/null
  parent=(--parent "$run/vocab/$lang")
done

# Plain CLL-CLIP, TEIR's initialisation alone, its regularisation alone, and both; each with every seed.
for seed in $seeds; do
  for variant in plain teir-init-only teir-reg-only teir; do
    flag=()
    [ "$variant" = plain ] || flag=(--"$variant")
    out=$run/seed$seed/cll-$variant
    [ -f "$out.json" ] && [ -f "$out/manifest.json" ] && continue
    mkdir -p "$run/seed$seed"
    mltk train-continual "$run/img" --captions "$run/world/captions" --model "$run/native" --lang "$langs" \
      --vocab-dir "$run/vocab" --epochs 5 --lr 2e-3 --seed "$seed" "${flag[@]}" --out "$out" --json > "$out.json.tmp"
    mv "$out.json.tmp" "$out.json"
  done
done

# Final average recall (AR) and forgetting (F) of t2i R@1 after the last task, mean ± std over the seeds (sample
# std), and how many seeds keep the paper's order; the matrices and curves are in each run's continual.json,
# continual_matrix.png and continual_curve.png.
python - "$run" $seeds <<'EOF'
import json, statistics, sys
from pathlib import Path
run, seeds = Path(sys.argv[1]), sys.argv[2:]
variants = ("plain", "teir-init-only", "teir-reg-only", "teir")
final = {v: [json.loads((run / f"seed{s}" / f"cll-{v}.json").read_text()) for s in seeds] for v in variants}
def stat(values):
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} ± {spread:.2f}"
print(f"{len(seeds)} seed(s): {' '.join(seeds)}\n")
print("| variant | final AR | final F | AR per seed | F per seed |\n|:---|---:|---:|:---|:---|")
for v in variants:
    ar, f = [r["AR"] for r in final[v]], [r["F"] for r in final[v]]
    print(f"| {v} | {stat(ar)} | {stat(f)} | {' '.join(f'{x:.2f}' for x in ar)} | {' '.join(f'{x:.2f}' for x in f)} |")
print("\nseeds where the first beats the second (higher AR / lower F):")
for a, b in (("teir", "plain"), ("teir", "teir-init-only"), ("teir", "teir-reg-only"),
             ("teir-init-only", "plain"), ("teir-reg-only", "plain")):
    ar = sum(x["AR"] > y["AR"] for x, y in zip(final[a], final[b]))
    f = sum(x["F"] < y["F"] for x, y in zip(final[a], final[b]))
    print(f"  {a} vs {b}: AR {ar}/{len(seeds)}, F {f}/{len(seeds)}")
EOF
