# CCR_k on the embedded default: 1-to-K contrastive learning against its 1-to-1 baseline and the English-bridge
# loss in six languages (en + de, fr, ru, zh, ar); consistency measured by MRV (paper eq. 7) and the per-language
# recall spread (max - min AR), side by side.
#
#   make -f examples/ccrk.mk [RUN=runs/ccrk] [BASE=runs/quickstart] [SEEDS="0 1 2"] [PARTS="2 4"] [-j2]
#
# BASE is the quickstart's run (world, native CLIP, image embeddings, vocabulary, NLT), built by quickstart.mk's
# rules when missing. Equal budgets: every run of a part sees the same 64 images per step and the same seed.
# Four starts (PARTS), because they answer different questions:
# 1. fresh MLA acquirers over the native CLIP (300 steps, lr 1e-3);
# 2. BASE/nlt, as the pipeline would continue after NLT (150 steps, lr 3e-4);
# 3. fresh acquirers on train captions with machine-translation errors (synth-data --mt-errors; de, fr 10%; ru
#    20%; zh, ar 30%); English, val, test and the images are BASE's;
# 4. a plain CLL-CLIP train-continual run over the six languages (2,000-token vocabularies, 5 epochs per task at
#    lr 2e-3), then each loss trains its token table on all six (300 steps, lr 1e-3, weight decay 0.05).
# Measured for seed 0 on 2 shared cores once BASE existed: parts 1-3 29 minutes, part 4 16 minutes.
include $(dir $(lastword $(MAKEFILE_LIST)))quickstart.mk

RUN ?= runs/ccrk
SEEDS ?= 0
PARTS ?= 1 2 3 4
CCRK_LANGS ?= en,de,fr,ru,zh,ar
MT_ERRORS ?= de=0.1,fr=0.1,ru=0.2,zh=0.3,ar=0.3
LOSSES := one-to-k one-to-one english-bridge
NAMES := 1-to-K,1-to-1,English bridge
START_1 := fresh
START_2 := nlt
START_3 := mt
START_4 := cll
TOKENIZER = $(BASE)/vocab/$(lastword $(call commas_to_spaces,$(LANGS)))
seed_suffix = $(if $(filter 0,$(1)),,-s$(1))

.DEFAULT_GOAL := summary
.PHONY: summary
.DELETE_ON_ERROR:

# $(call evaluate_rule,OUT,MODEL): test-split recall in the six languages through MODEL, plus MRV.
define evaluate_rule
$(1)/manifest.json: $(2)/manifest.json $(BASE)/img/manifest.json $(call settings,$(1),CCRK_LANGS) | $(TOOL)
	$(MLTK) evaluate --images $(BASE)/img --model $(2) --captions $(BASE)/world/captions --split test \
	  --lang $(CCRK_LANGS) --metric mrv --out $(1)
endef

# The starting points (shared by every seed).
$(RUN)/world-mt/captions/manifest.json: $(call settings,$(RUN)/world-mt,TRAIN MT_ERRORS) | $(TOOL)
	$(MLTK) synth-data --train $(TRAIN) --mt-errors $(MT_ERRORS) --out $(RUN)/world-mt
$(RUN)/cll/manifest.json: $(BASE)/img/manifest.json $(BASE)/native/manifest.json \
  $(call settings,$(RUN)/cll,CCRK_LANGS) | $(TOOL)
	$(MLTK) train-continual $(BASE)/img --captions $(BASE)/world/captions --model $(BASE)/native \
	  --lang $(CCRK_LANGS) --vocab-size 2000 --epochs 5 --lr 2e-3 --seed 0 --out $(RUN)/cll
$(eval $(call evaluate_rule,$(RUN)/m-nlt,$(BASE)/nlt))
$(eval $(call evaluate_rule,$(RUN)/m-cll,$(RUN)/cll))

# What each part trains from: prerequisites and train-ccrk options.
PART_1_NEEDS = $(BASE)/native/manifest.json $(TOKENIZER)/manifest.json
PART_1_ARGS = $(BASE)/world/captions --model $(BASE)/native --tokenizer $(TOKENIZER) --steps 300 --lr 1e-3 \
  --eval-every 100
