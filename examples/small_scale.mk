# The small-scale tables of docs/results.md on the embedded default, each over training seeds (one world, one
# native CLIP and one vocabulary chain; SEEDS seeds each of the NLT, full fine-tune, MKD and AME runs):
#   zero-shot-video  MLA's zero-shot classification and video retrieval: the frozen CLIP, MLA's acquirers (NLT)
#                    and a full fine-tune of the text tower for the non-native languages (train-nlt --train full)
#   mkd              MLA's MKD baseline, English through the student (train-nlt --train mkd), beside the acquirers
#   ame              AME (--recipe ame): the ranking hinge from each seed's NLT start with cosine and order
#                    similarity, with and without the learnt map over the world's de-en lexicon; recall by the
#                    trained scorer (and by cosine for order), and bilingual lexicon induction
#
#   make -f examples/small_scale.mk [RUN=runs/small-scale] [SEEDS="0 1 2"] [-j2] [zero-shot-video mkd ame]
#
# Each table is RUN/TARGET.md (mean ± sample std over the seeds, and each seed), printed at the end.
include $(dir $(lastword $(MAKEFILE_LIST)))common.mk

RUN ?= runs/small-scale
SEEDS ?= 0 1 2
TRAIN ?= 2000
VAL ?= 200
TEST ?= 400
WORLD_LANGS ?= en,de,fr
LANGS ?= de,fr
PRETRAIN_STEPS ?= 400
VOCAB_SIZE ?= 2000
NLT_STEPS ?= 150
NLT_LR ?= 1e-3
CLIPS ?= 200
VIDEO_FRAMES ?= 12
AME_STEPS ?= 100
AME_ALIGN_EVERY ?= 20
AME_SIMILARITIES := cosine order
TOKENIZER = $(RUN)/vocab/$(lastword $(call commas_to_spaces,$(LANGS)))
CAPTIONS = $(RUN)/world/captions
NLT_KINDS := acquirers full mkd

.DEFAULT_GOAL := all
.PHONY: all zero-shot-video mkd ame
.DELETE_ON_ERROR:
all: zero-shot-video mkd ame

# --- the world (its test split scores every table), the native CLIP, its image embeddings, the vocabularies ----
$(RUN)/world/captions/manifest.json: $(call settings,$(RUN)/world,TRAIN VAL TEST WORLD_LANGS) | $(TOOL)
	$(MLTK) synth-data --train $(TRAIN) --val $(VAL) --test $(TEST) --lang $(WORLD_LANGS) --out $(RUN)/world
$(RUN)/native/manifest.json: $(RUN)/world/captions/manifest.json $(call settings,$(RUN)/native,PRETRAIN_STEPS) \
  | $(TOOL)
	$(MLTK) pretrain $(RUN)/world/images --captions $(CAPTIONS) --steps $(PRETRAIN_STEPS) --out $(RUN)/native
$(RUN)/img/manifest.json: $(RUN)/native/manifest.json | $(TOOL)
	$(MLTK) encode-images $(RUN)/world/images --model $(RUN)/native --out $(RUN)/img
$(call vocab_chain,$(RUN),$(CAPTIONS),$(LANGS),$(VOCAB_SIZE))

# --- per seed: NLT three ways (MLA's acquirers, the full fine-tune, MKD), same data, steps and rate ------------
define nlt_rule
$(RUN)/seed$(1)/nlt-$(2)/manifest.json: $(RUN)/native/manifest.json $(TOKENIZER)/manifest.json \
  $(call settings,$(RUN)/seed$(1)/nlt-$(2),LANGS NLT_STEPS NLT_LR) | $(TOOL)
	$(MLTK) train-nlt $(CAPTIONS) --model $(RUN)/native --tokenizer $(TOKENIZER) --lang $(LANGS) --train $(2) \
	  --recipe mla-nlt --steps $(NLT_STEPS) --lr $(NLT_LR) --seed $(1) --out $(RUN)/seed$(1)/nlt-$(2)
endef
$(foreach s,$(SEEDS),$(foreach k,$(NLT_KINDS),$(eval $(call nlt_rule,$(s),$(k)))))

# --- zero-shot classification (the world's colour-shape classes on its test images) and video retrieval --------
# $(call zero_shot_rule,OUT,MODEL_ARTIFACT)
define zero_shot_rule
$(RUN)/$(1)/manifest.json: $(RUN)/$(2)/manifest.json $(RUN)/img/manifest.json \
  $(call settings,$(RUN)/$(1),WORLD_LANGS) | $(TOOL)
	$(MLTK) classify $(RUN)/img --classes $(RUN)/world --model $(RUN)/$(2) --lang $(WORLD_LANGS) --out $(RUN)/$(1)
endef
$(RUN)/clips/captions/manifest.json: $(call settings,$(RUN)/clips,CLIPS WORLD_LANGS) | $(TOOL)
	$(MLTK) synth-videos --train 0 --val 0 --test $(CLIPS) --lang $(WORLD_LANGS) --out $(RUN)/clips
$(RUN)/vid/manifest.json: $(RUN)/clips/captions/manifest.json $(RUN)/native/manifest.json \
  $(call settings,$(RUN)/vid,VIDEO_FRAMES) | $(TOOL)
	$(MLTK) encode-videos $(RUN)/clips/videos --model $(RUN)/native --frames $(VIDEO_FRAMES) --split test \
	  --out $(RUN)/vid
