# MLA's ablation on the embedded default (the paper's Table 6 order: NLT then LE >= NLT only > LE only), test
# split, five languages, for one or more training seeds. NLT only is a train-nlt checkpoint (500 steps), NLT then
# LE continues it with train-le (200 steps), and LE only trains fresh acquirers with the contrastive loss alone
# for the same 700 steps at NLT's learning rate. Seed 0 reuses the quickstart's NLT and NLT-then-LE checkpoints.
#
#   make -f examples/mla_ablation.mk [RUN=runs/mla-ablation] [BASE=runs/quickstart] [SEEDS="0 1 2"] [-j2]
#
# Measured on 2 cores: about 4 minutes for seed 0 beyond BASE (shared with another job), 11.5 for seeds 1 and 2.
include $(dir $(lastword $(MAKEFILE_LIST)))quickstart.mk

RUN ?= runs/mla-ablation
SEEDS ?= 0
LE_ONLY_STEPS ?= 700
TOKENIZER = $(BASE)/vocab/$(lastword $(call commas_to_spaces,$(LANGS)))
CAPTIONS = $(BASE)/world/captions

.DEFAULT_GOAL := summary
.PHONY: summary
.DELETE_ON_ERROR:

# BASE's artifacts (the quickstart's world, native CLIP, image embeddings, vocabularies, NLT and LE) come from
# the rules of quickstart.mk, included above: built when missing, reused when complete.

# $(call evaluate_rule,OUT,MODEL): test-split recall in en + LANGS through MODEL, with MRV.
define evaluate_rule
$(1)/manifest.json: $(2)/manifest.json $(BASE)/img/manifest.json $(call settings,$(1),LANGS) | $(TOOL)
	$(MLTK) evaluate --images $(BASE)/img --model $(2) --captions $(CAPTIONS) --split test --lang en,$(LANGS) \
	  --metric mrv --out $(1)
endef

# $(call seed_rules,SEED,NLT,MLA): LE only, and the three variants' metrics and comparison for one seed.
define seed_rules
$(RUN)/seed$(1)/le-only/manifest.json: $(BASE)/img/manifest.json $(TOKENIZER)/manifest.json \
  $(call settings,$(RUN)/seed$(1)/le-only,LANGS LE_ONLY_STEPS) | $(TOOL)
	$(MLTK) train-le $(BASE)/img --captions $(CAPTIONS) --lang $(LANGS) --seed $(1) --model $(BASE)/native \
	  --tokenizer $(TOKENIZER) --steps $(LE_ONLY_STEPS) --lr 1e-3 --temperature clip --out $(RUN)/seed$(1)/le-only
$(call evaluate_rule,$(RUN)/seed$(1)/metrics-nlt,$(2))
$(call evaluate_rule,$(RUN)/seed$(1)/metrics-mla,$(3))
$(call evaluate_rule,$(RUN)/seed$(1)/metrics-le-only,$(RUN)/seed$(1)/le-only)
$(RUN)/seed$(1)/compare/manifest.json: $(foreach v,mla nlt le-only,$(RUN)/seed$(1)/metrics-$(v)/manifest.json) \
  $(call settings,$(RUN)/seed$(1)/compare,LANGS) | $(TOOL)
	$(MLTK) compare $(RUN)/seed$(1)/metrics-mla $(RUN)/seed$(1)/metrics-nlt $(RUN)/seed$(1)/metrics-le-only \
	  --name "NLT then LE,NLT only,LE only" --lang $(LANGS) --format markdown --out $$(@D)
endef

# Seeds other than 0 train their own NLT and NLT-then-LE.
define trained_seed
$(RUN)/seed$(1)/nlt/manifest.json: $(BASE)/native/manifest.json $(TOKENIZER)/manifest.json \
  $(call settings,$(RUN)/seed$(1)/nlt,LANGS NLT_STEPS) | $(TOOL)
	$(MLTK) train-nlt $(CAPTIONS) --model $(BASE)/native --tokenizer $(TOKENIZER) --lang $(LANGS) --seed $(1) \
	  --steps $(NLT_STEPS) --lr 1e-3 --out $(RUN)/seed$(1)/nlt
$(RUN)/seed$(1)/mla/manifest.json: $(BASE)/img/manifest.json $(RUN)/seed$(1)/nlt/manifest.json \
  $(call settings,$(RUN)/seed$(1)/mla,LANGS LE_STEPS) | $(TOOL)
	$(MLTK) train-le $(BASE)/img --captions $(CAPTIONS) --lang $(LANGS) --seed $(1) --init $(RUN)/seed$(1)/nlt \
	  --steps $(LE_STEPS) --lr 1e-4 --temperature clip --out $(RUN)/seed$(1)/mla
endef

$(foreach s,$(SEEDS),$(if $(filter 0,$(s)),$(eval $(call seed_rules,0,$(BASE)/nlt,$(BASE)/mla)),\
  $(eval $(call trained_seed,$(s)))$(eval $(call seed_rules,$(s),$(RUN)/seed$(s)/nlt,$(RUN)/seed$(s)/mla))))

# Each variant's mean AR of the five languages against English's, mean ± sample std over the seeds.
$(RUN)/summary.md: $(foreach s,$(SEEDS),$(RUN)/seed$(s)/compare/manifest.json) $(EXAMPLES)summarize.py \
  $(call settings,$(RUN)/summary.md,LANGS SEEDS)
	$(PYTHON) $(EXAMPLES)summarize.py mla $(RUN) $(LANGS) $(SEEDS) > $@.tmp && mv $@.tmp $@
summary: $(RUN)/summary.md
	@cat $<
