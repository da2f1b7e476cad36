"""What ``mltk evaluate`` adds for the seed papers beyond retrieval: ``--metric bli`` (AME's lexicon alignment,
``mltk.ame.bli``) and ``--translations CAPS --fusion ETA,...`` (CLL-CLIP's translate-test and score fusion,
``mltk.evaluate.fusion``): option checks, and the fusion section of ``metrics.json``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from mltk import artifacts
from mltk.artifacts.schema import NATIVE_LANG
from mltk.core.errors import ConfigError
from mltk.core.runtime import Runtime, log
from mltk.evaluate.fusion import fusion_curve, translation_rows


def retrieval_metrics(config: Any) -> tuple[str, ...]:
    """The metrics the retrieval code computes (all but ``bli``)."""
    return tuple(m for m in config.metrics if m != "bli")


def check_seed_options(config: Any) -> None:
    """``bli`` needs ``--model`` and ``--lexicon``; ``--fusion`` and ``--translations`` go together, with
    ``--model`` (the translations are encoded by its English path)."""
    if "bli" in config.metrics and (config.model is None or config.lexicon is None):
        raise ConfigError(
            "--metric bli needs --model (an MLA or CLL-CLIP checkpoint) and --lexicon (a lexicon artifact)"
        )
    if (config.lexicon is not None or config.bli_vocab is not None) and "bli" not in config.metrics:
        raise ConfigError("--lexicon and --bli-vocab go with --metric bli")
    if config.bli_k < 1:
        raise ConfigError(f"--bli-k must be at least 1, got {config.bli_k}")
    if bool(config.fusion) != (config.translations is not None):
        raise ConfigError("--fusion ETA[,ETA...] and --translations CAPTIONS go together")
    if config.translations is not None and (config.model is None or config.captions is None):
        raise ConfigError(
            "--translations needs --model with --captions: the captions and their translations are both encoded"
        )


def fusion_section(
    config: Any, texts: Any, runtime: Runtime, evaluate: Callable[[np.ndarray], dict], similarity: str = "cosine"
) -> dict:
    """Encode the translations of the evaluated captions through the model's English path and evaluate the fused
    vectors at every eta (``mltk.evaluate.fusion``), ranked by ``similarity`` (named in the section's form)."""
    from mltk.encode.text_encoders import load_model_encoder
    from mltk.encode.texts import encode_captions

    translations = artifacts.load_captions(config.translations)
    text_rows, wanted = translation_rows(texts.table, translations, config.translations)
    english = translations.take(wanted)
    english = english.set_column(
        english.schema.get_field_index("lang"), "lang", pa.array([NATIVE_LANG] * english.num_rows, pa.string())
    )
    encoder = load_model_encoder(config.model, config.pretrained, runtime.device)
    log(f"fusion: encoding {english.num_rows} translation(s) through the English path of {config.model}")
    table, vectors = encode_captions(encoder, english, runtime, batch_size=config.batch_size, languages=[NATIVE_LANG])
    order = {cid: i for i, cid in enumerate(table.column("caption_id").to_pylist())}
    translated = vectors[[order[c] for c in english.column("caption_id").to_pylist()]]  # row i: text_rows[i]
    return fusion_curve(config.fusion, texts.table, texts.vectors, translated, text_rows, evaluate, similarity)