# $(call video_rule,OUT,MODEL_ARTIFACT)
define video_rule
$(RUN)/$(1)/manifest.json: $(RUN)/$(2)/manifest.json $(RUN)/vid/manifest.json \
  $(call settings,$(RUN)/$(1),WORLD_LANGS) | $(TOOL)
	$(MLTK) evaluate --images $(RUN)/vid --model $(RUN)/$(2) --captions $(RUN)/clips/captions --split test \
	  --lang $(WORLD_LANGS) --out $(RUN)/$(1)
endef
$(eval $(call zero_shot_rule,zero-shot-native,native))
$(eval $(call video_rule,video-native,native))
$(foreach s,$(SEEDS),$(foreach k,$(NLT_KINDS),$(eval $(call zero_shot_rule,seed$(s)/zero-shot-$(k),seed$(s)/nlt-$(k)))))
$(foreach s,$(SEEDS),$(foreach k,acquirers full,$(eval $(call video_rule,seed$(s)/video-$(k),seed$(s)/nlt-$(k)))))

# --- AME from each seed's NLT start: hinge with cosine or order similarity, with and without the map -------------
$(RUN)/lexicon-de/manifest.json: $(RUN)/world/captions/manifest.json | $(TOOL)
	$(MLTK) import-data synth-lexicon $(RUN)/world --src de --tgt en --out $(RUN)/lexicon-de
# $(call bli_rule,MODEL_ARTIFACT): MODEL-bli, P@1 both ways and CSLS over the lexicon
define bli_rule
$(RUN)/$(1)-bli/manifest.json: $(RUN)/$(1)/manifest.json $(RUN)/lexicon-de/manifest.json | $(TOOL)
	$(MLTK) evaluate --model $(RUN)/$(1) --metric bli --lexicon $(RUN)/lexicon-de --out $(RUN)/$(1)-bli
endef
# $(call recall_rule,OUT,MODEL_ARTIFACT,SIMILARITY): test-split recall in en and de (empty SIMILARITY: the trained one)
define recall_rule
$(RUN)/$(1)/manifest.json: $(RUN)/$(2)/manifest.json $(RUN)/img/manifest.json | $(TOOL)
	$(MLTK) evaluate --images $(RUN)/img --model $(RUN)/$(2) --captions $(CAPTIONS) --split test --lang en,de \
	  $(call opt,--similarity,$(3)) --out $(RUN)/$(1)
endef
# $(call ame_rule,SEED,SIMILARITY,EXTRA,SUFFIX)
define ame_rule
$(RUN)/seed$(1)/ame-$(2)$(4)/manifest.json: $(RUN)/seed$(1)/nlt-acquirers/manifest.json $(RUN)/img/manifest.json \
  $(RUN)/lexicon-de/manifest.json $(call settings,$(RUN)/seed$(1)/ame-$(2)$(4),AME_STEPS AME_ALIGN_EVERY) | $(TOOL)
	$(MLTK) train-ccrk $(RUN)/img --captions $(CAPTIONS) --init $(RUN)/seed$(1)/nlt-acquirers --lang en,de \
	  --recipe ame --similarity $(2) $(3) --steps $(AME_STEPS) --seed $(1) --out $(RUN)/seed$(1)/ame-$(2)$(4)
$(call bli_rule,seed$(1)/ame-$(2)$(4))
$(call recall_rule,seed$(1)/ame-$(2)$(4)-recall,seed$(1)/ame-$(2)$(4),)
$(if $(filter order,$(2)),$(call recall_rule,seed$(1)/ame-$(2)$(4)-cosine,seed$(1)/ame-$(2)$(4),cosine))
endef
$(foreach s,$(SEEDS),$(eval $(call bli_rule,seed$(s)/nlt-acquirers))$(foreach m,$(AME_SIMILARITIES),\
  $(eval $(call ame_rule,$(s),$(m),,))$(eval $(call ame_rule,$(s),$(m),--lexicon $(RUN)/lexicon-de \
  --align-every $(AME_ALIGN_EVERY),-map))))

# --- the tables ---------------------------------------------------------------------------------------------------
ZSV_INPUTS := zero-shot-native video-native $(foreach s,$(SEEDS),$(foreach k,acquirers full,seed$(s)/zero-shot-$(k) \
  seed$(s)/video-$(k)))
MKD_INPUTS := zero-shot-native $(foreach s,$(SEEDS),$(foreach k,acquirers mkd,seed$(s)/zero-shot-$(k)))
AME_INPUTS := $(foreach s,$(SEEDS),seed$(s)/nlt-acquirers-bli $(foreach m,$(AME_SIMILARITIES),$(foreach r,ame-$(m) \
  ame-$(m)-map,seed$(s)/$(r)-bli seed$(s)/$(r)-recall $(if $(filter order,$(m)),seed$(s)/$(r)-cosine))))
# $(call table_rule,NAME,INPUTS)
define table_rule
$(RUN)/$(1).md: $(foreach i,$(2),$(RUN)/$(i)/manifest.json) $(EXAMPLES)summarize.py \
  $(call settings,$(RUN)/$(1).md,LANGS SEEDS)
	$(PYTHON) $(EXAMPLES)summarize.py $(subst -,_,$(1)) $(RUN) $(LANGS) $(SEEDS) > $$@.tmp && mv $$@.tmp $$@
$(1): $(RUN)/$(1).md
	@cat $$<
endef
$(eval $(call table_rule,zero-shot-video,$(ZSV_INPUTS)))
$(eval $(call table_rule,mkd,$(MKD_INPUTS)))
$(eval $(call table_rule,ame,$(AME_INPUTS)))
