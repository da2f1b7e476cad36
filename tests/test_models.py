"""Model loading paths and the trimmed text forward (equal outputs and gradients to encode_text)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from mltk import artifacts
from mltk.core.errors import ConfigError
from mltk.core.runtime import resolve_runtime
from mltk.models.clip import clip_checkpoint_config, load_clip
from mltk.models.text import LENGTH_BUCKETS, OpenClipTextTower, end_positions, trim_tokens

CAPTIONS = [
    "a red circle",
    "two green stars left of a small blue square above a ring",
    "ein roter Kreis",
    "一个红色的圆",
]


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return load_clip("mltk-tiny", freeze=False)


def test_trimmed_forward_equals_encode_text(tiny):
    tokens = tiny.tokenizer(CAPTIONS)
    tower = OpenClipTextTower(tiny.model)
    with torch.no_grad():
        expected = tiny.model.encode_text(tokens)
        trimmed = tower.encode(tokens)
    assert trimmed.shape == expected.shape
    assert (trimmed - expected).abs().max().item() <= 1e-5


def test_trimmed_forward_gradients_equal_encode_text(tiny):
    tokens = tiny.tokenizer(CAPTIONS)
    tower = OpenClipTextTower(tiny.model)
    params = [
        tiny.model.token_embedding.weight,
        tiny.model.transformer.resblocks[0].mlp.c_fc.weight,
        tiny.model.text_projection,
    ]
    grads = []
    for forward in (tiny.model.encode_text, tower.encode):
        tiny.model.zero_grad()
        forward(tokens).pow(2).sum().backward()
        grads.append([p.grad.clone() for p in params])
    for full, trimmed in zip(*grads):
        assert (full - trimmed).abs().max().item() <= 1e-5 * max(1.0, full.abs().max().item())


def test_length_groups_keep_batch_order_and_trim_each_group(tiny):
    """A batch runs as LENGTH_BUCKETS groups of similar length, each cut to its own longest caption."""
    texts = [CAPTIONS[i % 4] + " and a star" * (i % 5) for i in range(10)]
    tokens = tiny.tokenizer(texts)
    tower = OpenClipTextTower(tiny.model)
    lengths = []
    with torch.no_grad():
        grouped = tower.encode(tokens, after_block=lambda i, h: (i == 0 and lengths.append(h.shape)) or h)
        one_batch = tower.forward_embeddings(tower.embed_tokens(tokens), end_positions(tokens, 49407) + 1, buckets=1)
        expected = tiny.model.encode_text(tokens)
    assert (grouped - expected).abs().max().item() <= 1e-5
    assert (one_batch - expected).abs().max().item() <= 1e-5
    longest = int(end_positions(tokens, 49407).max()) + 1
    sequence_dim = 1 if getattr(tiny.model.transformer, "batch_first", False) else 0  # [B, L, W] or [L, B, W]
    seq_lengths = [shape[sequence_dim] for shape in lengths]
    assert len(lengths) == LENGTH_BUCKETS and sorted(seq_lengths) == seq_lengths and seq_lengths[-1] == longest
    assert seq_lengths[0] < longest and sum(shape[1 - sequence_dim] for shape in lengths) == len(texts)


def test_after_block_hook_runs_after_every_block(tiny):
    tower = OpenClipTextTower(tiny.model)
    seen = []
    tower.encode(tiny.tokenizer(CAPTIONS[:1]), after_block=lambda i, h: seen.append(i) or h)
    assert seen == list(range(tower.num_blocks))


def test_end_positions_use_the_first_end_token_not_argmax():
    tokens = torch.tensor([[49406, 60000, 49407, 0], [49406, 5, 6, 49407]])  # 60000: an expanded-vocab id
    assert end_positions(tokens, 49407).tolist() == [2, 3]
    trimmed, pool = trim_tokens(torch.tensor([[49406, 5, 49407, 0, 0]]))
    assert trimmed.shape == (1, 3) and pool.tolist() == [2]


def test_load_from_local_safetensors_and_state_dict_files(tiny, tmp_path):
    state = {k: v.contiguous() for k, v in tiny.model.state_dict().items()}
    save_file(state, str(tmp_path / "w.safetensors"))
    torch.save(state, tmp_path / "w.pt")
    tokens = tiny.tokenizer(CAPTIONS[:2])
    expected = tiny.model.encode_text(tokens).detach()
    for path in ("w.safetensors", "w.pt"):
        loaded = load_clip("mltk-tiny", str(tmp_path / path))
        assert torch.allclose(loaded.model.encode_text(tokens), expected, atol=1e-5), path
        assert not any(p.requires_grad for p in loaded.model.parameters())


def test_load_from_checkpoint_artifact(tiny, tmp_path):
    path = artifacts.write_checkpoint(
        tmp_path / "native", tiny.model.state_dict(), clip_checkpoint_config("mltk-tiny"), stage="pretrain"
    )
    loaded = load_clip(str(path))
    tokens = tiny.tokenizer(CAPTIONS[:2])
    assert torch.allclose(loaded.model.encode_text(tokens), tiny.model.encode_text(tokens).detach(), atol=1e-5)
    assert loaded.spec["architecture"] == "mltk-tiny"


def test_unknown_model_and_missing_weights_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown model"):
        load_clip("no-such-model")
    with pytest.raises(ConfigError, match="not found"):
        load_clip("mltk-tiny", str(tmp_path / "missing" / "w.safetensors"))


def test_runtime_resolution_on_cpu():
    runtime = resolve_runtime("cpu", "auto")
    assert runtime.device.type == "cpu" and runtime.precision == "fp32"
    assert resolve_runtime("cpu", "bf16").autocast_dtype is torch.bfloat16
    with pytest.raises(ConfigError):
        resolve_runtime("cpu", "fp16")
    with pytest.raises(ConfigError):
        resolve_runtime("tpu")


def inject_cpu(monkeypatch, cache: Path, flags: set[str], speedup: float) -> list[int]:
    """Make this CPU one with ``flags`` whose calibration measures bf16 ``speedup`` times faster than fp32, cached
    in ``cache``; the returned list counts the calibrations that ran."""
    from mltk.core import cpu_bf16

    calibrations: list[int] = []
    monkeypatch.setattr(cpu_bf16, "cache_root", lambda: cache)
    monkeypatch.setattr(cpu_bf16, "cpu_flags", lambda: frozenset(flags | {"sse2", "avx2"}))
    monkeypatch.setattr(cpu_bf16, "measure_bf16_speedup", lambda: calibrations.append(1) or speedup)
    return calibrations


@pytest.mark.parametrize(
    ("flags", "speedup", "precision", "reason"),
    [
        ({"amx_bf16", "amx_tile", "avx512_bf16"}, 4.0, "bf16", "cpu has amx_bf16 (calibrated 4.0x)"),
        ({"avx512_bf16", "avx512f"}, 1.6, "bf16", "cpu has avx512_bf16 (calibrated 1.6x)"),
        ({"avx512f"}, 9.0, "fp32", "cpu has no bf16 matrix instructions (amx_bf16 or avx512_bf16)"),
        ({"avx512_bf16"}, 0.8, "fp32", "cpu has avx512_bf16 but bf16 calibrated 0.80x fp32 (below 1.1x)"),
    ],
    ids=["amx", "avx512-bf16", "neither", "calibrated-slower"],
)
def test_auto_precision_on_cpu_is_bf16_where_the_cpu_multiplies_bf16_and_calibration_confirms_it(
    monkeypatch, tmp_path, flags, speedup, precision, reason
):
    """``cpu_bf16`` (a recipe that measured bf16 faster at equal quality) turns ``auto`` into bf16 autocast on a CPU
    with bf16 instructions (AMX or AVX512-BF16) whose calibration measures bf16 faster; the runtime says why. A CPU
    without the instructions is never calibrated (bf16 is emulated there, several times slower)."""
    calibrations = inject_cpu(monkeypatch, tmp_path, flags, speedup)
    runtime = resolve_runtime("cpu", "auto", cpu_bf16=True)
    assert (runtime.precision, runtime.reason) == (precision, reason)
    assert runtime.describe() == {"device": "cpu", "precision": precision, "reason": reason}
    assert len(calibrations) == (1 if flags & {"amx_bf16", "avx512_bf16"} else 0)
    assert resolve_runtime("cpu", "auto").precision == "fp32"
    assert resolve_runtime("cpu", "fp32", cpu_bf16=True).describe()["reason"] == "--precision fp32"  # as asked


def test_the_bf16_calibration_runs_once_per_machine_and_is_kept_in_the_cache(monkeypatch, tmp_path):
    """The calibration is cached per machine (CPU, instructions, torch, threads): a second stage on the same
    machine reads it; another thread count measures again."""
    from mltk.core import cpu_bf16

    calibrations = inject_cpu(monkeypatch, tmp_path, {"avx512_bf16"}, 1.5)
    assert [resolve_runtime("cpu", "auto", cpu_bf16=True).precision for _ in range(2)] == ["bf16", "bf16"]
    assert len(calibrations) == 1
    (entry,) = json.loads((tmp_path / cpu_bf16.CALIBRATION_FILE).read_text()).items()
    assert "avx512_bf16" in entry[0] and entry[1] == 1.5
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)
        resolve_runtime("cpu", "auto", cpu_bf16=True)
    finally:
        torch.set_num_threads(threads)
    assert len(calibrations) == 2


def test_the_bf16_calibration_measures_both_precisions_on_this_cpu():
    """The real calibration returns a finite positive ratio of fp32 to bf16 seconds."""
    from mltk.core.cpu_bf16 import measure_bf16_speedup

    speedup = measure_bf16_speedup(repeats=1)
    assert math.isfinite(speedup) and speedup > 0


def test_the_loop_adamw_is_fused_on_the_cpu_and_steps_as_torch_default_does():
    """The fused AdamW (one kernel per tensor) takes the same step as torch's default, to the last bit or so."""
    from helpers_loop import loop_config

    from mltk.train.loop import default_optimizer

    torch.manual_seed(0)
    weights = [torch.nn.Parameter(torch.randn(50, 8)), torch.nn.Parameter(torch.randn(8))]
    copies = [torch.nn.Parameter(w.detach().clone()) for w in weights]
    config = loop_config(steps=10, lr=1e-2, weight_decay=0.1)
    fused = default_optimizer(dict(zip("ab", weights)), config)
    plain = torch.optim.AdamW(
        [{"params": copies[:1], "weight_decay": 0.1}, {"params": copies[1:], "weight_decay": 0.0}],
        lr=1e-2,
        betas=config.betas,
        eps=config.eps,
    )
    assert all(group["fused"] for group in fused.param_groups)
    for _ in range(5):
        for w, c in zip(weights, copies):
            w.grad = torch.sin(w.detach() * 3)
            c.grad = w.grad.clone()
        fused.step()
        plain.step()
    for w, c in zip(weights, copies):
        torch.testing.assert_close(w, c, atol=1e-6, rtol=1e-6)


