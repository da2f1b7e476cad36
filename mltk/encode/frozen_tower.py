"""What every encoder of a frozen tower shares: decoding one image without failing the run, and the forward pass
of a frozen tower (image or text) under one autocast region, L2-normalised in float32."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from PIL import Image

from mltk.core.runtime import Runtime

MAX_ERROR_CHARS = 300


def decode_image(open_image: Callable[[], Image.Image], preprocess: Callable) -> tuple[torch.Tensor | None, str | None]:
    """``(pixels [3, H, W], None)``, or ``(None, error)`` for an image that cannot be read: any failure to read
    one image is reported with the row, never fatal to the run."""
    try:
        image = open_image()
        image.load()
        return preprocess(image.convert("RGB")), None
    except Exception as exc:  # any failure to read one image is reported, not fatal
        return None, f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]


@contextlib.contextmanager
def frozen_tower_session(tower: torch.nn.Module, runtime: Runtime) -> Iterator[None]:
    """One no-grad autocast region around a whole encoding run of a frozen tower (image or text).

    Why one region, and why the parameters are marked as requiring grad inside it: autocast casts an fp32 weight
    to bf16/fp16 at every op call, and caches the cast only for leaf tensors that require grad, until the
    outermost autocast region exits (the Apex heuristic; the cache is also off under ``torch.inference_mode``).
    A frozen tower with a fresh region per batch therefore re-casts every weight for every batch, which made
    bf16 encoding of ViT-B/32 on the CPU 2.4x slower than a plain open_clip loop. Under ``no_grad`` no graph is
    recorded, so the flags change nothing else; they are restored on exit and the vectors are bitwise the same.
    """
    frozen = [p for p in tower.parameters() if p.is_floating_point() and not p.requires_grad]
    for parameter in frozen:
        parameter.requires_grad_(True)
    try:
        with torch.no_grad(), runtime.autocast():
            yield
    finally:
        for parameter in frozen:
            parameter.requires_grad_(False)


def encode_with_frozen_tower(encode: Callable[[torch.Tensor], torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
    """Run a frozen tower (``clip.encode_image``, or a text tower's ``encode``) on one batch inside a
    ``frozen_tower_session``: the output [B, D] cast to float32 and L2-normalised, x / ||x||_2 per row.

    Normalising in float32 keeps bf16/fp16 rounding out of the norm."""
    return F.normalize(encode(inputs).float(), dim=-1)
