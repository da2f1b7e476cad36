"""Zero-shot image classification in every language (``mltk classify``), MLA's test of open-domain ability.

Zhang et al. (MLA, arXiv:2206.11091, appendix) classify CIFAR-100 and ImageNet variants zero-shot to show that
language acquirers keep the native CLIP's ability (English bypasses them) while a full fine-tune of the text tower
(multilingual knowledge distillation) loses some. The protocol is CLIP's (Radford et al. 2021, section 3.1.4):
each class name is put into several prompt templates; the class vector is the mean of the L2-normalised prompt
embeddings, normalised again (the "ensemble"); an image is assigned the class of highest
similarity: cosine, or order similarity for a checkpoint trained with it (``mltk.evaluate.scorer``).

    class_c = normalize(mean_t normalize(f_text(template_t(name_c))))        # [C, D]
    predicted(image) = argmax_c <normalize(f_image(image)), class_c>

top-k accuracy counts an image when its true class is among the k best. Ties are counted against the image: the
rank of the true class is the number of other classes scoring at least as high, so constant embeddings score
chance or less, never 100.

A task (``ClassTask``) is a set of classes with names and prompts per language, and the true class of each image.
Two sources:

- a synthetic world (its images artifact, or the world directory): the classes are the 64 (colour, shape) pairs,
  the images those of one split whose objects all share one colour and shape, and the prompts the world's own
  sentence frames in each language ("A picture of a red circle.", "Ein Bild von einem roten Kreis."), so every
  language is grammatical without a template language of its own;
- a JSON file ``{"classes": {ID: {LANG: NAME}}, "templates": {LANG: ["a photo of a {}.", ...]},
  "labels": {IMAGE_ID: ID}}`` for real data (CIFAR-100 with translated class names, say).
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import torch

from mltk import artifacts
from mltk.core.errors import ConfigError, SchemaError
from mltk.core.runtime import log, resolve_runtime
from mltk.core.user_files import expect, read_user_json
from mltk.data import lang as world_lang
from mltk.data.lang.content import COLOURS, N_FRAMES, SHAPES, CaptionContent, Mention

DEFAULT_KS = (1, 5)


@dataclass(frozen=True)
class ClassTask:
    """Classes with their prompts per language (``prompts[lang][class_id]`` -> prompt texts) and the true class of
    each image (``labels``: image id -> class id)."""

    class_ids: tuple[str, ...]
    prompts: dict[str, dict[str, tuple[str, ...]]]
    labels: dict[str, str]
    source: str = ""

    @property
    def languages(self) -> tuple[str, ...]:
        return tuple(self.prompts)


@dataclass(frozen=True)
class ClassifyConfig:
    """Everything ``mltk classify`` needs."""

    images: Path  # image embeddings artifact (mltk encode-images)
    classes: Path  # a synthetic world / its images artifact, or a task JSON file
    model: str  # the text side: any model ``mltk evaluate --model`` reads
    out: Path
    pretrained: str | None = None
    languages: tuple[str, ...] = ()  # default: every language of the task the model reads
    split: str = "test"  # the split of a synthetic world's images
    ks: tuple[int, ...] = DEFAULT_KS
    device: str = "auto"
    precision: str = "auto"
    batch_size: int = 256


# --- the computation ----------------------------------------------------------------------------------------------


def class_vectors(prompt_vectors: list[np.ndarray]) -> np.ndarray:
    """CLIP's prompt ensemble: per class, the mean of its L2-normalised prompt vectors ([T_c, D] each), normalised
    again -> [C, D]."""
    rows = []
    for vectors in prompt_vectors:
        unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        mean = unit.mean(axis=0)
        rows.append(mean / max(float(np.linalg.norm(mean)), 1e-12))
    return np.stack(rows).astype(np.float32)


def true_class_ranks(
    image_vectors: np.ndarray, labels: np.ndarray, classes: np.ndarray, similarity: str = "cosine"
) -> np.ndarray:
    """0-based rank of each image's true class ([N] int): how many other classes score at least as high, by the
    similarity the model trained with (cosine, or order violation with the image specific and the class general,
    as evaluate ranks captions).

    ``image_vectors`` [N, D] and ``classes`` [C, D] L2-normalised; ``labels`` [N] class row indices."""
    from mltk.losses.ranking import ranking_scores

    images = torch.from_numpy(np.ascontiguousarray(image_vectors, dtype=np.float32))
    scores = ranking_scores(
        images, torch.from_numpy(np.ascontiguousarray(classes, dtype=np.float32)), similarity
    )  # [N, C]
    truth = scores[torch.arange(len(labels)), torch.from_numpy(labels)]  # [N]
    at_least = (scores >= truth[:, None]).sum(dim=1) - 1  # ties count against the image (pessimistic)
    return at_least.numpy()


def top_k_accuracy(ranks: np.ndarray, ks: tuple[int, ...] = DEFAULT_KS) -> dict[str, float]:
    """``{"top1": %, "top5": %}`` from 0-based ranks."""
    return {f"top{k}": float(100.0 * np.mean(ranks < k)) for k in ks}


# --- tasks ------------------------------------------------------------------------------------------------------


def world_task(images_path: Path, languages: tuple[str, ...], split: str = "test") -> ClassTask:
    """The (colour, shape) classes of a synthetic world's ``split`` images whose objects all share one colour and
    shape; prompts are the world's sentence frames around "a COLOUR SHAPE" in each language."""
    table = artifacts.load_images(images_path)
    if "scene" not in table.column_names:
        raise SchemaError(
            "has no scene column: not the images of a synthetic world (give a task JSON file)", images_path
        )
    rows = table.filter(pc.equal(table.column("split"), split))
    labels = {}
    for image_id, scene in zip(rows.column("image_id").to_pylist(), rows.column("scene").to_pylist()):
        kinds = {(obj["colour"], obj["shape"]) for obj in json.loads(scene)}
        if len(kinds) == 1:
            colour, shape = kinds.pop()
            labels[image_id] = f"{colour}_{shape}"
    if not labels:
        raise ConfigError(f"no {split!r} image of the world shows objects of one colour and shape", images_path)
    class_ids = tuple(f"{colour}_{shape}" for colour in COLOURS for shape in SHAPES)
    prompts = {code: {cid: _world_prompts(cid, code) for cid in class_ids} for code in languages}
    return ClassTask(class_ids, prompts, labels, str(images_path))


