# The main job on the embedded default, on a laptop CPU (about 8 minutes on 2 idle cores): a synthetic world with
# parallel captions in six languages (Latin, Cyrillic, Han and Arabic scripts), a tiny English CLIP pretrained on
# it, then MLA (NLT, then LE) to make that CLIP multilingual, an image index queried in German and Chinese, and
# the retrieval metrics with their pictures.
#
#   make -f examples/quickstart.mk               # everything, into runs/quickstart (BASE=DIR elsewhere) (builds .venv first if needed)
#   make -f examples/quickstart.mk -n            # the plan
#   make -f examples/quickstart.mk -j2           # encode-images runs beside the vocabularies and NLT
#   make -f examples/quickstart.mk BASE=/tmp/q PRETRAIN_STEPS=20 NLT_STEPS=10 LE_STEPS=10 TRAIN=200   # a smoke run
#
# Rerunning skips the complete artifacts; an interrupted training stage resumes where it stopped. A stage whose
# variables changed (make NLT_STEPS=12) runs again, with what depends on it (settings stamps in BASE/.settings).
include $(dir $(lastword $(MAKEFILE_LIST)))common.mk

BASE ?= runs/quickstart
LANGS ?= de,fr,ru,zh,ar
TRAIN ?= 6000
PRETRAIN_STEPS ?= 500
VOCAB_SIZE ?= 2000
NLT_STEPS ?= 500
NLT_LR ?= 1e-3
LE_STEPS ?= 200
LE_LR ?= 1e-4
TOKENIZER = $(BASE)/vocab/$(lastword $(call commas_to_spaces,$(LANGS)))

.DEFAULT_GOAL := quickstart
.PHONY: quickstart world native nlt mla metrics queries
.DELETE_ON_ERROR:
quickstart: queries metrics

world: $(BASE)/world/captions/manifest.json
native: $(BASE)/native/manifest.json
nlt: $(BASE)/nlt/manifest.json
mla: $(BASE)/mla/manifest.json
metrics: $(BASE)/metrics/manifest.json
queries: $(BASE)/query-de.png $(BASE)/query-zh.png

# 1. The world (TRAIN train, 250 val and 250 test images, captions in ten languages of which LANGS are trained)
#    and the native English CLIP (t2i R@1 about 50% on test). The other examples reuse them.
$(BASE)/world/captions/manifest.json: $(call settings,$(BASE)/world,TRAIN) | $(TOOL)
	$(MLTK) synth-data --train $(TRAIN) --out $(BASE)/world
$(BASE)/world/images/manifest.json: $(BASE)/world/captions/manifest.json

$(BASE)/native/manifest.json: $(BASE)/world/captions/manifest.json $(call settings,$(BASE)/native,PRETRAIN_STEPS) \
  | $(TOOL)
	$(MLTK) pretrain $(BASE)/world/images --captions $(BASE)/world/captions --steps $(PRETRAIN_STEPS) --out $(BASE)/native

# 2. A BPE vocabulary grown language by language, the non-native tokenizer of MLA.
$(call vocab_chain,$(BASE),$(BASE)/world/captions,$(LANGS),$(VOCAB_SIZE))

# 3. NLT: each language's acquirers learn to give the frozen English embedding of the translation (MSE).
$(BASE)/nlt/manifest.json: $(BASE)/native/manifest.json $(TOKENIZER)/manifest.json \
  $(call settings,$(BASE)/nlt,LANGS NLT_STEPS NLT_LR) | $(TOOL)
	$(MLTK) train-nlt $(BASE)/world/captions --model $(BASE)/native --tokenizer $(TOKENIZER) --lang $(LANGS) \
	  --steps $(NLT_STEPS) --lr $(NLT_LR) --out $(BASE)/nlt

# 4. The frozen image tower runs once. LE (symmetric InfoNCE) keeps the tiny CLIP's own temperature
#    (--temperature clip, about 0.06): the paper's 0.01 is OpenAI ViT-B/32's, and pulls this tower off its scale.
$(BASE)/img/manifest.json: $(BASE)/native/manifest.json | $(TOOL)
	$(MLTK) encode-images $(BASE)/world/images --model $(BASE)/native --out $(BASE)/img

$(BASE)/mla/manifest.json: $(BASE)/img/manifest.json $(BASE)/nlt/manifest.json \
  $(call settings,$(BASE)/mla,LE_STEPS LE_LR) | $(TOOL)
	$(MLTK) train-le $(BASE)/img --captions $(BASE)/world/captions --init $(BASE)/nlt --steps $(LE_STEPS) \
	  --lr $(LE_LR) --temperature clip --out $(BASE)/mla

# 5. An exact image index, queried in German and in Chinese (top 5 as JSON lines on stderr, and a contact sheet).
$(BASE)/index/manifest.json: $(BASE)/img/manifest.json | $(TOOL)
	$(MLTK) index build $(BASE)/img --out $(BASE)/index

$(BASE)/query-de.png: $(BASE)/index/manifest.json $(BASE)/mla/manifest.json | $(TOOL)
	$(MLTK) index query $(BASE)/index --model $(BASE)/mla --lang de \
	  --text "Zu sehen sind ein roter Kreis und ein blaues Quadrat." --k 5 --contact-sheet $@ \
	  --image-source $(BASE)/world/images >&2

$(BASE)/query-zh.png: $(BASE)/index/manifest.json $(BASE)/mla/manifest.json | $(TOOL)
	$(MLTK) index query $(BASE)/index --model $(BASE)/mla --lang zh --text "画面里是三个红色的三角形。" --k 5 \
	  --contact-sheet $@ --image-source $(BASE)/world/images >&2

# 6. Test-split retrieval in every language (English goes through the native CLIP unchanged), with MRV; the
#    table on stderr and in metrics.md, the pictures in BASE/plots. It runs last (after the queries, whose contact
#    sheets it follows), so the job ends on the headline numbers and where the metrics and pictures are;
#    `mltk inspect BASE/metrics` prints the table again.
$(BASE)/metrics/manifest.json: $(BASE)/img/manifest.json $(BASE)/mla/manifest.json \
  $(call settings,$(BASE)/metrics,LANGS) | $(TOOL) $(BASE)/query-de.png $(BASE)/query-zh.png
	$(MLTK) evaluate --images $(BASE)/img --model $(BASE)/mla --captions $(BASE)/world/captions --split test \
	  --lang en,$(LANGS) --metric mrv --format markdown --plot $(BASE)/plots --out $(BASE)/metrics
