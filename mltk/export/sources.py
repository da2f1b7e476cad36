"""The checkpoints that fold into a Hugging Face tower's weights, read into an ``HFTextModel``
(``mltk.export.hf``), and the one-line refusals for those that do not."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from mltk.artifacts import schema
from mltk.core.errors import ConfigError
from mltk.export.hf import HFTextModel, dense_layers, encoder_with_words

ACQUIRERS_REFUSAL = (
    "MLA acquirers run after every layer of the frozen tower and cannot be folded into its weights, "
    "so no transformers or sentence-transformers model can hold them without remote code (why: "
    "docs/export.md); export them with --format mla (a self-contained folder with a standalone "
    "loader), or train with --train full for a model sentence-transformers loads"
)


def hf_text_model(checkpoint: Path, config: dict) -> HFTextModel:
    """The transformers encoder a ``mla`` (``--train full``) or ``cll`` checkpoint folds into; refused in one line
    for every other checkpoint."""
    fmt = config.get("format")
    if fmt == schema.FORMAT_MLA:
        if config.get("train", "acquirers") != "full":
            raise ConfigError(ACQUIRERS_REFUSAL, checkpoint)
        return _from_student(checkpoint)
    if fmt == schema.FORMAT_CLL:
        return _from_grown_table(checkpoint)
    raise ConfigError(f"a {fmt!r} checkpoint (a whole CLIP) exports with --format open_clip", checkpoint)


def _text_only_base(encoder, checkpoint: Path, what: str) -> Path:
    if encoder.clip is not None:
        raise ConfigError(
            f"{what} on a CLIP's text tower: open_clip's text projection and pooler have no "
            f"transformers or sentence-transformers equivalent; mltk exports {what} on a text-only "
            f"transformers / sentence-transformers tower (all-MiniLM-L6-v2)",
            checkpoint,
        )
    return Path(encoder.base.spec["model"])


def _from_student(checkpoint: Path) -> HFTextModel:
    """The student of ``train-nlt --train full``: its encoder, word embeddings = the projected non-native table."""
    from mltk.models.multilingual import load_encoder

    encoder = load_encoder(checkpoint).eval()
    base = _text_only_base(encoder, checkpoint, "a --train full student")
    non_native, student = encoder.non_native, encoder.student
    if non_native.kind == "tower":
        tokenizer, lower_case = encoder.tower.tokenizer.tokenizer, encoder.tower.tokenizer.lower_case
    elif non_native.kind == "hf":
        tokenizer, lower_case = non_native.transformers_tokenizer, False
    else:
        raise ConfigError(
            "the student reads an mltk BPE vocabulary, which has no transformers tokenizer; export a "
            "student trained with the tower's own or a transformers tokenizer",
            checkpoint,
        )
    with torch.no_grad():
        words = encoder.embedding(torch.arange(non_native.vocab_size)[None])[0]  # [V, W] = table @ proj.T + b
        state = {k: v.detach() for k, v in student.transformer.state_dict().items()}
    model = encoder_with_words(base, words, state, tokenizer.pad_token_id)
    return HFTextModel(
        model,
        tokenizer.save_pretrained,
        student.pooling,
        student.context_length,
        lower_case,
        dense_layers(student.projection, checkpoint),
        student.normalizes_output,
        {
            "kind": "train-nlt --train full student",
            "languages": encoder.languages,
            "english": "mltk encodes English with the frozen base model, not this student",
        },
    )


def _from_grown_table(checkpoint: Path) -> HFTextModel:
    """A CLL-CLIP table over a text-only tower: the table as word embeddings, the grown WordPiece tokenizer."""
    from mltk.cll_clip.base import ContinualMethod
    from mltk.cll_clip.model import load_continual_encoder

    encoder = load_continual_encoder(checkpoint).eval()
    if encoder.clip is not None:
        raise ConfigError(
            "a CLL-CLIP model on a CLIP grows CLIP's BPE vocabulary, which open_clip's tokenizer "
            "cannot read (it loads only CLIP's own merges and pools at the largest token id) and no "
            "transformers tokenizer reproduces; mltk exports CLL-CLIP tables on a text-only Hugging "
            "Face tower",
            checkpoint,
        )
    method = encoder.method
    if type(method).encode is not ContinualMethod.encode:
        raise ConfigError(
            f"method {method.name} changes the tower's forward (adapters, LoRA or prompts), which a "
            f"plain transformers model cannot hold; only the table of cll-clip, oewc, er and der "
            f"exports",
            checkpoint,
        )
    base = Path(encoder.base.spec["model"])
    grown, tower = encoder.tokenizer, encoder.tower

    def write_tokenizer(out_dir: Path) -> None:
        tower.tokenizer.tokenizer.save_pretrained(out_dir)  # tokenizer_config.json, special tokens
        (out_dir / "tokenizer.json").write_text(json.dumps(grown.pipeline, ensure_ascii=False), encoding="utf-8")
        (out_dir / "vocab.txt").write_text("".join(token + "\n" for token in grown.tokens), encoding="utf-8")

    model = encoder_with_words(base, encoder.table.detach(), pad_token_id=grown.pad_token_id)
    return HFTextModel(
        model,
        write_tokenizer,
        tower.pooling,
        tower.context_length - method.reserved_positions,
        grown.lower_case,
        dense_layers(tower.projection, checkpoint),
        tower.normalizes_output,
        {
            "kind": "CLL-CLIP grown table",
            "languages": encoder.trained_languages,
            "vocab_size": encoder.vocab_size,
            "english": "the tasks' languages read the trained table; a text-only run in mltk encodes "
            "English with the frozen base model (the teacher)",
        },
    )
