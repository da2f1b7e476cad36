"""``translate-data`` with a transformers model: captions in, the same captions plus translations out.

Per target language the source captions are deduplicated into a *plan* (unique texts, sorted by length), the
plan is cut into shards, and each shard is filled from the translation cache first and from the model for the
rest. Finished shards are written into the artifact's partial directory (so an interrupted run continues where
it stopped) and their new translations into the cache (so a rerun, or another dataset sharing sentences,
translates nothing twice). The model is loaded only when something is left to translate.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from mltk import artifacts
from mltk.artifacts import schema
from mltk.core.errors import ConfigError
from mltk.core.runtime import Runtime, log, progress_bar, resolve_runtime
from mltk.translate import rows as R
from mltk.translate.cache import NoCache, TranslationCache, default_cache_dir
from mltk.translate.guards import GuardConfig, QualityReport
from mltk.translate.join import JoinConfig, join_translations
from mltk.translate.languages import (
    FAMILIES,
    check_language_code,
    detect_family,
    fill_model_name,
    is_local_model,
    model_language_code,
)
from mltk.translate.seq2seq import Seq2SeqTranslator, model_key
from mltk.translate.shards import ShardStore

DEFAULT_MODEL = "Helsinki-NLP/opus-mt-{src}-{tgt}"


@dataclass(frozen=True)
class TranslateConfig:
    """Everything ``translate_captions`` needs. ``model`` may hold ``{src}``/``{tgt}``, filled per target."""

    targets: tuple[str, ...]
    source_lang: str = "en"
    model: str = DEFAULT_MODEL
    family: str = "auto"
    beams: int = 4
    max_length: int = 128
    batch_size: int = 32
    shard_size: int = 1024
    sort_by_length: bool = True
    device: str = "auto"
    precision: str = "auto"
    cache_dir: str | None = None  # None: default_cache_dir()
    use_cache: bool = True
    drop_bad: bool = False
    guards: GuardConfig = field(default_factory=GuardConfig)
    captions: str | Path | None = None  # the captions artifact to translate (``translate_data``)
    out: str | Path | None = None  # the captions artifact to write (``translate_data``)


PATH_FIELDS = ("captions", "out")  # where translate-data reads and writes: not recorded among its settings


def translate_data(config: TranslateConfig | JoinConfig) -> Path:
    """``mltk translate-data``: the captions of ``config.captions`` plus their translations, written to
    ``config.out``; returns its path. A ``TranslateConfig`` runs a seq2seq model (``translate_captions``), a
    ``JoinConfig`` joins translations from files (``--backend join``, ``join_translations``)."""
    if config.captions is None or config.out is None:
        raise ConfigError(
            f"{type(config).__name__} needs captions (the artifact to translate) and out (the artifact to write)"
        )
    if isinstance(config, JoinConfig):
        return join_translations(config.captions, config.out, config)
    return translate_captions(config.captions, config.out, config)


ShardCallback = Callable[[str, int], None]  # (target, shard index), called after each shard is saved


def translate_captions(
    input_path: str | Path, out_dir: str | Path, config: TranslateConfig, *, on_shard: ShardCallback | None = None
) -> Path:
    """Translate the ``source_lang`` captions of a captions artifact into ``config.targets``; returns the path of
    the new captions artifact (input rows plus translated rows sharing ``caption_id``)."""
    config = validate_config(config)
    family = config.family if config.family != "auto" else detect_family(config.model)
    _check_models_exist(config, family)
    settings = artifacts.settings_without(config, *PATH_FIELDS)
    existing = artifacts.reusable(out_dir, "captions", stage="translate-data", config=settings, inputs=[input_path])
    if existing is not None:
        return existing
    table = R.with_origin_column(artifacts.load_captions(input_path))
    sources = R.source_row_indices(table, config.source_lang, input_path)
    runtime = resolve_runtime(config.device, config.precision)
    cache = _open_cache(config)
    models = _ModelSlot(config, family, runtime)
    try:
        with artifacts.ArtifactWriter(
            out_dir, "captions", stage="translate-data", config=settings, inputs=[input_path], resume=True
        ) as writer:
            plan = {"input": writer.manifest["inputs"][0]["fingerprint"], "config": _plan_fields(config, family)}
            store = ShardStore(writer.dir / "shards", plan)
            report = QualityReport(config.guards, config.drop_bad)
            parts, stats = _translate_all(table, sources, config, store, cache, models, report, on_shard)
            result = R.assemble(table, parts)
            artifacts.write_table(writer.dir / schema.CAPTIONS_FILE, artifacts.validate_captions(result, out_dir))
            store.remove()
            writer.manifest.update(
                rows=result.num_rows,
                languages=sorted(set(result.column("lang").to_pylist())),
                translation={
                    "backend": "seq2seq",
                    "family": family,
                    "source_lang": config.source_lang,
                    "cache": str(cache.path) if cache.path else None,
                    "by_language": stats,
                },
                quality=report.to_manifest(),
            )
    finally:
        cache.close()
        models.release()
    return writer.path


MAX_BEAMS = 64  # beam search keeps beams x batch hypotheses; the MT papers use 4 to 12


def validate_config(config: TranslateConfig) -> TranslateConfig:
    """Normalise language codes and reject impossible values with a ``ConfigError`` naming the option."""
    source = check_language_code(config.source_lang, "--source-lang")
    targets = tuple(dict.fromkeys(check_language_code(t, "--target") for t in config.targets))
    if not targets:
        raise ConfigError("no target language given (use --target de, repeatable or comma-separated)")
    if source in targets:
        raise ConfigError(f"--target {source} is the source language")
    if config.family not in FAMILIES:
        raise ConfigError(f"--family must be one of {', '.join(FAMILIES)}, got {config.family!r}")
    for option, value, most in (
        ("--beams", config.beams, MAX_BEAMS),
        ("--max-length", config.max_length, 4096),
        ("--batch-size", config.batch_size, 65536),
        ("--shard-size", config.shard_size, 10_000_000),
    ):
        if not 1 <= value <= most:  # the most: beyond it a typo costs the machine's memory, not a better result
            raise ConfigError(f"{option} must be between 1 and {most:,}, got {value}")
    if config.guards.max_length_ratio <= 0:
        raise ConfigError(f"--max-length-ratio must be positive, got {config.guards.max_length_ratio}")
    return replace(config, source_lang=source, targets=targets)


def _check_models_exist(config: TranslateConfig, family: str) -> None:
    """Fail on an unknown language code or a missing local model now, before any output or model loading."""
    model_language_code(family, config.source_lang)
    for target in config.targets:
        model_language_code(family, target)
        name = fill_model_name(config.model, config.source_lang, target)
        if is_local_model(name) and not Path(name).expanduser().is_dir():
            raise ConfigError("translation model directory not found", name)


def _plan_fields(config: TranslateConfig, family: str) -> dict:
    """What the shards depend on; a change in any of these discards finished shards."""
    return {
        "model": config.model,
        "family": family,
        "source_lang": config.source_lang,
        "beams": config.beams,
        "max_length": config.max_length,
        "shard_size": config.shard_size,
        "sort_by_length": config.sort_by_length,
    }


def _open_cache(config: TranslateConfig) -> TranslationCache | NoCache:
    if not config.use_cache:
        return NoCache()
    return TranslationCache(config.cache_dir or default_cache_dir())


def _translate_all(table, sources, config, store, cache, models, report, on_shard):
    """The translated rows of every target (guarded) and per-target statistics for the manifest."""
    texts = table.column("caption").to_pylist()
    caption_ids = table.column("caption_id").to_pylist()
    existing = R.existing_translations(table)
    needed = {t: [i for i in sources if (caption_ids[i], t) not in existing] for t in config.targets}
    plans = {t: make_plan([texts[i] for i in rows], config.sort_by_length) for t, rows in needed.items()}
    parts, stats = [], {}
    with progress_bar() as progress:
        task = progress.add_task("translate", total=sum(len(p) for p in plans.values()))
        for target in config.targets:
            name = fill_model_name(config.model, config.source_lang, target)
            translations, counts = _translate_plan(
                target, name, plans[target], config, store, cache, models, lambda n: progress.advance(task, n), on_shard
            )
            rows = needed[target]
            part = R.make_rows(
                table,
                rows,
                target,
                [translations[texts[i]] for i in rows],
                [caption_ids[i] for i in rows],
                origin=f"mt:{name}",
            )
            parts.append(R.guarded(report, part, [texts[i] for i in rows]))
            stats[target] = {
                "model": name,
                "rows": len(rows),
                "unique_sources": len(plans[target]),
                "kept_existing": len(sources) - len(rows),
                **counts,
            }
            log(
                f"{config.source_lang}->{target}: {len(rows)} rows, {len(plans[target])} unique: "
                f"{counts['translated']} translated, {counts['from_cache']} cached, {counts['resumed']} resumed"
            )
    return parts, stats


def make_plan(texts: Sequence[str], sort_by_length: bool = True) -> list[str]:
    """The unique texts, ordered by (character length, text) so each shard holds similar lengths (the translator
    then batches a shard by token count); first-occurrence order without sorting. Characters, not tokens, so the
    plan, and with it the shards of an interrupted run, is fixed before any model is loaded."""
    unique = list(dict.fromkeys(texts))
    return sorted(unique, key=lambda t: (len(t), t)) if sort_by_length else unique


def _translate_plan(target, name, plan, config, store, cache, models, advance, on_shard):
    """Fill ``plan`` shard by shard from finished shards, the cache and the model; returns text -> translation."""
    key = model_key(name, config.beams, config.max_length)
    translations: dict[str, str] = {}
    counts = {"translated": 0, "from_cache": 0, "resumed": 0}
    for index, start in enumerate(range(0, len(plan), config.shard_size)):
        chunk = plan[start : start + config.shard_size]
        finished = store.load(target, index, chunk)
        if finished is not None:
            translations.update(finished)
            counts["resumed"] += len(chunk)
            advance(len(chunk))
            continue
        cached = cache.lookup(key, config.source_lang, target, chunk)
        advance(len(cached))
        blank = {text: "" for text in chunk if not text.strip()}  # nothing to translate; the empty guard counts it
        missing = [text for text in chunk if text not in cached and text not in blank]
        new = {}
        if missing:
            translator = models.get(name, target)
            new = dict(
                zip(
                    missing,
                    translator.translate(
                        missing, target, config.batch_size, sort_by_length=config.sort_by_length, on_batch=advance
                    ),
                )
            )
        merged = {**cached, **blank, **new}
        store.write(target, index, chunk, [merged[text] for text in chunk])
        cache.store(key, config.source_lang, target, new)
        translations.update(merged)
        advance(len(blank))
        counts["translated"] += len(new)
        counts["from_cache"] += len(cached)
        if on_shard is not None:
            on_shard(target, index)
    return translations, counts


class _ModelSlot:
    """Holds at most one loaded model: M2M-100/NLLB serve every target from one load; per-pair Marian models
    replace each other, so memory holds one model at a time."""

    def __init__(self, config: TranslateConfig, family: str, runtime: Runtime):
        self.config = config
        self.family = family
        self.runtime = runtime
        self.translator: Seq2SeqTranslator | None = None
        self.shared_name = "{tgt}" not in config.model and len(config.targets) > 1

    def get(self, name: str, target: str) -> Seq2SeqTranslator:
        if self.translator is None or self.translator.name != name:
            self.release()
            log(f"loading {name} ({self.family}) on {self.runtime.device}, {self.runtime.precision}")
            self.translator = Seq2SeqTranslator(
                name,
                self.family,
                self.config.source_lang,
                self.runtime,
                beams=self.config.beams,
                max_length=self.config.max_length,
            )
        translator = self.translator
        if self.shared_name and not translator.multilingual:
            raise ConfigError(
                f"model {name} translates into one language only; put {{tgt}} in --model "
                "(e.g. Helsinki-NLP/opus-mt-{src}-{tgt}) or use an M2M-100/NLLB model"
            )
        if not translator.supports(target):
            raise ConfigError(f"model {name} cannot translate into {target!r}")
        return translator

    def release(self) -> None:
        if self.translator is not None:
            self.translator = None
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
