"""ER and DER as CLFM (the CLL-CLIP authors' code) computes them, and CLL-CLIP's temperature as the authors
parametrise it: T itself, clamped to [0.001, 0.5] every step and reset at every task; the earlier forms stay
behind options (``replay_loss=joint``, ``--temperature-form log``)."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from test_continual import config, encoder_for, start_tasks, world  # noqa: F401 (fixture)

from mltk.cll_clip.methods import make_method
from mltk.cll_clip.model import ContinualTextEncoder
from mltk.core.errors import ConfigError
from mltk.losses import LogitScale, Temperature, make_temperature
from mltk.train import continual as C
from mltk.train.continual.order import temperature_range_option
from mltk.train.continual.task import replayed_token_ids
from mltk.vocab import clip_vocabulary


def _replay_task_on_de(world, method: str, **options):
    """Task de of ``method`` after task en filled its memory (24 items; batches of 8)."""
    encoder = encoder_for(world, method, memory_size=24, **options)
    en, de = start_tasks(world, encoder, 2)
    encoder.method.end_task(en)
    encoder.method.begin_task(de)
    return encoder, de


def test_der_memory_rows_get_no_teacher_term_and_their_label_is_the_stored_student_output(world):
    encoder = encoder_for(world, "der", memory_size=24)
    en, de = start_tasks(world, encoder, 2)
    method = encoder.method
    with torch.no_grad():  # as if task en had trained the table: the student no longer equals the teacher
        encoder.table.add_(0.05 * torch.randn(encoder.table.shape, generator=torch.Generator().manual_seed(0)))
    method.end_task(en)
    examples = en.corpus.examples(method.memory.items, encoder)
    with torch.no_grad():
        student = encoder.encode_tokens(examples.tokens, None)  # the student's output at storage time
    assert torch.allclose(method.features, student, atol=1e-5)
    assert not torch.allclose(method.features, examples.teacher, atol=1e-2)  # not the teacher's embedding
    method.begin_task(de)
    loss, terms = de.loss(0)
    assert sorted(terms) == ["der_mse", "infonce", "logit_scale", "mse"]
    current = de.data_terms(0)[1]
    assert torch.allclose(terms["mse"], current["mse"])  # the teacher MSE runs over the current task's rows only
    rows = method.replay_indices(de, 0)
    images, features, teachers = method.replayed_batch(de, rows, method.replayed_features(de, rows))
    joint = de.data_terms(0, (images, features, teachers))[1]
    assert torch.allclose(terms["infonce"], joint["infonce"])  # the memory rows still join the one InfoNCE
    regression = F.mse_loss(features, method.features[torch.from_numpy(rows)])
    assert torch.allclose(terms["der_mse"], regression, atol=1e-6)
    assert torch.allclose(loss, 0.01 * terms["infonce"] + terms["mse"] + regression, atol=1e-6)
    with torch.no_grad():
        method.replay.teacher += 100.0  # the memory's English teachers play no part
    assert torch.allclose(de.loss(0)[0], loss, atol=1e-6)


def test_er_distils_current_and_memory_rows_as_two_means(world):
    encoder, de = _replay_task_on_de(world, "er")
    method = encoder.method
    loss, terms = de.loss(0)
    assert sorted(terms) == ["infonce", "logit_scale", "mse", "replay_mse"]
    rows = method.replay_indices(de, 0)
    images, features, teachers = method.replayed_batch(de, rows, method.replayed_features(de, rows))
    current = de.data_terms(0)[1]
    joint = de.data_terms(0, (images, features, teachers))[1]
    memory = F.mse_loss(features, teachers)
    assert torch.allclose(terms["mse"], current["mse"]) and torch.allclose(terms["replay_mse"], memory, atol=1e-6)
    assert torch.allclose(terms["infonce"], joint["infonce"])  # one InfoNCE over 8 + 8 rows
    assert torch.allclose(loss, 0.01 * terms["infonce"] + terms["mse"] + memory, atol=1e-6)
    # mltk's earlier form (replay_loss=joint): one mean over all 16 rows, distillation weighted half as much
    assert torch.allclose(joint["mse"], (current["mse"] + memory) / 2, atol=1e-6)
    encoder, de = _replay_task_on_de(world, "er", replay_loss="joint")
    loss, terms = de.loss(0)
    assert sorted(terms) == ["infonce", "logit_scale", "mse"] and torch.allclose(terms["mse"], joint["mse"])


def test_the_temperature_is_t_itself_clamped_in_place_to_its_range():
    temperature = Temperature(0.07, (0.001, 0.5))
    assert float(temperature.parameter.detach()) == pytest.approx(0.07)  # T is the parameter, not log(1/T)
    scale = temperature()
    scale.backward()
    assert float(temperature.parameter.grad) == pytest.approx(-1 / 0.07**2, rel=1e-5)  # d(1/T)/dT
    with torch.no_grad():
        temperature.parameter.fill_(0.9)
    assert float(temperature().detach()) == pytest.approx(2.0) and float(
        temperature.parameter.detach()
    ) == pytest.approx(0.5)
    with torch.no_grad():
        temperature.parameter.fill_(1e-5)
    assert float(temperature().detach()) == pytest.approx(1000.0) and temperature.temperature == pytest.approx(0.001)
    temperature.reset()
    assert float(temperature.parameter.detach()) == pytest.approx(0.07)
    assert float(LogitScale(0.0001)().detach()) == pytest.approx(100.0)  # the log form keeps T >= 0.01
    with pytest.raises(ConfigError, match="temperature form"):
        make_temperature("exp", 0.07, (0.001, 0.5))


def _encoder(world, form: str) -> ContinualTextEncoder:
    return ContinualTextEncoder(
        world["clip"],
        clip_vocabulary().tokenizer,
        make_method("cll-clip", {}, world["clip"]),
        temperature=make_temperature(form, 0.07, (0.001, 0.5)),
    )


def _next_task(world, encoder, **changes) -> C.CllClipTask:
    """Task de on ``encoder`` after task en."""
    return C.prepare_task(
        config(world, **changes),
        encoder,
        world["corpus"],
        world["vocab"]["de"],
        1,
        "de",
        world["val"],
        world["runtime"],
    )


def test_the_temperature_restarts_from_its_initial_value_at_every_task(world):
    cfg = config(world)
    assert cfg.temperature_form == "temperature" and cfg.temperature_range == (0.001, 0.5)  # the recipe's
    encoder = _encoder(world, "temperature")
    (en,) = start_tasks(world, encoder, 1)
    assert en.parameters_to_train()["logit_scale"] is encoder.logit_scale.parameter
    with torch.no_grad():
        encoder.logit_scale.parameter.fill_(0.3)  # where task en's training left it
    _next_task(world, encoder)
    assert float(encoder.logit_scale.parameter.detach()) == pytest.approx(0.07)
    carried = _encoder(world, "log")  # mltk's earlier form: log(1/T), carried across tasks
    start_tasks(world, carried, 1, temperature_form="log")
    with torch.no_grad():
        carried.logit_scale.parameter.fill_(math.log(1 / 0.3))
    _next_task(world, carried, temperature_form="log")
    assert carried.logit_scale.temperature == pytest.approx(0.3)


def test_continual_json_records_each_tasks_final_temperature_and_its_form(world):
    out = C.train_continual(config(world, "run-temperature", languages=("en", "de"), steps=3))
    document = json.loads((out / "continual.json").read_text())
    assert document["protocol"]["temperature"] == {
        "form": "temperature",
        "initial": 0.07,
        "range": [0.001, 0.5],
        "reset_each_task": True,
    }
    finals = [task["temperature"] for task in document["per_task"]]
    assert len(finals) == 2 and all(0.001 <= t <= 0.5 and t != pytest.approx(0.07, abs=1e-7) for t in finals)


def test_bad_temperature_options_are_refused_in_one_line(world):
    with pytest.raises(ConfigError, match="--temperature-form must be one of temperature, log"):
        config(world, temperature_form="exp").check()
    with pytest.raises(ConfigError, match="--temperature-range must be two numbers"):
        config(world, temperature_range=(0.1, 0.5)).check()  # the initial 0.07 lies outside
    with pytest.raises(ConfigError, match="--temperature-range expects two numbers LOW,HIGH"):
        temperature_range_option("0.001")
    assert temperature_range_option("0.001,0.5") == (0.001, 0.5)


def _de_lambdas_after_en_filled_the_memory(world, **changes):
    """TEIR's lambda of task de under ER, the memory holding 24 of task en's captions; and those captions' ids."""
    encoder = encoder_for(world, "er", memory_size=24)
    (en,) = start_tasks(world, encoder, 1, teir_reg=True, **changes)
    encoder.method.end_task(en)
    de = C.prepare_task(
        config(world, teir_reg=True, **changes),
        encoder,
        world["corpus"],
        world["vocab"]["de"],
        1,
        "de",
        world["val"],
        world["runtime"],
    )
    return de.lambdas, replayed_token_ids(encoder, encoder.method.memory_tokens())


def test_teir_counts_the_tokens_of_the_replay_memory_as_clfm_does(world):
    lambdas, memory_ids = _de_lambdas_after_en_filled_the_memory(world)
    vocabulary = world["vocab"]["de"]
    task_ids, counts = vocabulary.token_set("occurrence")
    special = set(vocabulary.tokenizer.all_special_ids)
    memory_only = sorted(set(memory_ids.tolist()) - set(task_ids.tolist()) - special)
    assert memory_only  # English words of the replayed captions that the German text never uses
    expected = torch.tensor([1.0 / (1.0 + counts[j]) for j in memory_only], dtype=torch.float32)
    assert (lambdas[memory_only] > 0).all() and torch.allclose(lambdas[memory_only], expected)
    old, _ = _de_lambdas_after_en_filled_the_memory(world, teir_memory_tokens=False)  # the task's text alone
    assert (old[memory_only] == 0).all()
    assert torch.equal(old[torch.from_numpy(task_ids)], lambdas[torch.from_numpy(task_ids)])
