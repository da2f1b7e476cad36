"""``mltk encode-images``: images -> an embeddings artifact, with a frozen CLIP image tower."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import emit, examples, out_option, resolve_input, split_list
from mltk.cli.options import DeviceOpt, JsonOpt, PrecisionOpt, SeedOpt

EXAMPLE = examples(
    "mltk encode-images world/images -m runs/native -o emb",
    "mltk encode-images photos/ -m ViT-B-32-quickgelu --pretrained openai -o emb",
)


def encode_images_command(
    source: Optional[str] = typer.Argument(
        None,
        help="An images artifact (PNG bytes or paths), a folder of images (recursive; the image_id is the "
        "relative path without extension), a Parquet file of image_id + path (+ split), or a folder of "
        "img2dataset's webdataset shards (.tar; streamed tar by tar, the sample key is the image_id; needs the "
        "webdataset package); - or nothing reads the path of an images artifact from stdin.",
    ),
    model: str = typer.Option(
        ...,
        "--model",
        "-m",
        help="open_clip architecture (ViT-B-32-quickgelu, mltk-tiny, ...), an open_clip "
        "hf-hub:org/repo name, or an mltk checkpoint artifact written by `mltk pretrain`.",
    ),
    pretrained: Optional[str] = typer.Option(
        None,
        "--pretrained",
        help="open_clip pretrained tag (openai, laion2b_s34b_b79k) or a local weights file; "
        "leave it out for a checkpoint artifact (or for random weights, fixed by --seed).",
    ),
    out: str = out_option("Output embeddings artifact directory."),
    batch_size: int = typer.Option(256, "--batch-size", help="Images per forward pass."),
    workers: Optional[int] = typer.Option(
        None,
        "--workers",
        help="DataLoader worker processes that decode and preprocess images (default: one per "
        "spare CPU core, at most 8; 0 decodes in the main process).",
    ),
    dtype: str = typer.Option("float16", "--dtype", help="Stored vectors: float16 or float32 (L2-normalised)."),
    shard_size: int = typer.Option(
        4096,
        "--shard-size",
        help="Images per shard; finished shards survive an interruption and a rerun with "
        "the same settings skips them. For webdataset shards each tar is a shard.",
    ),
    split: Optional[list[str]] = typer.Option(
        None,
        "--split",
        metavar="A[,B...]",
        help="Encode only these splits (repeat or comma-separate); default: every image.",
    ),
    images_root: List[Path] = typer.Option(
        [],
        "--images-root",
        help="Folder to look for image files in when a path of the source does not exist "
        "(by the path as given, then by file name); repeat it for a set spread over folders (XTD10: COCO "
        "train2014 and val2014).",
    ),
    image_map: Optional[Path] = typer.Option(
        None,
        "--image-map",
        help="File of image_id<TAB>path lines (or Parquet with image_id, path) giving the "
        "file of each image id; it wins over the source's paths.",
    ),
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
    seed: SeedOpt = 0,
    as_json: JsonOpt = False,
) -> None:
    """Encode images with a frozen CLIP image tower into L2-normalised, sharded, resumable embeddings.

    Under torchrun (torchrun --nproc_per_node N -m mltk encode-images ...) each process encodes its own shards
    and one artifact results, the same as a one-process run; only rank 0 prints its path."""
    from mltk import artifacts
    from mltk.core.distributed import is_main_process
    from mltk.encode.images import encode_images

    resolved = resolve_input(source, what="images")
    path = encode_images(
        resolved,
        out,
        model=model,
        pretrained=pretrained,
        batch_size=batch_size,
        workers=workers,
        dtype=dtype,
        shard_size=shard_size,
        splits=split_list(split) or None,
        device=device,
        precision=precision,
        seed=seed,
        images_roots=images_root,
        image_map=image_map,
    )
    if not is_main_process():  # under torchrun: one line on stdout, from rank 0
        return
    manifest = artifacts.read_manifest(path, "embeddings")
    emit(path, as_json, count=manifest["count"], dim=manifest["dim"], skipped=manifest["skipped_count"])


def register(app: typer.Typer) -> None:
    app.command("encode-images", epilog=EXAMPLE)(encode_images_command)
