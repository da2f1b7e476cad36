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
