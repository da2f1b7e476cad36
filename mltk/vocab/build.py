"""The vocab artifact (write, load) and ``mltk build-vocab``: train V̂ on one language, merge it, write it.

The files (names in ``mltk.artifacts.schema``, read and written by ``mltk.artifacts``): ``merges.txt`` (a header
line, then one merge ``left right`` per line in priority order), ``vocab.json`` (``{token: id}`` with ids 0..V-1),
``prior_task_counts.npy`` and ``task_token_freq.npy`` (int64 [V], see ``Vocabulary``), ``prior_vocab_counts.npy``
and ``task_vocab_member.npy`` (int64 [V], TEIR's token sets by vocabulary membership); a WordPiece vocabulary
(``mltk.vocab.wordpiece``) has ``tokenizer.json`` instead of ``merges.txt``; the manifest holds
``lang``, ``languages`` and ``tasks`` so far, and ``sizes`` (old, new-vocabulary, overlapping, new, total) plus
merge counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mltk import artifacts
from mltk.artifacts import schema
from mltk.core.errors import ArtifactError, ConfigError
from mltk.core.runtime import log
from mltk.vocab.merge import clip_vocabulary, train_vocabulary
from mltk.vocab.tokenizer import CLIP_ROOT_NAME, DEFAULT_CONTEXT_LENGTH, EOT_TOKEN, SOT_TOKEN, ClipBpeTokenizer
from mltk.vocab.vocabulary import MergeSizes, Vocabulary
from mltk.vocab.wordpiece import WORDPIECE, read_protected_words, read_wordpiece_tokenizer, write_wordpiece_files


def write_vocabulary(
    vocabulary: Vocabulary, out_dir: artifacts.PathLike, *, config=None, inputs: Iterable[artifacts.PathLike] = ()
) -> Path:
    """Write ``vocabulary`` as a vocab artifact (files listed in the module docstring)."""
    tokenizer = vocabulary.tokenizer
    wordpiece = getattr(tokenizer, "kind", None) == WORDPIECE
    with artifacts.ArtifactWriter(out_dir, "vocab", stage="build-vocab", config=config, inputs=inputs) as writer:
        if wordpiece:  # a Hugging Face tower's WordPiece vocabulary: vocab.json, tokenizer.json and the counts
            write_wordpiece_files(writer.dir, tokenizer, vocabulary.protected_words)
            artifacts.save_array(writer.dir / schema.VOCAB_PRIOR_COUNTS_FILE, vocabulary.prior_task_counts)
            artifacts.save_array(writer.dir / schema.VOCAB_TASK_FREQ_FILE, vocabulary.task_token_freq)
        else:
            artifacts.write_vocab_files(
                writer.dir, tokenizer.tokens, tokenizer.merges, vocabulary.prior_task_counts, vocabulary.task_token_freq
            )
        if vocabulary.prior_vocab_counts is not None and vocabulary.task_vocab_member is not None:
            artifacts.save_array(writer.dir / schema.VOCAB_PRIOR_MEMBER_FILE, vocabulary.prior_vocab_counts)
            artifacts.save_array(writer.dir / schema.VOCAB_TASK_MEMBER_FILE, vocabulary.task_vocab_member)
        writer.manifest.update(
            lang=vocabulary.tasks[-1]["lang"] if vocabulary.tasks else None,
            languages=vocabulary.languages,
            tasks=vocabulary.tasks,
            vocab_size=tokenizer.vocab_size,
            sizes=vocabulary.sizes,
            **(
                tokenizer.manifest_fields()
                if wordpiece
                else {
                    "root": CLIP_ROOT_NAME,
                    "context_length": tokenizer.context_length,
                    "special_tokens": {SOT_TOKEN: tokenizer.sot_token_id, EOT_TOKEN: tokenizer.eot_token_id},
                }
            ),
        )
    return writer.path


def load_vocabulary(path: artifacts.PathLike | None) -> Vocabulary:
    """Read a vocab artifact (None gives CLIP's own vocabulary, the root of every chain)."""
    if path is None:
        return clip_vocabulary()
    path = Path(path)
    manifest = artifacts.read_manifest(path, "vocab")
    try:
        sizes = MergeSizes(**manifest["sizes"]) if manifest.get("sizes") else None
        context_length = int(manifest.get("context_length", DEFAULT_CONTEXT_LENGTH))
        tasks = list(manifest.get("tasks", []))
    except (TypeError, ValueError):
        raise ArtifactError("manifest.json: malformed sizes, context_length or tasks", path) from None
    if manifest.get("tokenizer") == WORDPIECE:
        tokenizer = read_wordpiece_tokenizer(path, manifest)
        counts = [
            artifacts.load_array(path / name) for name in (schema.VOCAB_PRIOR_COUNTS_FILE, schema.VOCAB_TASK_FREQ_FILE)
        ]
        if any(a.shape != (tokenizer.vocab_size,) or not np.issubdtype(a.dtype, np.integer) for a in counts):
            raise ArtifactError(f"the task counts do not have one integer per token ({tokenizer.vocab_size})", path)
        prior_counts, task_freq = (a.astype(np.int64) for a in counts)
    else:
        files = artifacts.read_vocab_files(path)
        tokenizer = ClipBpeTokenizer(files.tokens, files.merges, context_length)
        prior_counts, task_freq = files.prior_task_counts, files.task_token_freq
    member_files = [path / schema.VOCAB_PRIOR_MEMBER_FILE, path / schema.VOCAB_TASK_MEMBER_FILE]
    prior_vocab, member = (artifacts.load_array(f).astype(np.int64) if f.exists() else None for f in member_files)
    if any(a is not None and a.shape != (tokenizer.vocab_size,) for a in (prior_vocab, member)):
        raise ArtifactError(f"the membership counts do not have one entry per token ({tokenizer.vocab_size})", path)
    protected = read_protected_words(path) if manifest.get("tokenizer") == WORDPIECE else None
    return Vocabulary(tokenizer, prior_counts, task_freq, tasks, sizes, path.resolve(), prior_vocab, member, protected)


def load_tokenizer(path: artifacts.PathLike | None):
    """The tokenizer of a vocab artifact (None: CLIP's own): a ``ClipBpeTokenizer``, or a ``WordPieceTokenizer``
    for a Hugging Face tower's vocabulary. ``encode(text)`` gives ids without start/end."""
    return load_vocabulary(path).tokenizer


def select_captions(
    table: pa.Table, lang: str, split: str | None = "train", source: artifacts.PathLike = "<captions>"
) -> list[str]:
    """The caption strings of one language (and split; None for all splits) of a captions table."""
    mask = pc.equal(table.column("lang"), lang)
    if split is not None:
        mask = pc.and_(mask, pc.equal(table.column("split"), split))
    selected = table.filter(mask).column("caption").to_pylist()
    if not selected:
        langs = sorted(set(table.column("lang").to_pylist()))
        splits = sorted(set(table.column("split").to_pylist()))
        raise ConfigError(
            f"no captions with lang={lang!r}"
            + (f" and split={split!r}" if split else "")
            + f" (languages: {', '.join(langs)}; splits: {', '.join(splits)})",
            source,
        )
    return selected


def build_vocab(
    captions: artifacts.PathLike | pa.Table,
    lang: str,
    out_dir: artifacts.PathLike,
    *,
    parent: artifacts.PathLike | None = None,
    size: int,
    split: str | None = "train",
    min_frequency: int,
    protect_lang: str | None = None,
) -> Path:
    """``mltk build-vocab``: train V̂ on one language's captions (a captions artifact, Parquet file or table),
    merge it into ``parent`` (CLIP's vocabulary when None) and write the vocab artifact; returns its path.

    ``protect_lang`` (e.g. ``en``): keep the parent's ids for every word of that language's captions in the same
    table, all splits (see ``train_vocabulary``).
    """
    if isinstance(captions, pa.Table):
        table, source, inputs = artifacts.validate_captions(captions, drop_empty=True), "<captions table>", []
    else:
        table, source, inputs = artifacts.load_captions(captions, drop_empty=True), captions, [captions]
    config = {
        "lang": lang,
        "size": size,
        "split": split,
        "min_frequency": min_frequency,
        "protect_lang": protect_lang,
        "parent": str(Path(parent).resolve()) if parent is not None else CLIP_ROOT_NAME,
    }
    inputs += [parent] if parent is not None else []
    existing = artifacts.reusable(out_dir, "vocab", stage="build-vocab", config=config, inputs=inputs)
    if existing is not None and inputs:  # a table handed in directly is not in the settings
        return existing
    texts = select_captions(table, lang, split, source)
    protected = select_captions(table, protect_lang, None, source) if protect_lang else []
    parent_vocabulary = load_vocabulary(parent)
    if lang in parent_vocabulary.languages:
        log(f"note: language {lang!r} was already a task of the parent vocabulary; learning it again")
    vocabulary = train_vocabulary(texts, lang, parent_vocabulary, size, min_frequency, protected)
    return write_vocabulary(vocabulary, out_dir, config=config, inputs=inputs)
