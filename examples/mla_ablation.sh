#!/usr/bin/env bash
# MLA's ablation on the embedded default (the paper's Table 6 order: NLT then LE >= NLT only > LE only), test split,
# five languages (de, fr, ru, zh, ar), for one or more training seeds. NLT only is a train-nlt checkpoint (500
# steps), NLT then LE continues it with train-le (200 steps), and LE only trains fresh acquirers with the
# contrastive loss alone (the same LE loss: the base CLIP's own temperature) for the same 700 steps at NLT's
# learning rate. Seed 0 reuses the main job's NLT and NLT-then-LE checkpoints (the quickstart runs at seed 0).
# Usage: bash examples/mla_ablation.sh [RUN_DIR] [BASE_DIR] [SEEDS]
#   BASE_DIR: the quickstart's run, built if missing; SEEDS default "0" (e.g. "0 1 2").
# Measured on 2 cores: about 4 minutes for seed 0 beyond BASE (shared with another job), 11.5 for seeds 1 and 2.
set -euo pipefail
run=${1:-runs/mla-ablation}
base=${2:-runs/quickstart}
seeds=${3:-0}
langs=de,fr,ru,zh,ar
here=$(dirname "$0")
common=(--captions "$base/world/captions" --lang "$langs")
mkdir -p "$run"

[ -f "$base/metrics/manifest.json" ] || bash "$here/quickstart.sh" "$base" > /dev/null

for seed in $seeds; do
  dir=$run/seed$seed
  mkdir -p "$dir"
  nlt=$base/nlt mla=$base/mla
  if [ "$seed" != 0 ]; then
    nlt=$dir/nlt mla=$dir/mla
    [ -f "$nlt/manifest.json" ] || mltk train-nlt "$base/world/captions" --model "$base/native" \
      --tokenizer "$base/vocab/ar" --lang "$langs" --seed "$seed" --steps 500 --lr 1e-3 --out "$nlt" > /dev/null
    [ -f "$mla/manifest.json" ] || mltk train-le "$base/img" "${common[@]}" --seed "$seed" --init "$nlt" --steps 200 \
      --lr 1e-4 --temperature clip --out "$mla" > /dev/null
  fi
  [ -f "$dir/le-only/manifest.json" ] || mltk train-le "$base/img" "${common[@]}" --seed "$seed" --model "$base/native" \
    --tokenizer "$base/vocab/ar" --steps 700 --lr 1e-3 --temperature clip --out "$dir/le-only" > /dev/null

  for name in nlt mla le-only; do
    checkpoint=$dir/le-only
    [ "$name" = nlt ] && checkpoint=$nlt
    [ "$name" = mla ] && checkpoint=$mla
    [ -f "$dir/metrics-$name/manifest.json" ] || mltk evaluate --images "$base/img" --model "$checkpoint" \
      --captions "$base/world/captions" --split test --lang "en,$langs" --metric mrv --out "$dir/metrics-$name" \
      > /dev/null
  done
  # Mean AR of the five languages, MRV and recall spread side by side (on stderr), per seed.
  mltk compare "$dir/metrics-mla" "$dir/metrics-nlt" "$dir/metrics-le-only" --name "NLT then LE,NLT only,LE only" \
    --lang "$langs" --format markdown --out "$dir/compare" > /dev/null
done

# Each variant's mean AR of the five languages against English's, mean ± sample std over the seeds.
python3 - "$run" "$langs" $seeds <<'EOF'
import json, statistics, sys
from pathlib import Path
run, langs, seeds = Path(sys.argv[1]), sys.argv[2].split(","), sys.argv[3:]
def stat(values):
    return f"{statistics.mean(values):.2f}" + (f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else "")
print(f"seed(s): {' '.join(seeds)}\n")
print("| variant | English AR | mean AR of " + ", ".join(langs) + " | ratio | per seed |\n|:---|---:|---:|---:|:---|")
for name, label in (("mla", "NLT then LE"), ("nlt", "NLT only"), ("le-only", "LE only")):
    english, others = [], []
    for seed in seeds:
        per_language = json.loads((run / f"seed{seed}" / f"metrics-{name}" / "metrics.json").read_text())["per_language"]
        english.append(per_language["en"]["AR"])
        others.append(sum(per_language[lang]["AR"] for lang in langs) / len(langs))
    ratio = statistics.mean(others) / statistics.mean(english)
    print(f"| {label} | {stat(english)} | {stat(others)} | {ratio:.2f} | {' '.join(f'{x:.2f}' for x in others)} |")
EOF
