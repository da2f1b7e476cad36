"""AME's alignment as the authors ran it (``--align-form map``, the default): a linear map of the source words,
started from Procrustes, updated by RCSLS only every ``--align-every`` steps at ``--align-lr``, folded into MLA's
non-native projection; the token table never receives the alignment gradient and the stage's loss gains no term.
The in-table form stays as ``--align-form table``."""

from __future__ import annotations

import pytest
import torch
from test_ame import _nlt, tiny  # noqa: F401 (fixture)

from mltk import artifacts
from mltk.ame.lexicon import load_lexicon
from mltk.ame.rcsls import AlignmentConfig, LexiconAlignment
from mltk.ame.word_map import orthogonalised, procrustes
from mltk.core.errors import ConfigError


@pytest.fixture(scope="module")
def plain(tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("map") / "plain"
    assert _nlt(tiny, out).exit_code == 0
    return out


def test_the_map_moves_only_every_t_steps_and_never_the_table(tiny, plain):
    from mltk.models.multilingual import load_encoder

    encoder = load_encoder(plain)
    proj, table = encoder.embedding.proj.weight, encoder.embedding.table.weight
    table_before, proj_before = table.detach().clone(), proj.detach().clone()
    alignment = LexiconAlignment(
        encoder,
        load_lexicon(tiny["lexicon"]),
        weight=1.0,
        k=3,
        config=AlignmentConfig(form="map", every=3, lr=2.0),
        captions=tiny["captions"],
    )
    assert not torch.equal(proj, proj_before)  # the Procrustes start is folded in
    assert len(alignment.mapped.source_vocabulary.ids) > len(alignment.source_words.ids)  # the captions' words too
    updates = []
    for step in range(7):
        before = proj.detach().clone()
        term, logged = alignment(step)
        assert not term.requires_grad and float(term) == 0.0  # nothing for the stage's optimizer
        updates.append(not torch.equal(proj, before))
        assert table.grad is None and torch.equal(table, table_before)  # the table untouched
    assert updates == [False, False, False, True, False, False, True]  # before steps 3 and 6: every 3 steps
    assert torch.isfinite(logged["rcsls"])


def test_train_nlt_folds_the_map_into_its_checkpoint(tiny, tmp_path):
    from mltk.train.step_log import STEPS_CSV, read_steps_csv

    result = _nlt(
        tiny,
        tmp_path / "mapped",
        "--lexicon",
        str(tiny["lexicon"]),
        "--align-every",
        "2",
        "--align-lr",
        "1.5",
        "--align-orthogonal",
        "--log-every",
        "1",
    )
    assert result.exit_code == 0, result.stderr
    assert "a map updated every 2 steps at rate 1.5" in result.stderr
    assert "rcsls" in read_steps_csv(tmp_path / "mapped" / STEPS_CSV)[0]
    config = artifacts.read_manifest(tmp_path / "mapped", "checkpoint")["created_by"]["config"]["alignment"]
    assert config["form"] == "map" and config["every"] == 2 and config["lr"] == 1.5 and config["orthogonal"]


def test_the_table_form_stays_an_option(tiny, plain):
    from mltk.models.multilingual import load_encoder

    encoder = load_encoder(plain)
    proj_before = encoder.embedding.proj.weight.detach().clone()
    alignment = LexiconAlignment(
        encoder, load_lexicon(tiny["lexicon"]), weight=1.0, k=3, config=AlignmentConfig(form="table")
    )
    term, _ = alignment(0)
    term.backward()
    assert encoder.embedding.table.weight.grad is not None  # RCSLS into the table
    assert torch.equal(encoder.embedding.proj.weight, proj_before)


def test_map_options_are_checked():
    with pytest.raises(ConfigError, match="--align-form must be one of map, table"):
        AlignmentConfig(form="rotate")
    with pytest.raises(ConfigError, match="--align-every must be >= 1"):
        AlignmentConfig(every=0)


def test_procrustes_recovers_a_rotation_and_orthogonalised_is_orthogonal():
    generator = torch.Generator().manual_seed(0)
    rotation = orthogonalised(torch.randn(6, 6, generator=generator))
    x = torch.randn(40, 6, generator=generator)
    assert torch.allclose(procrustes(x, x @ rotation.T), rotation, atol=1e-5)
    assert torch.allclose(rotation @ rotation.T, torch.eye(6), atol=1e-5)
