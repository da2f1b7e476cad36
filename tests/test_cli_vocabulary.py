"""Every command's options held to one vocabulary (``mltk.cli.common.VOCABULARY``): canonical names for known
ideas, flags as flags, -o/--out on every writer, an example in every --help, option names whole in 80 columns,
and --help without torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from helpers_cli import leaf_commands

from mltk.cli.application import COMMAND_MODULES
from mltk.cli.common import NON_CANONICAL, VOCABULARY

ROOT = Path(__file__).resolve().parents[1]
# Commands that write nothing (they print to stdout or only check).
# prune rewrites the checkpoint it is given (no new artifact); recipes list and show print what is packaged
NON_WRITERS = {"inspect", "index query", "prune", "recipes list", "recipes show"}


COMMANDS = leaf_commands()
IDS = [name for name, _ in COMMANDS]


def _is_option(param) -> bool:
    return getattr(param, "param_type_name", "") == "option"


def _visible_options(command) -> list:
    return [p for p in command.params if _is_option(p) and not p.hidden]


def _help(command, name: str, width: int | None = None) -> str:
    ctx = command.context_class(command, info_name=f"mltk {name}", terminal_width=width, max_content_width=width)
    return command.get_help(ctx)


def test_the_walk_finds_every_registered_command():
    assert {name.split()[0] for name in IDS} == set(COMMAND_MODULES) | {"index"}
    assert {"index build", "index query", "train-nlt", "evaluate"} <= set(IDS)


@pytest.mark.parametrize("name,command", COMMANDS, ids=IDS)
def test_no_option_uses_a_non_canonical_name(name, command):
    for option in _visible_options(command):
        for spelling in option.opts + option.secondary_opts:
            assert spelling not in NON_CANONICAL, f"{name}: {spelling} -> use {NON_CANONICAL[spelling]}"


@pytest.mark.parametrize("name,command", COMMANDS, ids=IDS)
def test_boolean_options_are_flags(name, command):
    for option in _visible_options(command):
        annotation = option.type_descriptor.annotation
        if bool in (annotation, *typing.get_args(annotation)):
            assert option.is_flag, f"{name}: {option.opts} takes a value"
    assert "<bool>" not in _help(command, name)


@pytest.mark.parametrize("name,command", COMMANDS, ids=IDS)
def test_every_writer_has_o_and_out(name, command):
    outs = [o for o in _visible_options(command) if "--out" in o.opts]
    if name in NON_WRITERS:
        assert not outs
        return
    assert outs and "-o" in outs[0].opts, f"{name} writes an artifact but lacks -o/--out"


@pytest.mark.parametrize("name,command", COMMANDS, ids=IDS)
def test_every_help_shows_an_example_of_the_command(name, command):
    text = _help(command, name)
    assert "Example" in text and f"mltk {name}" in text, name


@pytest.mark.parametrize("name,command", COMMANDS, ids=IDS)
def test_no_option_name_is_cut_in_80_columns(name, command):
    text = _help(command, name, width=80)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80, name
    for option in _visible_options(command):
        for spelling in option.opts + option.secondary_opts:
            assert spelling in text, f"{name}: {spelling} not shown whole"


def test_vocabulary_names_are_what_the_commands_use():
    """Each canonical name is used by some command (a stale table would hold nothing to account)."""
    used = {
        spelling
        for _, command in COMMANDS
        for option in _visible_options(command)
        for spelling in option.opts + option.secondary_opts
    }
    assert set(VOCABULARY) - used == set()


def test_list_options_accept_commas_and_repeats():
    from mltk.cli.common import split_list

    assert split_list(["recall,mrv", "c2c"]) == ("recall", "mrv", "c2c")
    for name, command in COMMANDS:
        for option in _visible_options(command):
            if option.multiple and option.name not in (
                "continual",
                "src",
                "translations",
                "text",
                "images_root",
                "c2c_pair",
                "set_",
            ):  # --set betas=0.9,0.98: one value
                assert option.metavar == "A[,B...]", f"{name}: {option.opts} should say it takes a comma list"


def test_old_spellings_still_work_hidden():
    hidden = {
        (name, s) for name, command in COMMANDS for p in command.params if _is_option(p) and p.hidden for s in p.opts
    }
    assert {
        ("synth-data", "--langs"),
        ("translate-data", "--cache"),
        ("index query", "--image-emb"),
        ("train-continual", "--metric"),
    } <= hidden


def test_defaults_copied_into_the_cli_match_the_library():
    """Some command modules repeat a library default to keep torch off --help; they must not drift."""
    from mltk import translate
    from mltk.cli import import_mla as cli_import_mla
    from mltk.cli import translate as cli_translate
    from mltk.export import import_mla

    assert cli_translate.DEFAULT_MODEL == translate.DEFAULT_MODEL
    assert (cli_import_mla.DEFAULT_ARCHITECTURE, cli_import_mla.DEFAULT_TOKENIZER) == (
        import_mla.DEFAULT_ARCHITECTURE,
        import_mla.DEFAULT_TOKENIZER,
    )


HEAVY = ("torch", "open_clip", "transformers", "pyarrow", "numpy", "faiss", "matplotlib")
HELP_PROBE = """
import json, sys
from mltk.cli.application import main
names, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for argv in [["--help"], *[[*name.split(), "--help"] for name in names]]:
    sys.argv = ["mltk", *argv]
    try:
        main()
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)
"""


def test_help_imports_no_torch_numpy_or_pyarrow():
    result = subprocess.run(
        [sys.executable, "-c", HELP_PROBE, json.dumps(IDS), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stderr.strip().splitlines()[-1]) == []
    assert "train-nlt" in result.stdout and "Example" in result.stdout


TRAINING = ("train-nlt", "train-le", "train-nlt-le", "train-ccrk", "train-continual", "pretrain")


@pytest.mark.parametrize("name,command", COMMANDS, ids=IDS)
def test_every_model_option_has_the_short_form_m(name, command):
    for option in _visible_options(command):
        if "--model" in option.opts:
            assert "-m" in option.opts, f"{name}: --model without -m"


def test_the_option_aliases_are_canonical_written_once_and_used():
    """Each alias of mltk.cli.options names its idea canonically and is what the commands having that option use
    (the same help: declared once, not restated); every training command takes its hyper-parameters from them,
    defaulting to None (from the recipe)."""
    from mltk.cli import options

    by_name = {}
    for alias_name, alias in options.ALIASES.items():
        info = typing.get_args(alias)[1]
        names = [n.split("/")[0] for n in (info.default, *info.param_decls) if n.startswith("--")]  # a flag pair
        # ("--x/--no-x") is named by its first spelling; Annotated holds the names only
        assert len(names) == 1 and names[0] not in NON_CANONICAL, alias_name
        assert names[0] in VOCABULARY or names[0] in (
            "--grad-clip",
            "--mse-form",
            "--val-images",
            "--init-embeddings",
        ), alias_name
        by_name[names[0]] = info
    used = {spelling for _, command in COMMANDS for option in _visible_options(command) for spelling in option.opts}
    assert set(by_name) <= used, set(by_name) - used
    for name, command in COMMANDS:
        for option in _visible_options(command):
            long = next((o for o in option.opts if o.startswith("--")), None)
            if name in TRAINING and long in by_name and long != "--steps":  # train-continual: --steps per task
                # the alias's help, then the recipe's value read from the recipe (mltk.cli.config_options)
                assert option.help.startswith(by_name[long].help), f"{name}: {long} restates the alias"
        if name in TRAINING:
            defaults = {o.opts[-1]: o.default for o in _visible_options(command)}
            hyper = {
                k: v
                for k, v in defaults.items()
                if k in ("--recipe", "--lr", "--steps", "--batch-size", "--weight-decay", "--grad-clip", "--warmup")
            }
            assert "--recipe" in hyper and set(hyper.values()) == {None}, (name, hyper)
