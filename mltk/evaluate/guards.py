"""Embeddings that would give silently wrong metrics: refused with one line naming the file, or, with ``--force``,
scored and recorded (``metrics.json`` ``warnings``, one line each, also on stderr).

Checked on every set of vectors ``mltk evaluate`` scores, in chunks of ``CHUNK_ROWS`` rows (one float32 chunk
at a time; the whole array is copied only when ``--force`` must repair non-finite rows):

- **non-finite values** (NaN, inf; e.g. float16 overflow): with ``--force`` those rows are scored as zero vectors
  (they tie with every candidate, so under the pessimistic tie rule they rank last);
- **all-zero rows** (no direction: every score 0, every ground truth tied);
- **rows that are not unit length** (``|norm - 1| > UNIT_TOLERANCE``) where the manifest says ``normalized:
  true``: the dot product is then not the cosine the metrics claim; with ``--force`` scored as given;
- **constant embeddings**: every row the same vector (within ``CONSTANT_TOLERANCE``), a collapsed encoder;
- **a model mismatch**: image and text embeddings made by different models (their manifests name the model;
  ``mltk.models.preflight.check_image_embeddings`` decides what "the same" is).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mltk import artifacts
from mltk.core.errors import ArtifactError, ConfigError
from mltk.core.runtime import log
from mltk.models.preflight import check_image_embeddings

CHUNK_ROWS = 65536
UNIT_TOLERANCE = 1e-2  # float16 storage alone moves a unit norm by ~1e-3
CONSTANT_TOLERANCE = 1e-6
FORCE_HINT = "; --force scores it anyway and records a warning"


@dataclass
class Guard:
    """Refuses (``force=False``) or records (``force=True``) each problem found."""

    force: bool = False
    warnings: list[str] = field(default_factory=list)

    def problem(self, message: str, source: str | Path) -> None:
        if not self.force:
            raise ArtifactError(message + FORCE_HINT, source)
        line = f"{source}: {message}"
        log(f"warning (--force): {line}")
        self.warnings.append(line)


@dataclass
class _Scan:
    rows: int = 0
    non_finite: list[np.ndarray] = field(default_factory=list)  # row indices, per chunk
    zero: int = 0
    non_unit: int = 0
    norm_range: tuple[float, float] = (np.inf, -np.inf)
    constant: bool = True


def _scan(vectors: np.ndarray) -> _Scan:
    """One chunked pass: non-finite rows, zero rows, norms of the other rows, whether every row equals the first."""
    scan = _Scan(rows=len(vectors))
    first = np.asarray(vectors[:1], dtype=np.float32)
    for start in range(0, len(vectors), CHUNK_ROWS):
        block = np.asarray(vectors[start : start + CHUNK_ROWS], dtype=np.float32)  # [c, d]
        squares = np.einsum("ij,ij->i", block, block)  # [c], NaN/inf where not finite
        finite = np.isfinite(squares)
        if not finite.all():
            finite = np.isfinite(block).all(axis=1)
            scan.non_finite.append(start + np.flatnonzero(~finite))
            squares = np.where(finite, squares, 0)
        norms = np.sqrt(squares)
        zero = finite & (norms == 0)
        scan.zero += int(zero.sum())
        other = norms[finite & ~zero]
        if len(other):
            scan.non_unit += int((np.abs(other - 1) > UNIT_TOLERANCE).sum())
            scan.norm_range = (min(scan.norm_range[0], float(other.min())), max(scan.norm_range[1], float(other.max())))
        if scan.constant:  # a few rows first: on real embeddings the second row already differs
            scan.constant = all(bool(np.all(np.abs(rows - first) <= CONSTANT_TOLERANCE)) for rows in (block[:8], block))
    return scan


def check_vectors(vectors: np.ndarray, source: str | Path, guard: Guard, *, unit_expected: bool) -> np.ndarray:
    """``vectors`` [N, d] checked (see the module docstring); returns them, with non-finite rows set to zero when
    ``guard.force`` lets them through. ``unit_expected``: the manifest says ``normalized: true``."""
    scan = _scan(vectors)
    if scan.non_finite:
        rows = np.concatenate(scan.non_finite)
        guard.problem(
            f"{len(rows)} of {scan.rows} vector(s) hold NaN or infinite values (first row {rows[0]}; a "
            "float16 overflow?); with --force they are scored as zero vectors",
            source,
        )
        vectors = np.array(vectors, dtype=np.float32)
        vectors[rows] = 0
    if scan.zero:
        guard.problem(f"{scan.zero} of {scan.rows} vector(s) are all zero (every score 0: no ranking)", source)
    if unit_expected and scan.non_unit:
        low, high = scan.norm_range
        guard.problem(
            f"{scan.non_unit} of {scan.rows} vector(s) are not unit length (norms {low:.4g} to {high:.4g}) "
            "although the manifest says normalized: true",
            source,
        )
    if scan.constant and scan.rows > 1 and scan.zero < scan.rows and not scan.non_finite:
        guard.problem(f"all {scan.rows} vectors are the same (a collapsed encoder?): every score ties", source)
    return vectors


def text_embeddings_model(texts: Path) -> tuple[str | None, str | None]:
    """The model (and pretrained tag) that ``encode-texts`` recorded in a text embeddings artifact, else Nones."""
    created = artifacts.read_manifest(texts, "embeddings").get("created_by") or {}
    config = created.get("config") if created.get("stage") == "encode-texts" else None
    if not isinstance(config, dict) or not config.get("model"):
        return None, None
    return str(config["model"]), config.get("pretrained")


def check_same_model(
    images: Path | None, model: str | None, pretrained: str | None, guard: Guard, texts: Path | None = None
) -> None:
    """Image embeddings must come from the CLIP the text side is built on: ``model`` (the encoder of
    ``--captions``) or the model recorded in the ``texts`` artifact. A recorded model path that no longer exists
    cannot be compared and is passed over."""
    if texts is not None:
        model, pretrained = text_embeddings_model(texts)
        if model is None or (not Path(model).exists() and ("/" in model or model.startswith("."))):
            return
    try:
        check_image_embeddings(images, model, pretrained)
    except ConfigError as exc:
        message = str(exc).removeprefix(f"{exc.path}: ") if exc.path else str(exc)
        by = f"the text embeddings {texts} (encoded by {model})" if texts is not None else f"--model {model}"
        guard.problem(f"made by another model than {by}: {message}", images)
