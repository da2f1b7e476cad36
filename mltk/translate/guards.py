"""Quality guards for machine-translated captions.

Neural MT fails in a few recognisable ways that poison translate-train data: it returns nothing, it
hallucinates far past the source (over-long output), it copies the source untranslated, or it falls into a
repetition loop ("a dog a dog a dog a dog ..."), the classic degenerate beam-search output (Holtzman et al.,
2020, "The Curious Case of Neural Text Degeneration"). Each guard is a pure function of the source and its
translation; ``check`` runs all of them and ``QualityReport`` counts the verdicts for the manifest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

GUARD_NAMES = ("empty", "too_long", "identical", "repetition")


@dataclass(frozen=True)
class GuardConfig:
    """Thresholds of the guards.

    ``max_length_ratio``: a translation longer than ``max_length_ratio * max(len(source), min_source_chars)``
    characters is over-long (the floor keeps "Dogs." -> "Zwei Hunde spielen." from tripping it).
    ``min_repeats``/``max_ngram``: an n-gram (n <= max_ngram tokens) repeated ``min_repeats`` times in a row is a
    loop.
    """

    max_length_ratio: float = 3.0
    min_source_chars: int = 10
    min_repeats: int = 4
    max_ngram: int = 4


def is_empty(translation: str) -> bool:
    return not translation.strip()


def is_too_long(source: str, translation: str, config: GuardConfig = GuardConfig()) -> bool:
    """len(translation) > max_length_ratio * max(len(source), min_source_chars), in characters."""
    return len(translation.strip()) > config.max_length_ratio * max(len(source.strip()), config.min_source_chars)


def _normalize(text: str) -> str:
    return " ".join(text.casefold().split())


def is_identical(source: str, translation: str) -> bool:
    """The translation equals the source up to case and whitespace (the model copied it untranslated)."""
    normalized = _normalize(translation)
    return bool(normalized) and normalized == _normalize(source)


def _tokens(text: str) -> list[str]:
    """Words; characters for text written without spaces (Chinese, Japanese, Thai)."""
    words = text.split()
    return words if len(words) > 1 else list("".join(words))


def has_repetition_loop(translation: str, config: GuardConfig = GuardConfig()) -> bool:
    """Whether some n-gram (1 <= n <= max_ngram tokens) occurs ``min_repeats`` times back to back.

    A block of k consecutive copies of an n-gram starting at i is the same as tokens[j] == tokens[j + n] for the
    n * (k - 1) positions j = i .. i + n(k-1) - 1, so one pass per n counting runs of such matches suffices:
    O(len * max_ngram).
    """
    tokens = _tokens(translation)
    for n in range(1, config.max_ngram + 1):
        needed = n * (config.min_repeats - 1)
        run = 0
        for j in range(len(tokens) - n):
            run = run + 1 if tokens[j] == tokens[j + n] else 0
            if run >= needed:
                return True
    return False


def check(source: str | None, translation: str, config: GuardConfig = GuardConfig()) -> tuple[str, ...]:
    """The names of the guards ``translation`` fails; ``source`` None skips the guards that compare with it."""
    failed = []
    if is_empty(translation):
        failed.append("empty")
    if source is not None and is_too_long(source, translation, config):
        failed.append("too_long")
    if source is not None and is_identical(source, translation):
        failed.append("identical")
    if has_repetition_loop(translation, config):
        failed.append("repetition")
    return tuple(failed)


@dataclass
class QualityReport:
    """Counts per target language: rows checked, rows failing each guard, rows flagged (any guard), dropped."""

    config: GuardConfig
    drop_bad: bool
    by_language: dict[str, dict[str, int]] = field(default_factory=dict)

    def check_rows(self, lang: str, sources: Iterable[str | None], translations: Iterable[str]) -> list[bool]:
        """Check one language's rows; returns a keep-mask (all True unless ``drop_bad``)."""
        counts = self.by_language.setdefault(
            lang, {"rows": 0, **dict.fromkeys(GUARD_NAMES, 0), "flagged": 0, "dropped": 0}
        )
        verdicts: dict[tuple[str | None, str], tuple[str, ...]] = {}
        keep = []
        for source, translation in zip(sources, translations):
            key = (source, translation)
            if key not in verdicts:
                verdicts[key] = check(source, translation, self.config)
            failed = verdicts[key]
            counts["rows"] += 1
            for name in failed:
                counts[name] += 1
            counts["flagged"] += bool(failed)
            drop = bool(failed) and self.drop_bad
            counts["dropped"] += drop
            keep.append(not drop)
        return keep

    def to_manifest(self) -> dict:
        total = {
            name: sum(c[name] for c in self.by_language.values())
            for name in ("rows", *GUARD_NAMES, "flagged", "dropped")
        }
        return {"guards": self.config, "drop_bad": self.drop_bad, "total": total, "by_language": self.by_language}
