#!/usr/bin/env bash
# CLL-CLIP on the embedded default: six languages in sequence (Latin, Cyrillic, Greek and Han scripts; es and it
# share many tokens), plain CLL-CLIP against TEIR and its two halves (the paper's ablation), on a laptop CPU.
# Usage: bash examples/continual.sh [RUN_DIR]   (needs `mltk` on PATH; about 15 minutes on 2 cores)
#
# The tiny world is learnt in a few epochs only with a larger learning rate than the paper's 5e-5 (which is sized
# for ViT-B/32 and 3 epochs of COCO-sized data); everything else keeps the paper's settings.
set -euo pipefail
run=${1:-runs/continual}
langs=en,es,it,ru,el,zh
mkdir -p "$run"

[ -f "$run/world/world.json" ] || mltk synth-data --out "$run/world"
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

# Plain CLL-CLIP, TEIR's initialisation alone, its regularisation alone, and both.
for variant in plain teir-init-only teir-reg-only teir; do
  flag=()
  [ "$variant" = plain ] || flag=(--"$variant")
  mltk train-continual "$run/img" --captions "$run/world/captions" --model "$run/native" --lang "$langs" \
    --vocab-dir "$run/vocab" --epochs 5 --lr 2e-3 "${flag[@]}" --out "$run/cll-$variant" --json \
    | tee "$run/cll-$variant.json"
done

# Final average recall (AR) and forgetting (F) of t2i R@1 after the last task; the matrices and curves are in
# each run's continual.json, continual_matrix.png and continual_curve.png.
python - "$run" <<'EOF'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
print("| variant | final AR | final F |\n|:---|---:|---:|")
for variant in ("plain", "teir-init-only", "teir-reg-only", "teir"):
    result = json.loads((run / f"cll-{variant}.json").read_text())
    print(f"| {variant} | {result['AR']:.2f} | {result['F']:.2f} |")
EOF