def _world_prompts(class_id: str, code: str) -> tuple[str, ...]:
    colour, shape = class_id.split("_", 1)
    mention = Mention(shape=shape, colour=colour)
    return tuple(world_lang.render(CaptionContent(items=(mention,), frame=frame), code) for frame in range(N_FRAMES))


TASK_FILE = "zero-shot task file"
MAX_TASK_BYTES = 64 * 1024 * 1024  # ImageNet's 50,000 labels and 1,000 classes in 20 languages are a few MB
MAX_CLASSES = 100_000
MAX_TEMPLATES = 1_000  # per language; CLIP's ImageNet ensemble has 80
MAX_TEXT = 1_000  # characters of a class name or template


def file_task(path: Path) -> ClassTask:
    """A task from a JSON file (see the module docstring); every class needs a name in every language that has
    templates, every template exactly one ``{}``, every label a known class. A bad field is refused naming the
    file, the key and what was expected."""
    spec = read_user_json(path, what=TASK_FILE, max_bytes=MAX_TASK_BYTES)
    expect(spec, dict, "(top level)", path, what=TASK_FILE)
    for key in ("classes", "templates", "labels"):
        if key not in spec:
            raise SchemaError(
                f"not a zero-shot task file: it lacks '{key}' (expected 'classes', 'templates' and 'labels')", path
            )
        if not expect(spec[key], dict, key, path, what=TASK_FILE):
            raise SchemaError(f"{TASK_FILE} key {key!r} is empty; it must name at least one entry", path)
    names, templates, labels = spec["classes"], spec["templates"], spec["labels"]
    if len(names) > MAX_CLASSES:
        raise SchemaError(f"{TASK_FILE} names {len(names):,} classes, over the limit of {MAX_CLASSES:,}", path)
    prompts = {}
    for code, forms in templates.items():
        forms = _templates(forms, f"templates.{code}", path)
        by_class = {}
        for cid, by_lang in names.items():
            expect(by_lang, dict, f"classes.{cid}", path, what=TASK_FILE)
            if code not in by_lang:
                missing = sum(1 for other in names.values() if not isinstance(other, dict) or code not in other)
                raise SchemaError(f"class {cid!r} has no {code} name ({missing} classes miss one)", path)
            name = _text(by_lang[code], f"classes.{cid}.{code}", path)
            by_class[cid] = tuple(form.format(name) for form in forms)
        prompts[code] = by_class
    for image_id, cid in labels.items():
        expect(cid, str, f"labels.{image_id}", path, what=TASK_FILE)
    unknown = sorted({cid for cid in labels.values() if cid not in names})
    if unknown:
        raise SchemaError(f"labels name unknown class(es) {', '.join(map(str, unknown[:3]))}", path)
    return ClassTask(tuple(names), prompts, dict(labels), str(path))


def _text(value, key: str, path: Path) -> str:
    """A non-empty, bounded string at ``key``."""
    expect(value, str, key, path, what=TASK_FILE)
    if not value.strip() or len(value) > MAX_TEXT:
        raise SchemaError(
            f"{TASK_FILE} key {key!r} must be a non-empty string of at most {MAX_TEXT} characters, "
            f"not {json.dumps(value)[:60]}",
            path,
        )
    return value


