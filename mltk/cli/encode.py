"""``mltk encode-images``: images -> an embeddings artifact, with a frozen CLIP image tower."""

from __future__ import annotations

from typing import Optional

import typer

from mltk import artifacts
from mltk.cli.common import DeviceOption, JsonOption, PrecisionOption, SeedOption, emit
from mltk.encode import encode_images


def encode_images_command(
    source: Optional[str] = typer.Argument(
        None, help="An images artifact (PNG bytes or paths), a folder of images (recursive; the image_id is the "
        "relative path without extension), or a Parquet file of image_id + path (+ split); - or nothing reads "
        "the path of an images artifact from stdin."),
    model: str = typer.Option(
        ..., "--model", "-m", help="open_clip architecture (ViT-B-32-quickgelu, mltk-tiny, ...), an open_clip "
        "hf-hub:org/repo name, or an mltk checkpoint artifact written by `mltk pretrain`."),
    pretrained: Optional[str] = typer.Option(
        None, "--pretrained", help="open_clip pretrained tag (openai, laion2b_s34b_b79k) or a local weights file; "
        "leave it out for a checkpoint artifact (or for random weights, fixed by --seed)."),
    out: str = typer.Option(..., "--out", "-o", help="Output embeddings artifact directory."),
    batch_size: int = typer.Option(256, "--batch-size", help="Images per forward pass."),
    workers: Optional[int] = typer.Option(
        None, "--workers", help="DataLoader worker processes that decode and preprocess images (default: one per "
        "spare CPU core, at most 8; 0 decodes in the main process)."),
    dtype: str = typer.Option("float16", "--dtype", help="Stored vectors: float16 or float32 (L2-normalised)."),
    shard_size: int = typer.Option(
        4096, "--shard-size", help="Images per shard; finished shards survive an interruption and a rerun with "
        "the same settings skips them."),
    split: Optional[list[str]] = typer.Option(
        None, "--split", help="Encode only this split (repeatable); default: every image."),
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    seed: int = SeedOption,
    as_json: bool = JsonOption,
) -> None:
    """Encode images with a frozen CLIP image tower into L2-normalised, sharded, resumable embeddings."""
    resolved = artifacts.resolve_input(source, what="images")
    path = encode_images(resolved, out, model=model, pretrained=pretrained, batch_size=batch_size, workers=workers,
                         dtype=dtype, shard_size=shard_size, splits=split, device=device, precision=precision,
                         seed=seed)
    manifest = artifacts.read_manifest(path, "embeddings")
    emit(path, as_json, count=manifest["count"], dim=manifest["dim"], skipped=manifest["skipped_count"])


def register(app: typer.Typer) -> None:
    app.command("encode-images")(encode_images_command)
