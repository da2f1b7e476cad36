"""The main job (examples/quickstart.mk) scripted in Python through mltk's public API: a synthetic world, a native
English CLIP, a BPE vocabulary grown language by language, MLA (NLT then LE), an image index and the metrics.

    python examples/pipeline.py runs/api                 # the quickstart's sizes
    python examples/pipeline.py runs/api --small         # a one-minute run

Every function writes the same artifact as its command (the same files, manifest and weights for the same
settings), so a scripted run and a Makefile run can share a tree.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mltk

QUICKSTART = {
    "train": 6000,
    "val": 250,
    "test": 250,
    "pretrain_steps": 500,
    "vocab_size": 2000,
    "nlt_steps": 500,
    "nlt_lr": 1e-3,
    "le_steps": 200,
    "le_lr": 1e-4,
    "languages": ("de", "fr", "ru", "zh", "ar"),
}
SMALL = {
    "train": 60,
    "val": 12,
    "test": 12,
    "pretrain_steps": 3,
    "vocab_size": 600,
    "nlt_steps": 2,
    "nlt_lr": 1e-3,
    "le_steps": 2,
    "le_lr": 1e-4,
    "languages": ("de", "zh"),
}


def run_pipeline(
    base: Path,
    train: int,
    val: int,
    test: int,
    pretrain_steps: int,
    vocab_size: int,
    nlt_steps: int,
    nlt_lr: float,
    le_steps: int,
    le_lr: float,
    languages: tuple[str, ...],
) -> Path:
    """The quickstart's stages in order; returns the metrics artifact."""
    world = mltk.synth_data(mltk.SynthConfig(train=train, val=val, test=test, out=base / "world"))
    images, captions = world / "images", world / "captions"
    native = mltk.pretrain(
        mltk.PretrainConfig(images=images, captions=captions, out=base / "native", loop={"steps": pretrain_steps})
    )
    parent = None
    for lang in languages:  # V_t = V_{t-1} ∪ V̂_t: each vocabulary grows from the one before
        parent = mltk.build_vocab(captions, lang, base / "vocab" / lang, parent=parent, size=vocab_size)
    nlt = mltk.train_nlt(
        mltk.MlaConfig(
            captions=captions,
            out=base / "nlt",
            model=str(native),
            tokenizer=str(parent),
            languages=languages,
            loop={"steps": nlt_steps, "lr": nlt_lr},
        )
    )
    image_embeddings = mltk.encode_images(images, base / "img", model=str(native))
    mla = mltk.train_le(
        mltk.MlaConfig(
            captions=captions,
            out=base / "mla",
            images=image_embeddings,
            init=nlt,
            temperature=None,
            loop={"steps": le_steps, "lr": le_lr},
        )
    )
    mltk.build_index(mltk.IndexConfig(embeddings=image_embeddings, out=base / "index"))
    return mltk.run_evaluation(
        mltk.EvaluateConfig(
            images=image_embeddings,
            out=base / "metrics",
            model=str(mla),
            captions=captions,
            split="test",
            languages=("en", *languages),
            metrics=("recall", "mrv"),
        )
    )


if __name__ == "__main__":
    sizes = SMALL if "--small" in sys.argv[2:] else QUICKSTART
    metrics = run_pipeline(Path(sys.argv[1]), **sizes)
    print(metrics)