PART_2_NEEDS = $(BASE)/nlt/manifest.json
PART_2_ARGS = $(BASE)/world/captions --init $(BASE)/nlt --steps 150 --lr 3e-4 --eval-every 50
PART_3_NEEDS = $(PART_1_NEEDS) $(RUN)/world-mt/captions/manifest.json
PART_3_ARGS = $(RUN)/world-mt/captions --model $(BASE)/native --tokenizer $(TOKENIZER) --steps 300 --lr 1e-3 \
  --eval-every 100
PART_4_NEEDS = $(RUN)/cll/manifest.json
PART_4_ARGS = $(BASE)/world/captions --init $(RUN)/cll --steps 300 --lr 1e-3 --weight-decay 0.05 --eval-every 100
REFERENCE_2 = $(RUN)/m-nlt
REFERENCE_4 = $(RUN)/m-cll
LABEL_2 = ,NLT (start)
LABEL_4 = ,CLL-CLIP (start)

# $(call train_rule,PART,SEED,LOSS): one train-ccrk run on BASE's images and its metrics.
define train_rule
$(RUN)/$(START_$(1))-$(3)$(call seed_suffix,$(2))/manifest.json: $(BASE)/img/manifest.json $(PART_$(1)_NEEDS) \
  $(call settings,$(RUN)/$(START_$(1))-$(3)$(call seed_suffix,$(2)),CCRK_LANGS PART_$(1)_ARGS) | $(TOOL)
	$(MLTK) train-ccrk $(BASE)/img --captions $(PART_$(1)_ARGS) --lang $(CCRK_LANGS) --loss $(3) --batch-size 64 \
	  --val-images 250 --seed $(2) --out $(RUN)/$(START_$(1))-$(3)$(call seed_suffix,$(2))
$(call evaluate_rule,$(RUN)/m-$(START_$(1))-$(3)$(call seed_suffix,$(2)),$(RUN)/$(START_$(1))-$(3)$(call seed_suffix,$(2)))
endef

# $(call compare_rule,PART,SEED): the three losses side by side over six languages (with the start as a
# reference where there is one), then over the five non-English ones.
define compare_rule
$(RUN)/compare-$(START_$(1))$(call seed_suffix,$(2))/manifest.json: $(foreach l,$(LOSSES),$(RUN)/m-$(START_$(1))-$(l)$(call seed_suffix,$(2))/manifest.json) $(if $(REFERENCE_$(1)),$(REFERENCE_$(1))/manifest.json) \
  $(call settings,$(RUN)/compare-$(START_$(1))$(call seed_suffix,$(2)),NAMES LABEL_$(1)) | $(TOOL)
	$(MLTK) compare $(foreach l,$(LOSSES),$(RUN)/m-$(START_$(1))-$(l)$(call seed_suffix,$(2))) $(REFERENCE_$(1)) \
	  --name "$(NAMES)$(LABEL_$(1))" --format markdown --out $$(@D)
$(RUN)/compare-$(START_$(1))-trained$(call seed_suffix,$(2))/manifest.json: $(foreach l,$(LOSSES),$(RUN)/m-$(START_$(1))-$(l)$(call seed_suffix,$(2))/manifest.json) \
  $(call settings,$(RUN)/compare-$(START_$(1))-trained$(call seed_suffix,$(2)),NAMES CCRK_LANGS) | $(TOOL)
	$(MLTK) compare $(foreach l,$(LOSSES),$(RUN)/m-$(START_$(1))-$(l)$(call seed_suffix,$(2))) --name "$(NAMES)" \
	  --lang $(CCRK_LANGS:en,%=%) --format markdown --out $$(@D)
endef

$(foreach p,$(PARTS),$(foreach s,$(SEEDS),$(foreach l,$(LOSSES),$(eval $(call train_rule,$(p),$(s),$(l))))\
  $(eval $(call compare_rule,$(p),$(s)))))

COMPARISONS = $(foreach p,$(PARTS),$(foreach s,$(SEEDS),$(RUN)/compare-$(START_$(p))$(call seed_suffix,$(s))/manifest.json \
  $(RUN)/compare-$(START_$(p))-trained$(call seed_suffix,$(s))/manifest.json))
$(RUN)/summary.md: $(COMPARISONS) $(EXAMPLES)summarize.py $(call settings,$(RUN)/summary.md,PARTS SEEDS)
	$(PYTHON) $(EXAMPLES)summarize.py ccrk $(RUN) "$(PARTS)" $(SEEDS) > $@.tmp && mv $@.tmp $@
summary: $(RUN)/summary.md
	@cat $<