def _templates(forms, key: str, path: Path) -> list[str]:
    """A non-empty list of templates, each with exactly one ``{}`` and nothing else ``str.format`` would read: a
    ``{{}}`` (a literal brace pair, no slot), ``{} {}`` or ``{x}`` would format to something else than one name in
    one place, or fail."""
    expect(forms, list, key, path, what=TASK_FILE)
    if not forms or len(forms) > MAX_TEMPLATES:
        raise SchemaError(f"{TASK_FILE} key {key!r} must list 1 to {MAX_TEMPLATES} templates, not {len(forms)}", path)
    for number, form in enumerate(forms):
        _text(form, f"{key}[{number}]", path)
        try:
            fields = [
                (name, spec, conversion)
                for _, name, spec, conversion in string.Formatter().parse(form)
                if name is not None
            ]
        except ValueError as error:
            fields = [("?", str(error), None)]
        if fields != [("", "", None)]:
            raise SchemaError(
                f"{TASK_FILE} key '{key}[{number}]' must be a template holding exactly one '{{}}' "
                f"and no other braces (write '{{{{' for a literal brace), not {json.dumps(form)[:60]}",
                path,
            )
    return forms


def load_task(source: Path, languages: tuple[str, ...], split: str) -> ClassTask:
    """A synthetic world directory, its images artifact, or a task JSON file."""
    from mltk.data.synth import WORLD_FILE, load_world

    if source.is_file():
        return file_task(source)
    if (source / WORLD_FILE).is_file():
        source = load_world(source).images_path
    if not artifacts.is_artifact(source):
        raise ConfigError("is neither a synthetic world, an images artifact nor a task JSON file", source)
    made_with = (artifacts.read_manifest(source).get("created_by") or {}).get("config") or {}
    default = made_with.get("langs") if isinstance(made_with, dict) else None  # the world's caption languages
    codes = tuple(code for code in (languages or default or world_lang.LANGUAGE_CODES) if code in world_lang.LANGUAGES)
    return world_task(source, codes, split)


# --- the stage --------------------------------------------------------------------------------------------------


def classify(config: ClassifyConfig) -> Path:
    """``mltk classify``: top-k zero-shot accuracy per language; writes a metrics artifact and returns its path."""
    from mltk.encode.text_encoders import load_model_encoder, readable_languages
    from mltk.evaluate.scorer import model_similarity
    from mltk.evaluate.stage import load_normalized_embeddings

    inputs = [config.images, config.classes, *([Path(config.model)] if Path(config.model).exists() else [])]
    existing = artifacts.reusable(config.out, "metrics", stage="classify", config=config, inputs=inputs)
    if existing is not None:
        return existing
    task = load_task(Path(config.classes), config.languages, config.split)
    missing = [code for code in config.languages if code not in task.prompts]
    if missing:
        raise ConfigError(f"the task has no class names in {', '.join(missing)}", config.classes)
    image_table, image_vectors = load_normalized_embeddings(config.images)
    rows, labels = _labelled_rows(image_table, task, config)
    runtime = resolve_runtime(config.device, config.precision)
    encoder = load_model_encoder(config.model, config.pretrained, runtime.device)
    languages = readable_languages(encoder, config.languages, task.languages, config.model)
    similarity = model_similarity(config.model)  # the scorer travels with the model, as in evaluate
    results = {}
    for code in languages:
        classes = _encode_classes(encoder, task, code, runtime, config.batch_size)
        results[code] = {
            **top_k_accuracy(true_class_ranks(image_vectors[rows], labels, classes, similarity), config.ks),
            "images": int(len(rows)),
            "classes": len(task.class_ids),
        }
        log(
            f"classify {code}: "
            + "  ".join(f"{k} {v:.1f}" for k, v in results[code].items() if k.startswith("top"))
            + f"  ({len(rows)} images, {len(task.class_ids)} classes)"
        )
    metrics = {
        "zero_shot": results,
        "settings": {
            "model": config.model,
            "task": task.source,
            "split": config.split,
            "similarity": similarity,
            "ensemble": "mean of normalised prompt vectors",
            "ties": "counted against the image (pessimistic rank)",
        },
    }
    return artifacts.write_metrics(config.out, metrics, stage="classify", config=config, inputs=inputs)


def _labelled_rows(image_table, task: ClassTask, config: ClassifyConfig) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the labelled images in the embeddings, and their class indices."""
    index_of = {cid: i for i, cid in enumerate(task.class_ids)}
    ids = image_table.column("id").to_pylist()
    rows = [row for row, image_id in enumerate(ids) if image_id in task.labels]
    if not rows:
        raise ConfigError(f"none of the {len(task.labels)} labelled images is in the image embeddings", config.images)
    labels = np.array([index_of[task.labels[ids[row]]] for row in rows], dtype=np.int64)
    return np.array(rows, dtype=np.int64), labels


def _encode_classes(encoder, task: ClassTask, code: str, runtime, batch_size: int) -> np.ndarray:
    from mltk.encode.texts import encode_texts

    per_class = [task.prompts[code][cid] for cid in task.class_ids]
    flat = [prompt for prompts in per_class for prompt in prompts]
    vectors = encode_texts(encoder, flat, code, runtime, batch_size, description=f"class prompts {code}")
    bounds = np.cumsum([0] + [len(p) for p in per_class])
    return class_vectors([vectors[bounds[i] : bounds[i + 1]] for i in range(len(per_class))])