def test_vit_b_32_trimmed_forward_equals_encode_text():
    bundle = load_clip("ViT-B-32")
    tokens = bundle.tokenizer(CAPTIONS)
    with torch.no_grad():
        diff = (bundle.model.encode_text(tokens) - OpenClipTextTower(bundle.model).encode(tokens)).abs().max()
    assert diff.item() <= 1e-5


def test_load_text_tower_builds_the_tower_interface_from_a_model_string():
    from mltk.core.errors import ConfigError
    from mltk.models.towers import TEXT_TOWER_LOADERS, load_text_tower

    tower = load_text_tower("mltk-tiny")
    assert "open_clip" in TEXT_TOWER_LOADERS and tower.pooling == "end"
    tokens, lengths = tower.tokenize(["a red circle", "two blue squares left of a green star"])
    assert tokens.shape[1] == int(lengths.max())  # trimmed to the longest row
    assert lengths.tolist() == (end_positions(tokens, 49407) + 1).tolist()
    with torch.no_grad():
        features = tower.encode(tokens, lengths)
        assert torch.allclose(features, tower.forward_embeddings(tower.embed_tokens(tokens), lengths), atol=1e-6)
    assert features.shape == (2, tower.output_dim) and len(tower.blocks) == tower.num_blocks
    with pytest.raises(ConfigError):
        load_text_tower("no-such-model")
