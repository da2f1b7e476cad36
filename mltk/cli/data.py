"""Data commands: ``mltk synth-data`` (the embedded synthetic world). One function per command; ``register``
adds each to the app."""

from __future__ import annotations

from pathlib import Path

import typer

from mltk.cli.common import JsonOption, SeedOption, emit
from mltk.data.lang import LANGUAGE_CODES


def synth_data(
    out: Path = typer.Option(..., "--out", help="World directory to write (images/, captions/, world.json)."),
    seed: int = SeedOption,
    train: int = typer.Option(2000, "--train", help="Number of training images."),
    val: int = typer.Option(250, "--val", help="Number of validation images."),
    test: int = typer.Option(250, "--test", help="Number of test images."),
    size: int = typer.Option(64, "--size", help="Image side in pixels."),
    langs: str = typer.Option(",".join(LANGUAGE_CODES), "--langs",
                              help="Comma-separated caption languages (or 'all')."),
    translated: int = typer.Option(2, "--translated", help="Captions per image rendered in every language."),
    independent: int = typer.Option(1, "--independent",
                                    help="Further captions per image mentioning a different subset of the scene."),
    mt_errors: str = typer.Option("", "--mt-errors", metavar="RATES",
                                  help="Machine-translation errors in the train split's non-English captions: one "
                                  "rate for every language (0.2) or LANG=RATE pairs (de=0.1,zh=0.3). Default: "
                                  "exact translations."),
    as_json: bool = JsonOption,
) -> None:
    """Generate the embedded multilingual scene world: an images artifact (PNG bytes) and a captions artifact
    (parallel captions sharing caption_id across languages), split into train/val/test by image."""
    from mltk.data.synth import SynthConfig, synthesize

    config = SynthConfig(seed=seed, train=train, val=val, test=test, image_size=size, langs=langs,
                         translated_per_image=translated, independent_per_image=independent, mt_errors=mt_errors)
    result = synthesize(out, config)
    emit(result.path, as_json, images=str(result.images_path), captions=str(result.captions_path),
         n_images=result.n_images, n_captions=result.n_captions)


def import_data(
    fmt: str = typer.Argument(..., metavar="FORMAT", help="multi30k, coco-karpathy, xtd10, crossmodal3600, "
                              "xflickrco or cc."),
    src: Path = typer.Argument(..., help="The dataset as downloaded: the Multi30K folder, dataset_coco.json, the "
                               "XTD10 folder, captions.jsonl, the xFlickr&CO annotations folder (or one "
                               "LANG/SPLIT.jsonl), or a Conceptual Captions TSV."),
    out: Path = typer.Option(..., "--out", help="Directory to write captions/ (and images/) into."),
    split: list[str] = typer.Option(None, "--split", help="Import only this split (repeatable; for xflickrco the "
                                    "file names to read, default test)."),
    images_root: Path = typer.Option(None, "--images-root", help="Folder the dataset's image names are relative "
                                     "to (default: the folder of SRC); the images artifact stores absolute paths."),
    as_json: bool = JsonOption,
) -> None:
    """Convert a caption dataset on disk into a captions artifact (OUT/captions) and an images artifact of paths
    (OUT/images). Translations share caption_id; empty captions are dropped and counted."""
    from mltk import artifacts
    from mltk.data.importers import CAPTIONS_DIR, IMAGES_DIR, import_dataset

    path = import_dataset(fmt, src, out, splits=split, images_root=images_root)
    manifest = artifacts.read_manifest(path / CAPTIONS_DIR, "captions")
    images = path / IMAGES_DIR
    emit(path, as_json, captions=str(path / CAPTIONS_DIR), images=str(images) if images.is_dir() else None,
         n_captions=manifest["rows"], languages=manifest["languages"], dropped_empty=manifest["dropped_empty"])


def register(app: typer.Typer) -> None:
    app.command("synth-data")(synth_data)
    app.command("import-data")(import_data)
