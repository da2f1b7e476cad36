#!/usr/bin/env bash
# MLA's ablation on the embedded default (the paper's Table 6 order: NLT then LE >= NLT only > LE only), test split,
# five languages (de, fr, ru, zh, ar). It reuses the main job's run directory: NLT only is its train-nlt checkpoint
# (500 steps), NLT then LE is its final checkpoint (500 + 200 steps), and LE only trains fresh acquirers with the
# contrastive loss alone (the same LE loss: the base CLIP's own temperature) for the same 700 steps at NLT's
# learning rate.
# Usage: bash examples/mla_ablation.sh [RUN_DIR] [BASE_DIR]   (BASE_DIR: the quickstart's run, built if missing;
# about 3 minutes on 2 cores beyond it)
set -euo pipefail
run=${1:-runs/mla-ablation}
base=${2:-runs/quickstart}
langs=de,fr,ru,zh,ar
here=$(dirname "$0")
mkdir -p "$run"

[ -f "$base/metrics/manifest.json" ] || bash "$here/quickstart.sh" "$base" > /dev/null
[ -f "$run/le-only/manifest.json" ] || mltk train-le "$base/img" --captions "$base/world/captions" \
  --model "$base/native" --tokenizer "$base/vocab/ar" --lang "$langs" --steps 700 --lr 1e-3 --temperature clip \
  --out "$run/le-only" > /dev/null

for name in nlt mla le-only; do
  checkpoint=$base/$name
  [ "$name" = le-only ] && checkpoint=$run/le-only
  [ -f "$run/metrics-$name/manifest.json" ] || mltk evaluate --images "$base/img" --model "$checkpoint" \
    --captions "$base/world/captions" --split test --lang "en,$langs" --metric mrv --out "$run/metrics-$name" \
    > /dev/null
done

# Mean AR of the five languages (and MRV, recall spread) side by side, then each against English's AR.
mltk compare "$run/metrics-mla" "$run/metrics-nlt" "$run/metrics-le-only" --name "NLT then LE,NLT only,LE only" \
  --lang "$langs" --format markdown --out "$run/compare" > /dev/null
python3 - "$run" "$langs" <<'EOF'
import json, sys
from pathlib import Path
run, langs = Path(sys.argv[1]), sys.argv[2].split(",")
print("| variant | English AR | mean AR of " + ", ".join(langs) + " | ratio |\n|:---|---:|---:|---:|")
for name, label in (("mla", "NLT then LE"), ("nlt", "NLT only"), ("le-only", "LE only")):
    per_language = json.loads((run / f"metrics-{name}" / "metrics.json").read_text())["per_language"]
    english, others = per_language["en"]["AR"], sum(per_language[l]["AR"] for l in langs) / len(langs)
    print(f"| {label} | {english:.1f} | {others:.1f} | {others / english:.2f} |")
EOF
