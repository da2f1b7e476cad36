"""The transformers backend: any seq2seq translation model by Hub name or local directory.

One ``Seq2SeqTranslator`` wraps one loaded model. M2M-100 and NLLB translate into every target with one model,
steered by forcing the target-language token as the first generated token; Marian/OPUS-MT needs one model per
pair (the name template ``{src}``/``{tgt}`` is filled per target), or a ``>>de<<`` prefix for its
multilingual-target models.

Batches are cut from texts sorted by token count so that padding, and the decoder steps spent waiting for the
longest output of a batch, stay small (``benchmarks/translate.py`` measures the gain).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from mltk.core.errors import ConfigError
from mltk.core.runtime import Runtime
from mltk.translate.languages import NLLB_CODES, is_local_model, model_language_code


def model_key(name: str, beams: int, max_length: int) -> str:
    """The cache key of a model and its decoding settings; a local directory adds a fingerprint of its files,
    so retraining a model in place does not serve stale translations."""
    key = name
    if is_local_model(name) and Path(name).expanduser().is_dir():
        path = Path(name).expanduser().resolve()
        key = f"{path}@{_directory_fingerprint(path)}"
    return f"{key}|beams={beams}|max_length={max_length}"


def _directory_fingerprint(path: Path) -> str:
    """Names, sizes and modification times of the files (retrained weights keep their size, not their mtime);
    cheap enough for multi-gigabyte models, unlike hashing their bytes."""
    digest = hashlib.sha256()
    for child in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = child.stat()
        digest.update(f"{child.relative_to(path)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def plan_batches(lengths: Sequence[int], batch_size: int, sort_by_length: bool = True) -> list[list[int]]:
    """Index batches: consecutive runs of the items ordered by ``lengths`` (stable) when ``sort_by_length``,
    else in the given order."""
    count = len(lengths)
    order = sorted(range(count), key=lambda i: (lengths[i], i)) if sort_by_length else list(range(count))
    return [order[start : start + batch_size] for start in range(0, count, batch_size)]


class Seq2SeqTranslator:
    """A loaded transformers seq2seq model translating ``source_lang`` captions into target languages."""

    def __init__(
        self, name: str, family: str, source_lang: str, runtime: Runtime, *, beams: int = 4, max_length: int = 128
    ):
        self.name = name
        self.family = family
        self.source_lang = source_lang
        self.runtime = runtime
        self.beams = beams
        self.max_length = max_length
        self.tokenizer, self.model = _load(name, runtime)
        if family in ("m2m100", "nllb"):
            self.tokenizer.src_lang = model_language_code(family, source_lang)
        self._language_token_ids = self._find_language_token_ids()

    def _find_language_token_ids(self) -> frozenset[int]:
        """Ids of M2M-100's ``__de__`` / NLLB's ``deu_Latn`` tokens. The forced target token must not reach the
        decoded text, and transformers 5's M2M100Tokenizer does not always register these tokens as special
        (then ``skip_special_tokens`` keeps them), so they are removed by id."""
        if self.family == "m2m100":
            return frozenset(getattr(self.tokenizer, "lang_token_to_id", {}).values())
        if self.family == "nllb":
            ids = self.tokenizer.convert_tokens_to_ids(sorted(set(NLLB_CODES.values())))
            return frozenset(i for i in ids if i != self.tokenizer.unk_token_id)
        return frozenset()

    @property
    def _marian_codes(self) -> list[str]:
        """The ``>>xx<<`` target tokens of a multilingual-target OPUS-MT model (empty for bilingual ones)."""
        return list(getattr(self.tokenizer, "supported_language_codes", None) or [])

    @property
    def multilingual(self) -> bool:
        """Whether one model serves several target languages."""
        return self.family in ("m2m100", "nllb") or bool(self._marian_codes)

    def supports(self, target: str) -> bool:
        """Whether this model can translate into ``target`` (a bilingual model is trusted to be the right one)."""
        if self.family == "m2m100":
            return target in getattr(self.tokenizer, "lang_code_to_id", {})
        if self.family == "nllb":
            code = model_language_code("nllb", target)
            return self.tokenizer.convert_tokens_to_ids(code) != self.tokenizer.unk_token_id
        return not self._marian_codes or f">>{target}<<" in self._marian_codes

    def _marian_prefix(self, target: str) -> str:
        """``>>de<< `` for multilingual-target OPUS-MT models, nothing for bilingual ones."""
        return f">>{target}<< " if self._marian_codes else ""

    def _forced_bos(self, target: str) -> dict:
        if self.family == "m2m100":
            return {"forced_bos_token_id": self.tokenizer.get_lang_id(target)}
        if self.family == "nllb":
            return {"forced_bos_token_id": self.tokenizer.convert_tokens_to_ids(model_language_code("nllb", target))}
        return {}

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        encoded = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        return [len(ids) for ids in encoded["input_ids"]]

    @torch.inference_mode()
    def translate_batch(self, texts: Sequence[str], target: str) -> list[str]:
        """Translate one batch (beam search, at most ``max_length`` tokens in and out)."""
        prefix = self._marian_prefix(target) if self.family == "marian" else ""
        encoded = self.tokenizer(
            [prefix + t for t in texts], return_tensors="pt", padding=True, truncation=True, max_length=self.max_length
        ).to(self.runtime.device)
        with self.runtime.autocast():
            generated = self.model.generate(
                **encoded,
                num_beams=self.beams,
                max_new_tokens=self.max_length,
                do_sample=False,
                **self._forced_bos(target),
            )
        sequences = [[i for i in row if i not in self._language_token_ids] for row in generated.tolist()]
        return [text.strip() for text in self.tokenizer.batch_decode(sequences, skip_special_tokens=True)]

    def translate(
        self,
        texts: Sequence[str],
        target: str,
        batch_size: int,
        *,
        sort_by_length: bool = True,
        on_batch: Callable[[int], None] | None = None,
    ) -> list[str]:
        """Translate ``texts`` in batches (of similar token counts with ``sort_by_length``; tokenizing twice costs
        far less than decoding padding); the result is in the order of ``texts``."""
        lengths = self.token_lengths(texts) if sort_by_length else [0] * len(texts)
        results: list[str] = [""] * len(texts)
        for indices in plan_batches(lengths, batch_size, sort_by_length):
            for index, translation in zip(indices, self.translate_batch([texts[i] for i in indices], target)):
                results[index] = translation
            if on_batch is not None:
                on_batch(len(indices))
        return results


def _load(name: str, runtime: Runtime):
    """Tokenizer and model in eval mode on the runtime's device; a model that cannot be found is a
    ``ConfigError`` naming it (no traceback for a typo)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from mltk.models.hub import from_pretrained

    if is_local_model(name) and not Path(name).expanduser().is_dir():
        raise ConfigError("translation model directory not found", name)
    source = str(Path(name).expanduser()) if is_local_model(name) else name
    try:
        tokenizer = from_pretrained(AutoTokenizer, source)
        model = from_pretrained(AutoModelForSeq2SeqLM, source)
    except (OSError, ValueError, KeyError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"cannot load translation model {name} ({first_line})") from exc
    return tokenizer, model.eval().to(runtime.device)
