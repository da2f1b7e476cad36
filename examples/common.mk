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
$(1)/vocab/$(3)/manifest.json: $(2)/manifest.json $(if $(4),$(1)/vocab/$(4)/manifest.json) | $(TOOL)
	$(MLTK) build-vocab $(2) --lang $(3) --size $(5) $(if $(4),--parent $(1)/vocab/$(4)) --out $(1)/vocab/$(3)
endef
define vocab_chain_from
$(eval $(call vocab_rule,$(1),$(2),$(firstword $(3)),$(4),$(5)))$(if $(word 2,$(3)),$(call vocab_chain_from,$(1),$(2),$(wordlist 2,999,$(3)),$(firstword $(3)),$(5)))
endef
vocab_chain = $(call vocab_chain_from,$(1),$(2),$(call commas_to_spaces,$(3)),,$(4))

# $(call multi30k_files,DATA,LANGUAGES): the Multi30K task 1 files of train, val and test_2016_flickr that the
# real-data examples read: image lists, and the lines of English and each language.
multi30k_files = $(foreach s,train val test_2016_flickr,$(1)/image_splits/$(s).txt $(foreach l,en $(2),$(1)/raw/$(s).$(l)))

# $(call content_stamp,STAMP,FILES): STAMP holds the sha256 of FILES and is rewritten only when their bytes change,
# so what depends on STAMP rebuilds when the data changes, not when the same data is copied or provisioned again
# with new times. The first STAMP is dated 1970, so runs made before it existed are not rebuilt for it. Marked +
# so that `make -n` and `make -q` run it too (it only reads FILES and writes STAMP).
define content_stamp
$(1): FORCE
	+@mkdir -p $$(@D) && sha256sum $(2) > $$@.tmp && \
	  if [ ! -e $$@ ]; then touch -d @0 $$@.tmp && mv $$@.tmp $$@; \
	  elif cmp -s $$@.tmp $$@; then rm $$@.tmp; else mv $$@.tmp $$@; fi
endef
.PHONY: FORCE
FORCE:
