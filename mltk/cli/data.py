"""Data commands: ``mltk synth-data`` (the embedded synthetic world). One function per command; ``register``
adds each to the app."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import either, emit, examples, hidden_alias, lang_option, out_option, split_list
from mltk.cli.options import JsonOpt, SeedOpt

SYNTH_EXAMPLE = examples("mltk synth-data -o world --lang en,de,zh \\", "  | mltk pretrain -o runs/native --steps 500")
IMPORT_EXAMPLE = examples("mltk import-data xtd10 XTD10/ --images-root coco/val2014 -o data/xtd10")
INDUCE_EXAMPLE = examples("mltk induce-lexicon data/m30k/captions --src de --tgt en -o lex-de-en")
MERGE_EXAMPLE = examples("mltk merge-captions data/a/captions data/b/captions -o data/ab")


def synth_data(
    out: Path = out_option("World directory to write (images/, captions/, world.json)."),
    seed: SeedOpt = 0,
    train: int = typer.Option(2000, "--train", help="Number of training images."),
    val: int = typer.Option(250, "--val", help="Number of validation images."),
    test: int = typer.Option(250, "--test", help="Number of test images."),
    size: int = typer.Option(64, "--size", help="Image side in pixels."),
    lang: List[str] = lang_option("Caption languages, repeated or comma-separated (default: all)."),
    langs: Optional[str] = hidden_alias("--langs"),
    translated: int = typer.Option(2, "--translated", help="Captions per image rendered in every language."),
    independent: int = typer.Option(
        1, "--independent", help="Further captions per image mentioning a different subset of the scene."
    ),
    mt_errors: str = typer.Option(
        "",
        "--mt-errors",
        metavar="RATES",
        help="Machine-translation errors in the train split's non-English captions: one "
        "rate for every language (0.2) or LANG=RATE pairs (de=0.1,zh=0.3). Default: "
        "exact translations.",
    ),
    as_json: JsonOpt = False,
) -> None:
    """Generate the embedded multilingual scene world: an images artifact (PNG bytes) and a captions artifact
    (parallel captions sharing caption_id across languages), split into train/val/test by image.

    Prints the images artifact (OUT/images), which encode-images and pretrain take (pretrain finds OUT/captions
    beside it); --json also names the world folder and the captions."""
    from mltk.data.lang import LANGUAGE_CODES
    from mltk.data.synth import SynthConfig, synthesize

    langs = ",".join(split_list(either(list(lang), [langs] if langs else [], "--lang", "--langs"))) or ",".join(
        LANGUAGE_CODES
    )

    config = SynthConfig(
        seed=seed,
        train=train,
        val=val,
        test=test,
        image_size=size,
        langs=langs,
        translated_per_image=translated,
        independent_per_image=independent,
        mt_errors=mt_errors,
    )
    result = synthesize(out, config)
    emit(
        result.images_path,
        as_json,
        world=str(Path(result.path).resolve()),
        images=str(result.images_path),
        captions=str(result.captions_path),
        n_images=result.n_images,
        n_captions=result.n_captions,
    )


def import_data(
    fmt: str = typer.Argument(
        ...,
        metavar="FORMAT",
        help="multi30k, coco-karpathy, xtd10, crossmodal3600, "
        "xflickrco, cc, msrvtt, lines or webdataset (img2dataset's tar shards); lexicon "
        "(MUSE's 'src tgt' lines) or synth-lexicon (SRC: a synth-data world) write a "
        "lexicon artifact instead (with --src and --tgt).",
    ),
    src: List[Path] = typer.Argument(
        ...,
        metavar="SRC...",
        help="The dataset as downloaded: the Multi30K folder, "
        "dataset_coco.json, the XTD10 folder, captions.jsonl, the xFlickr&CO "
        "annotations folder (or one SPLIT.jsonl), a Conceptual Captions TSV, "
        "img2dataset's output folder of .tar shards; for "
        "lines, one or more caption files (one caption per line).",
    ),
    out: Path = out_option("Directory to write captions/ (and images/) into."),
    split: List[str] = typer.Option(
        None,
        "--split",
        metavar="A[,B...]",
        help="Import only these splits "
        "(repeat or comma-separate; for xflickrco the "
        "file names to read, default test; for lines the split to write, default "
        "test; for webdataset the split to write, default train).",
    ),
    images_root: List[Path] = typer.Option(
        None,
        "--images-root",
        help="Folder the dataset's image names are "
        "relative to (default: the folder of SRC); repeat it for images kept "
        "in several folders (XTD10: train2014 and val2014), the first folder "
        "holding a file wins. The images artifact stores absolute paths.",
    ),
    lang: Optional[str] = typer.Option(
        None, "--lang", help="Language of the captions (lines, webdataset; one xflickrco file outside a LANG/ folder)."
    ),
    image_list: Optional[Path] = typer.Option(
        None, "--image-list", help="lines: the image of each line, one name per line."
    ),
    translation_of: Optional[str] = typer.Option(
        None,
        "--translation-of",
        help="lines: the language the lines "
        "translate; each line takes the caption_id of its source caption "
        "in --parent.",
    ),
    parent: Optional[Path] = typer.Option(
        None, "--parent", help="lines: the captions artifact holding the captions the lines translate."
    ),
    test_list: Optional[Path] = typer.Option(
        None,
        "--test-list",
        help="msrvtt: the 1K-A test list "
        "(JSFusion's MSRVTT_JSFUSION_test.csv: key,vid_key,video_id,sentence); "
        "the test split becomes its 1,000 videos, one caption each (MLA's "
        "split).",
    ),
    task: Optional[str] = typer.Option(
        None,
        "--task",
        help="multi30k: task1 (translations sharing caption_id; the "
        "default) or task2 (five independent descriptions per image and language). "
        "One task per import: they are different benchmarks on the same test "
        "images, so import each into its own folder.",
    ),
    src_lang: Optional[str] = typer.Option(None, "--src", help="lexicon, synth-lexicon: the source language."),
    tgt_lang: Optional[str] = typer.Option(None, "--tgt", help="lexicon, synth-lexicon: the target language."),
    vocab_from: Optional[Path] = typer.Option(
        None,
        "--vocab-from",
        help="lexicon: a captions artifact (the training captions); keep only the pairs whose "
        "words occur in its train captions of their language (AME filters MUSE to the training words).",
    ),
    as_json: JsonOpt = False,
) -> None:
    """Convert a caption dataset on disk into a captions artifact (OUT/captions) and an images artifact of paths
    (OUT/images). Translations share caption_id; image ids are canonical (coco:000000391895,
    flickr30k:1000092795); empty captions are dropped and counted; files not read are named on stderr."""
    from mltk import artifacts
    from mltk.data.importers import CAPTIONS_DIR, IMAGES_DIR, import_dataset

    if fmt in LEXICON_FORMATS:
        emit(import_lexicon(fmt, src, out, src_lang, tgt_lang, vocab_from), as_json)
        return
    path = import_dataset(
        fmt,
        src,
        out,
        splits=list(split_list(split)) or None,
        images_root=images_root or None,
        lang=lang,
        image_list=image_list,
        translation_of=translation_of,
        parent=parent,
        test_list=test_list,
        task=task,
    )
    manifest = artifacts.read_manifest(path / CAPTIONS_DIR, "captions")
    images = path / IMAGES_DIR
    emit(
        path,
        as_json,
        captions=str(path / CAPTIONS_DIR),
        images=str(images) if images.is_dir() else None,
        n_captions=manifest["rows"],
        languages=manifest["languages"],
        dropped_empty=manifest["dropped_empty"],
    )


LEXICON_FORMATS = ("lexicon", "synth-lexicon")


def import_lexicon(
    fmt: str,
    src: List[Path],
    out: Path,
    src_lang: Optional[str],
    tgt_lang: Optional[str],
    vocab_from: Optional[Path] = None,
) -> Path:
    from mltk.ame.lexicon import import_muse
    from mltk.ame.world import import_world_lexicon
    from mltk.core.errors import ConfigError

    if len(src) != 1:
        raise ConfigError(f"import-data {fmt} reads one source, got {len(src)}")
    if fmt == "lexicon":
        return import_muse(src[0], out, src_lang, tgt_lang, vocab_from)
    if vocab_from is not None:
        raise ConfigError("--vocab-from goes with import-data lexicon (the world's dictionary holds its own words)")
    return import_world_lexicon(src[0], out, src_lang, tgt_lang)


def induce_lexicon(
    captions: Path = typer.Argument(
        ..., metavar="CAPTIONS", help="Captions artifact with translations (shared caption_id)."
    ),
    out: Path = out_option("The lexicon artifact to write."),
    src_lang: str = typer.Option(..., "--src", help="Source language."),
    tgt_lang: str = typer.Option("en", "--tgt", help="Target language."),
    split: Optional[str] = typer.Option("train", "--split", help="Read only this split ('' for all)."),
    min_count: int = typer.Option(3, "--min-count", help="Translation pairs a word pair must co-occur in."),
    as_json: JsonOpt = False,
) -> None:
    """Induce a bilingual lexicon from parallel captions: word co-occurrence across translation pairs, Dice
    coefficient, mutual best match, at least --min-count co-occurrences (mltk.ame.induce)."""
    from mltk.ame.induce import induce_lexicon as induce

    emit(induce(captions, out, src_lang, tgt_lang, split or None, min_count), as_json)


def merge_captions(
    inputs: List[Path] = typer.Argument(..., metavar="CAPTIONS...", help="Two or more captions artifacts."),
    out: Path = out_option("The captions artifact to write."),
    as_json: JsonOpt = False,
) -> None:
    """The union of captions artifacts; a duplicate (caption_id, lang), a caption_id naming two images or an image
    in two splits is refused."""
    from mltk.data.importers import merge_captions as merge

    emit(merge(inputs, out), as_json)


def register(app: typer.Typer) -> None:
    app.command("synth-data", epilog=SYNTH_EXAMPLE)(synth_data)
    app.command("import-data", epilog=IMPORT_EXAMPLE)(import_data)
    app.command("merge-captions", epilog=MERGE_EXAMPLE)(merge_captions)
    app.command("induce-lexicon", epilog=INDUCE_EXAMPLE)(induce_lexicon)
