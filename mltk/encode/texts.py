"""Batched caption encoding for evaluation, indexing and training (``encode_texts``, ``encode_captions``) and
``mltk encode-texts`` (``write_text_embeddings``), through any text encoder of ``mltk.encode.text_encoders``."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
import torch.nn.functional as F

from mltk import artifacts
from mltk.artifacts.schema import NATIVE_LANG
from mltk.core.errors import ConfigError, SchemaError
from mltk.core.runtime import Runtime, track
from mltk.core.user_files import read_user_text

# the encoders' home is mltk.encode.text_encoders; imported here under their names of before it existed
from mltk.encode.text_encoders import (  # noqa: F401
    ClipTextEncoder,
    TextEncoder,
    TowerTextEncoder,
    check_model_languages,
    load_model_encoder,
    load_text_encoder,
)


@torch.no_grad()
def encode_texts(
    encoder: TextEncoder,
    texts: list[str],
    lang: str = NATIVE_LANG,
    runtime: Runtime | None = None,
    batch_size: int = 256,
    normalize: bool = True,
    description: str | None = None,
) -> np.ndarray:
    """Encode texts of one language -> float32 [N, D], in input order, detached (L2-normalised unless
    ``normalize`` is false). ``encoder``: one ``mltk.load_model`` returns, or a stage's own; ``runtime`` (where
    and in which precision) defaults to the encoder's: ``load_model``'s, or fp32 on the device of its weights.

    Texts are tokenised once and batched by token length (then put back in order), so each batch is trimmed to
    sequences of similar length.
    """
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    runtime = runtime or runtime_of(encoder)
    tokens = encoder.tokenize(list(texts), lang)  # [N, L]
    lengths = (tokens != tokens[:, -1:]).sum(dim=1)  # a row padded on the right ends in its pad id (0 or 1)
    order = torch.argsort(lengths, stable=True)
    out = None
    batches = range(0, len(texts), batch_size)
    for start in track(batches, description or f"encoding {lang}", total=len(batches)):
        index = order[start : start + batch_size]
        with runtime.autocast():
            features = encoder.encode_tokens(tokens[index].to(runtime.device), lang).float()
        if normalize:
            features = F.normalize(features, dim=-1)
        if out is None:
            out = torch.empty(len(texts), features.shape[1], dtype=torch.float32)
        out[index] = features.cpu()
    return out.numpy()


def runtime_of(encoder: TextEncoder) -> Runtime:
    """The runtime an encoder carries (``mltk.load_model``'s), else fp32 on the device of its weights."""
    carried = getattr(encoder, "runtime", None)
    if isinstance(carried, Runtime):
        return carried
    weight = next(iter(encoder.parameters()), None) if isinstance(encoder, torch.nn.Module) else None
    return Runtime(weight.device if weight is not None else torch.device("cpu"), None)


def encode_captions(
    encoder: TextEncoder,
    captions: pa.Table,
    runtime: Runtime | None = None,
    batch_size: int = 256,
    languages: list[str] | None = None,
) -> tuple[pa.Table, np.ndarray]:
    """Encode a captions table, each language through its own path (``runtime``: as ``encode_texts``).

    Returns ``(table, vectors)``: ``table`` has ``id`` (``lang:caption_id``), ``image_id``, ``lang``,
    ``caption_id``, ``split``, row-aligned with L2-normalised float32 ``vectors``.
    """
    langs = languages or sorted(set(captions.column("lang").to_pylist()))
    supported = encoder.languages
    tables, arrays = [], []
    for lang in langs:
        if supported is not None and lang not in supported and lang != getattr(encoder, "native_lang", "en"):
            raise ConfigError(
                f"the model has no path for language {lang!r} (it reads: "
                f"{', '.join(['en'] + list(supported))}); pick languages with --lang"
            )
        rows = captions.filter(pc.equal(captions.column("lang"), lang))
        if rows.num_rows == 0:
            continue
        arrays.append(encode_texts(encoder, rows.column("caption").to_pylist(), lang, runtime, batch_size))
        caption_ids = rows.column("caption_id").to_pylist()
        tables.append(
            pa.table(
                {
                    "id": [f"{lang}:{cid}" for cid in caption_ids],
                    "image_id": rows.column("image_id"),
                    "lang": rows.column("lang"),
                    "caption_id": rows.column("caption_id"),
                    "split": rows.column("split"),
                }
            )
        )
    if not tables:
        raise ConfigError(f"no captions in the languages {', '.join(langs)}")
    return pa.concat_tables(tables), np.concatenate(arrays)


def refuse_repeated_caption_rows(captions: pa.Table, captions_path: str | Path) -> None:
    """A text vector's id is ``lang:caption_id``, so two rows of one language with one caption_id would give two
    vectors one id: refused here, naming the captions the user gave (not the embeddings about to be written)."""
    keys = pa.table({"lang": captions.column("lang"), "caption_id": captions.column("caption_id")})
    counts = keys.group_by(["lang", "caption_id"]).aggregate([("lang", "count")])
    repeated = counts.filter(pc.greater(counts.column("lang_count"), 1))
    if repeated.num_rows:
        lang, caption_id = repeated.column("lang")[0].as_py(), repeated.column("caption_id")[0].as_py()
        raise SchemaError(
            f"{repeated.num_rows} caption_id(s) occur on more than one row of one language (e.g. "
            f"{caption_id!r} in {lang}); a caption_id is one sentence per language",
            captions_path,
        )


def write_text_embeddings(
    captions_path: str | Path | None,
    model: str,
    out: str | Path,
    pretrained: str | None = None,
    languages: list[str] | None = None,
    splits: list[str] | None = None,
    device: str = "auto",
    precision: str = "auto",
    batch_size: int = 256,
    texts: list[str] | None = None,
    lines: str | Path | None = None,
) -> Path:
    """``mltk encode-texts``: the captions of ``captions_path`` (optionally only ``languages`` / ``splits``; by
    default every language the model reads) encoded by ``model`` (any text encoder ``load_text_encoder`` reads)
    into an L2-normalised embeddings artifact whose rows carry ``lang``, ``image_id``, ``caption_id`` and ``split``
    beside the id, for ``evaluate --texts`` and ``index``. With ``texts`` or ``lines`` (a file, one sentence a
    line) instead of captions: plain sentences (``write_sentence_embeddings``)."""
    from mltk.core.runtime import resolve_runtime
    from mltk.encode.text_encoders import readable_languages

    if texts or lines is not None:
        if captions_path is not None or splits:
            raise ConfigError("give a captions artifact (with --split) or sentences (--text / --lines), not both")
        return write_sentence_embeddings(
            sentences_of(texts or [], lines),
            model,
            out,
            pretrained,
            languages,
            device,
            precision,
            batch_size,
            source=lines,
        )
    captions = artifacts.load_captions(captions_path, drop_empty=True)
    if splits:
        captions = captions.filter(pc.is_in(captions.column("split"), pa.array(list(splits), pa.string())))
    if languages:
        captions = captions.filter(pc.is_in(captions.column("lang"), pa.array(list(languages), pa.string())))
    if captions.num_rows == 0:
        raise ConfigError(
            f"no captions in split(s) {', '.join(splits or ['any'])} and language(s) {', '.join(languages or ['any'])}",
            captions_path,
        )
    refuse_repeated_caption_rows(captions, captions_path)
    runtime = resolve_runtime(device, precision)
    encoder = load_model_encoder(str(model), pretrained, runtime.device)
    langs = readable_languages(encoder, languages or [], sorted(set(captions.column("lang").to_pylist())), str(model))
    table, vectors = encode_captions(encoder, captions, runtime, batch_size, languages=langs)
    spec = {"model": str(model), "pretrained": pretrained, "languages": langs, "splits": list(splits or [])}
    inputs = [captions_path] + ([model] if Path(model).exists() else [])
    return artifacts.write_embeddings(
        out,
        table.column("id").to_pylist(),
        vectors,
        normalized=True,
        stage="encode-texts",
        config=spec,
        inputs=inputs,
        **{name: table.column(name).to_pylist() for name in ("lang", "image_id", "caption_id", "split")},
    )


def sentences_of(texts: list[str], lines: str | Path | None) -> list[tuple[str, str]]:
    """``(caption_id, sentence)`` pairs: each ``--text`` numbered from 1 in the order given, or each non-blank
    line of the ``lines`` file numbered by its line number (so ``sed -n Np FILE`` shows sentence N)."""
    if texts and lines is not None:
        raise ConfigError("give --text or --lines, not both")
    if lines is None:
        pairs = [(str(n), text) for n, text in enumerate(texts, 1)]
    else:
        content = read_user_text(lines, what="--lines file of sentences")  # bounded: a device or FIFO too
        pairs = [(str(n), line.strip()) for n, line in enumerate(content.splitlines(), 1) if line.strip()]
    if not pairs or not all(text.strip() for _, text in pairs):
        raise ConfigError("no sentences to encode (an empty --text, or no non-blank line)", lines or "--text")
    return pairs


def write_sentence_embeddings(
    sentences: list[tuple[str, str]],
    model: str,
    out: str | Path,
    pretrained: str | None,
    languages: list[str] | None,
    device: str = "auto",
    precision: str = "auto",
    batch_size: int = 256,
    source: str | Path | None = None,
) -> Path:
    """Plain sentences of one language (``languages``: one code, default English) encoded by ``model`` into the
    embeddings artifact ``encode-texts`` writes: ids ``LANG:N`` with ``lang``, ``caption_id`` (N) and ``text``."""
    from mltk.core.runtime import resolve_runtime
    from mltk.encode.text_encoders import readable_languages

    if languages and len(languages) > 1:
        raise ConfigError(f"sentences are in one language: give one --lang, not {', '.join(languages)}")
    lang = languages[0] if languages else "en"
    runtime = resolve_runtime(device, precision)
    encoder = load_model_encoder(str(model), pretrained, runtime.device)
    readable_languages(encoder, [lang], [lang], str(model))
    vectors = encode_texts(encoder, [text for _, text in sentences], lang, runtime, batch_size)  # [N, D]
    digest = hashlib.sha256("\n".join(f"{n}\t{t}" for n, t in sentences).encode("utf-8")).hexdigest()
    spec = {
        "model": str(model),
        "pretrained": pretrained,
        "languages": [lang],
        "sentences": len(sentences),
        "sentences_sha256": digest,
    }  # other sentences are another artifact
    inputs = [p for p in (model, source) if p is not None and Path(p).exists()]
    return artifacts.write_embeddings(
        out,
        [f"{lang}:{n}" for n, _ in sentences],
        vectors,
        normalized=True,
        stage="encode-texts",
        config=spec,
        inputs=inputs,
        lang=[lang] * len(sentences),
        caption_id=[n for n, _ in sentences],
        text=[t for _, t in sentences],
    )
