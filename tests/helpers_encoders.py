"""Tiny random-weight text encoders saved as checkpoint artifacts, for tests of stages that read ``--model``."""

from __future__ import annotations

from pathlib import Path

from helpers_tiny import tiny_wordpiece_tokenizer


def tiny_clip_and_mla(root: Path, languages: tuple[str, ...] = ("de",)) -> tuple[Path, Path]:
    """A random-weight ``mltk-tiny`` CLIP saved as an ``open_clip`` checkpoint and an MLA checkpoint over it that
    reads ``languages`` through a tiny WordPiece tokenizer; returns ``(clip_path, mla_path)``. The acquirers are
    moved off their identity initialisation so that every language really takes its own path."""
    import torch

    from mltk import artifacts
    from mltk.models.clip import clip_checkpoint_config, load_clip
    from mltk.models.multilingual import build_encoder, save_encoder

    torch.manual_seed(0)
    clip = artifacts.write_checkpoint(
        root / "native",
        load_clip("mltk-tiny").model.state_dict(),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    encoder = build_encoder(str(clip), None, str(tiny_wordpiece_tokenizer(root / "wordpiece")), list(languages))
    with torch.no_grad():
        for parameter in encoder.acquirers.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return clip, save_encoder(encoder, root / "mla", stage="test")
