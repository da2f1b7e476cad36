# Shared by the example Makefiles: the mltk command, the venv it may build, and the vocabulary chain.
# Every target is an artifact's manifest.json (written last by mltk), so make skips what is complete, reruns a
# stage whose inputs changed, `make -n` prints the plan and `make -j2` runs independent stages side by side.
# Run from the repository root: make -f examples/NAME.mk [VARIABLE=value ...]

EXAMPLES := $(dir $(lastword $(MAKEFILE_LIST)))
VENV ?= .venv
# MLTK: the command. The default installs the repository into $(VENV) first (once); MLTK=mltk uses the mltk on
# PATH, and any other command (e.g. "python -m mltk") works too.
MLTK ?= $(VENV)/bin/mltk
TOOL := $(filter $(VENV)/bin/mltk,$(MLTK))
PYTHON ?= $(if $(TOOL),$(VENV)/bin/python,python3)

comma := ,
empty :=
space := $(empty) $(empty)
commas_to_spaces = $(subst $(comma),$(space),$(1))
# $(call opt,--option,VALUE): "--option VALUE", or nothing when VALUE is empty (the recipe's value then applies)
opt = $(if $(strip $(2)),$(1) $(2))

$(VENV)/bin/mltk: pyproject.toml
	python3 -m venv $(VENV) && $(VENV)/bin/pip install -q -e . && touch $@

# $(call vocab_chain,RUN,WORLD_CAPTIONS,LANGS,SIZE): one BPE vocabulary per language, each grown from the one
# before (V_t = V_{t-1} ∪ V̂_t), as RUN/vocab/LANG/manifest.json; the last one is the tokenizer of every language.
define vocab_rule
$(1)/vocab/$(3)/manifest.json: $(2)/manifest.json $(if $(4),$(1)/vocab/$(4)/manifest.json) \
  $(call settings,$(1)/vocab/$(3),size=$(5) parent=$(4)) | $(TOOL)
	$(MLTK) build-vocab $(2) --lang $(3) --size $(5) $(if $(4),--parent $(1)/vocab/$(4)) --out $(1)/vocab/$(3)
endef
define vocab_chain_from
$(eval $(call vocab_rule,$(1),$(2),$(firstword $(3)),$(4),$(5)))$(if $(word 2,$(3)),$(call vocab_chain_from,$(1),$(2),$(wordlist 2,999,$(3)),$(firstword $(3)),$(5)))
endef
vocab_chain = $(call vocab_chain_from,$(1),$(2),$(call commas_to_spaces,$(3)),,$(4))

# $(call multi30k_files,DATA,LANGUAGES): the Multi30K task 1 files of train, val and test_2016_flickr that the
# real-data examples read: image lists, and the lines of English and each language.
multi30k_files = $(foreach s,train val test_2016_flickr,$(1)/image_splits/$(s).txt $(foreach l,en $(2),$(1)/raw/$(s).$(l)))

# Stamps: a file rewritten only when its content changes, so what depends on it rebuilds when that content
# changes, not on every run. Each stamp's wanted content is computed when make reads the Makefile and compared with
# the file's; only a stamp that differs gets a rule that runs (depends on FORCE), and its recipe is a make function
# that writes the file on a real build and expands to nothing: `make -n` prints only the mltk commands (and shows
# the stages a changed stamp would rebuild), and neither `make -n` nor `make -q` writes anything. The first stamp
# is dated 1970, so runs made before it existed are not rebuilt for it. `make -f examples/NAME.mk settings-stamps`
# writes the stamps alone (what a real build of every stage would write) and builds nothing.
dry_run := $(findstring n,$(firstword -$(MAKEFLAGS)))$(findstring q,$(firstword -$(MAKEFLAGS)))
# $(call stamp_differs,STAMP,CONTENT): non-empty when STAMP is missing or holds other words than CONTENT
same_text = $(and $(findstring x$(1)x,x$(2)x),$(findstring x$(2)x,x$(1)x))
stamp_differs = $(if $(wildcard $(1)),$(if $(call same_text,$(strip $(2)),$(strip $(file <$(1)))),,changed),missing)
# A stamp's rule: a changed stamp depends on FORCE (compared after
# every Makefile is read, through .SECONDEXPANSION, so a variable set after the rule counts with its final value);
# a missing one is built like any missing file (dated 1970 by its recipe), except that under -n/-q it is
# .SECONDARY, so that make, which cannot know the 1970 date, leaves complete artifacts alone rather than planning
# their rebuild.
.SECONDEXPANSION:
stamp_force = $(if $(filter changed,$(call stamp_differs,$(1),$(2))),FORCE)
dry_run_secondary = $(if $(and $(dry_run),$(if $(wildcard $(1)),,missing)),$(newline).SECONDARY: $(1))
stamp_dir = $(shell mkdir -p $(dir $(1)))
define newline


endef
.PHONY: settings-stamps

# $(call content_stamp,STAMP,FILES): STAMP holds the sha256 of FILES, so what depends on it rebuilds when the data
# changes, not when the same data is copied or provisioned again with new times.
define content_stamp
$(1): $$$$(call stamp_force,$(1),$$$$(shell sha256sum $(2) 2>/dev/null))
	$$(if $$(dry_run),,$$(call write_content_stamp,$(1),$(2)))
$(call dry_run_secondary,$(1))
settings-stamps: $(1)
endef
write_content_stamp = $(foreach f,$(2),$(if $(wildcard $(f)),,$(error $(1): data file $(f) is missing)))$(strip \
  $(call stamp_dir,$(1))$(shell sha256sum $(2) > $(1).tmp && if [ ! -e $(1) ]; then touch -d @0 $(1).tmp && \
  mv $(1).tmp $(1); elif cmp -s $(1).tmp $(1); then rm $(1).tmp; else mv $(1).tmp $(1); fi))

# $(call settings,ARTIFACT,VARIABLES): a stage's settings stamp, ARTIFACT's folder/.settings/ARTIFACT's name,
# holding NAME=value of each make variable the stage's command uses (a word with = in it is written as it is), one
# a line, so a target that lists it among its prerequisites rebuilds, with its dependants, when one of those
# variables changes: `make NLT_STEPS=12` after a run with 10 trains again. Expands to the stamp's path after
# defining its rule.
settings_lines = $(foreach v,$(1),$(if $(findstring =,$(v)),$(v),$(v)=$($(v))))
stamp_of = $(dir $(1)).settings/$(notdir $(1))
define settings_rule
$(1): $$$$(call stamp_force,$(1),$$$$(call settings_lines,$(subst $(comma),$$$$(comma),$(2))))
	$$(if $$(dry_run),,$$(call write_settings,$(1),$(subst $(comma),$$(comma),$(2))))
$(call dry_run_secondary,$(1))
settings-stamps: $(1)
endef
write_settings = $(strip $(call stamp_dir,$(1))$(eval stamp_was_missing := $(if $(wildcard $(1)),,x))$(strip \
  )$(file >$(1))$(foreach line,$(2),$(file >>$(1),$(call settings_lines,$(line))))$(strip \
  )$(if $(stamp_was_missing),$(shell touch -d @0 $(1))))
settings = $(eval $(call settings_rule,$(call stamp_of,$(1)),$(2)))$(call stamp_of,$(1))

# make reruns a stage only when its inputs or settings changed, so the artifact it replaces is out of date: let
# mltk replace it (mltk refuses an artifact made with other settings or inputs unless --overwrite).
export MLTK_OVERWRITE := 1

.PHONY: FORCE
FORCE:
