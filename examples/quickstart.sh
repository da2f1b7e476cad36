#!/usr/bin/env bash
# The main job on the embedded default, on a laptop CPU (about 7 minutes on 2 cores): a synthetic world with
# parallel captions in six languages (Latin, Cyrillic, Han and Arabic scripts), a tiny English CLIP pretrained on it,
# then MLA (NLT, then LE) to make that CLIP multilingual, an image index, and the retrieval metrics.
# Usage: bash examples/quickstart.sh [RUN_DIR]   (needs `mltk` on PATH)
#
# Each stage prints its artifact's path on stdout; the last line is the metrics artifact. Rerunning the script skips
# the stages whose artifact is complete, and an interrupted training stage resumes where it stopped.
set -euo pipefail
run=${1:-runs/quickstart}
langs=de,fr,ru,zh,ar
mkdir -p "$run"

# stage OUT COMMAND...: run COMMAND unless the artifact OUT is already complete; print OUT's path either way.
stage() {
  local out=$1; shift
  if [ -f "$out/manifest.json" ]; then realpath "$out"; else "$@"; fi
}

# 1. The world (6,000 train, 250 val and 250 test images, captions in ten languages of which five are trained
#    here) and the native English CLIP (t2i R@1 about 50% on test). examples/continual.sh and ccrk.sh reuse them.
[ -f "$run/world/world.json" ] || mltk synth-data --train 6000 --out "$run/world"
world=$run/world
stage "$run/native" mltk pretrain "$world/images" --captions "$world/captions" --steps 500 --out "$run/native"

# 2. A BPE vocabulary grown language by language (V_t = V_{t-1} ∪ V̂_t), the non-native tokenizer of MLA.
parent=()
for lang in ${langs//,/ }; do
  stage "$run/vocab/$lang" mltk build-vocab "$world/captions" --lang "$lang" --size 2000 "${parent[@]}" \
    --out "$run/vocab/$lang"
  parent=(--parent "$run/vocab/$lang")
done

# 3. NLT: each language's acquirers learn to give the frozen English embedding of the translation (MSE).
stage "$run/nlt" mltk train-nlt "$world/captions" --model "$run/native" --tokenizer "$run/vocab/ar" \
  --lang "$langs" --steps 500 --lr 1e-3 --out "$run/nlt"

# 4. The frozen image tower runs once; LE reads the image embeddings from the pipe (symmetric InfoNCE). The paper's
#    temperature 0.01 is OpenAI ViT-B/32's own learned one; the tiny CLIP learned about 0.06, and LE keeps it fixed
#    there (--temperature clip): at 0.01 LE pulls this tower off its similarity scale and loses recall.
stage "$run/img" mltk encode-images "$world/images" --model "$run/native" --out "$run/img" \
  | stage "$run/mla" mltk train-le - --captions "$world/captions" --init "$run/nlt" --steps 200 --lr 1e-4 \
    --temperature clip --out "$run/mla"

# 5. An exact image index, queried in German and in Chinese (top 5 as JSON lines, and a contact sheet).
stage "$run/index" mltk index build "$run/img" --out "$run/index"
mltk index query "$run/index" --model "$run/mla" --lang de --text "Zu sehen sind ein roter Kreis und ein blaues Quadrat." \
  --k 5 --contact-sheet "$run/query-de.png" --images "$world/images" >&2
mltk index query "$run/index" --model "$run/mla" --lang zh --text "画面里是三个红色的三角形。" \
  --k 5 --contact-sheet "$run/query-zh.png" --images "$world/images" >&2

# 6. Test-split retrieval in every language (English goes through the native CLIP unchanged), with MRV.
mltk evaluate --images "$run/img" --model "$run/mla" --captions "$world/captions" --split test \
  --lang "en,$langs" --metric mrv --format markdown --out "$run/metrics"
