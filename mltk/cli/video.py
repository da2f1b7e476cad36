"""Video commands: ``synth-videos`` (the embedded clips) and ``encode-videos`` (frames through a frozen image
tower, mean-pooled)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import emit, examples, lang_option, out_option, resolve_input, split_list
from mltk.cli.options import DeviceOpt, JsonOpt, PrecisionOpt, SeedOpt

SYNTH_EXAMPLE = examples("mltk synth-videos -o clips --lang en,de,fr")
ENCODE_EXAMPLE = examples(
    "mltk encode-videos clips/videos -m runs/native -o clip-emb",
    "mltk encode-videos MSRVTT/videos/all -m ViT-B-32-quickgelu \\",
    "  --pretrained openai --frames 12 -o emb/msrvtt",
)


def synth_videos(
    out: Path = out_option("Folder to write (videos/, captions/)."),
    seed: SeedOpt = 0,
    train: int = typer.Option(200, "--train", help="Number of training clips."),
    val: int = typer.Option(40, "--val", help="Number of validation clips."),
    test: int = typer.Option(40, "--test", help="Number of test clips."),
    frames: int = typer.Option(16, "--frames", help="Frames per clip (8 per second)."),
    size: int = typer.Option(64, "--size", help="Frame side in pixels (a multiple of 16)."),
    lang: List[str] = lang_option("Caption languages (default en,de,fr; available en,de,fr,es,it)."),
    as_json: JsonOpt = False,
) -> None:
    """Generate short clips of one shape moving left, right, up or down, with captions that say so in every
    language ("A red circle moves to the left."); prints the videos artifact (OUT/videos), which encode-videos
    takes; OUT/captions share the video ids."""
    from mltk.data.synth_video import VIDEOS_DIR, VideoWorldConfig, synth_videos

    langs = split_list(lang) or VideoWorldConfig.langs
    emit(
        synth_videos(
            VideoWorldConfig(
                seed=seed, train=train, val=val, test=test, frames=frames, size=size, langs=tuple(langs), out=out
            )
        )
        / VIDEOS_DIR,
        as_json,
    )


def encode_videos_command(
    source: Optional[str] = typer.Argument(
        None,
        metavar="[VIDEOS]",
        help="A videos artifact (synth-videos, import-data msrvtt), a folder of video files, or -/piped stdin.",
    ),
    out: Path = out_option("Embeddings artifact to write (one vector per video)."),
    model: str = typer.Option(
        ...,
        "--model",
        "-m",
        help="The CLIP whose frozen image tower encodes the frames: an "
        "mltk checkpoint, or an open_clip name with --pretrained.",
    ),
    pretrained: Optional[str] = typer.Option(None, "--pretrained", help="open_clip pretrained tag or weights file."),
    frames: int = typer.Option(12, "--frames", help="Frames sampled uniformly per video (MLA: 12; at most 256)."),
    keep_frames: bool = typer.Option(
        False, "--keep-frames", help="Also write the frame vectors (frames.npy, frames.parquet)."
    ),
    split: List[str] = typer.Option([], "--split", metavar="A[,B...]", help="Only these splits (default: all)."),
    batch_size: int = typer.Option(8, "--batch-size", help="Videos per forward pass."),
    dtype: str = typer.Option("float16", "--dtype", help="Stored vector type: float16 or float32."),
    seed: SeedOpt = 0,
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Encode videos into one vector each: N frames sampled uniformly, each through the frozen image tower, the
    normalised frame vectors averaged and normalised again (CLIP4Clip's meanP, as MLA evaluates MSR-VTT). The
    result is read by evaluate and index like image embeddings (ids are video ids)."""
    from mltk.encode.videos import VideoEncodeConfig, encode_videos

    config = VideoEncodeConfig(
        model=model,
        pretrained=pretrained,
        frames=frames,
        batch_size=batch_size,
        dtype=dtype,
        splits=split_list(split),
        keep_frames=keep_frames,
        device=device,
        precision=precision,
        seed=seed,
        source=resolve_input(source, what="videos"),
        out=out,
    )
    emit(encode_videos(config), as_json)


def register(app: typer.Typer) -> None:
    app.command("synth-videos", epilog=SYNTH_EXAMPLE)(synth_videos)
    app.command("encode-videos", epilog=ENCODE_EXAMPLE)(encode_videos_command)
