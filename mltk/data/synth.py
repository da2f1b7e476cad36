"""The embedded synthetic world: images of simple scenes with parallel captions in ten languages.

A scene holds 1 to 3 objects (8 shapes x 8 colours x 2 sizes) on a 3 x 3 grid of cells, so that "left of" and
"above" have crisp truth values; sometimes two or three objects share shape and colour so that captions can count
("two red circles"). Images get a tinted, textured background, per-object jitter of position, rotation, size
and colour, and pixel noise, so two scenes with the same content never give the same pixels.

Each image gets ``translated_per_image`` captions (``kind`` "translation") plus ``independent_per_image``
captions (``kind`` "independent") that mention a different subset of the scene when the scene allows it. Each
caption content is sampled once (which objects, which attributes, which relation, which sentence frame) and
rendered in every language, so the renderings share one ``caption_id``. A caption names 1..all objects, usually
by colour and shape, sometimes by size or relation, so English retrieval is good but not perfect.

Translations are exact unless ``mt_errors`` gives error rates per language: then a train-split rendering in such
a language is, at that rate, rendered from a content with one machine-translation error (``mltk.data.mt_errors``),
and the captions table gains an ``mt_error`` column (the error's name, empty for exact captions).

Determinism: image ``index`` of split ``s`` draws everything from ``numpy.random.default_rng([seed, s, index])``,
so the same seed gives byte-identical tables, and changing the size of one split changes no image of another
split and no earlier image of the same split.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from mltk import artifacts
from mltk.core.errors import ArtifactError, ConfigError
from mltk.core.runtime import log, track
from mltk.data import lang, mt_errors
from mltk.data.lang.content import (
    COLOURS,
    INVERSE_RELATION,
    N_FRAMES,
    SHAPES,
    SIZES,
    CaptionContent,
    Item,
    Mention,
    Relation,
)
from mltk.data.render import GRID, encode_png, render_scene
from mltk.data.scene import Scene, SceneObject

SPLITS = ("train", "val", "test")
WORLD_FILE = "world.json"
IMAGES_DIR, CAPTIONS_DIR = "images", "captions"

# Caption sampling probabilities.
P_NAME_COLOUR = 0.95
P_NAME_SIZE = 0.75
P_RELATION = 0.4
P_MENTION_ALL = 0.8  # a caption names every object group; otherwise a random non-empty subset
N_OBJECTS_WEIGHTS = (0.3, 0.35, 0.35)  # 1, 2, 3 objects
P_GROUP = 0.2  # a scene with >= 2 objects repeats one shape+colour (so captions can count)


MAX_IMAGES = 1_000_000  # a synthetic world is a test bed: a million 64-pixel images is a few GB already
MAX_CAPTIONS_PER_IMAGE = 100


@dataclass(frozen=True)
class SynthConfig:
    """Everything that determines the world. ``langs`` is a tuple of codes from ``mltk.data.lang``."""

    seed: int = 0
    train: int = 2000
    val: int = 250
    test: int = 250
    image_size: int = 64
    langs: tuple[str, ...] = lang.LANGUAGE_CODES
    translated_per_image: int = 2
    independent_per_image: int = 1
    mt_errors: tuple[tuple[str, float], ...] | str = ()  # ((lang, rate), ...), or "0.2" / "de=0.1,zh=0.3"
    out: str | Path | None = None  # the world folder ``synth_data`` writes; where it is, not what it holds

    def __post_init__(self) -> None:
        for name in ("train", "val", "test", "translated_per_image", "independent_per_image"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.train + self.val + self.test > MAX_IMAGES:  # a typo would fill the disk image by image
            raise ConfigError(
                f"--train + --val + --test is {self.train + self.val + self.test:,} images, over the "
                f"most a synthetic world holds ({MAX_IMAGES:,})"
            )
        per_image = self.translated_per_image + self.independent_per_image
        if per_image > MAX_CAPTIONS_PER_IMAGE:
            raise ConfigError(
                f"--translated + --independent is {per_image} captions per image, over the most "
                f"({MAX_CAPTIONS_PER_IMAGE})"
            )
        if self.train + self.val + self.test == 0:
            raise ConfigError("the world needs at least one image (--train/--val/--test are all 0)")
        if self.translated_per_image + self.independent_per_image == 0:
            raise ConfigError("every image needs at least one caption")
        if not 32 <= self.image_size <= 1024:
            raise ConfigError(f"--size must be between 32 and 1024 pixels, got {self.image_size}")
        if not 0 <= self.seed < 2**63:
            raise ConfigError(f"--seed must be a non-negative integer, got {self.seed}")
        object.__setattr__(self, "langs", lang.parse_languages(self.langs))
        object.__setattr__(self, "mt_errors", mt_errors.parse_error_rates(self.mt_errors, self.langs))

    def split_sizes(self) -> dict[str, int]:
        return {"train": self.train, "val": self.val, "test": self.test}


@dataclass(frozen=True)
class SynthResult:
    """Where a world lives: the world directory and its two artifacts."""

    path: Path
    images_path: Path
    captions_path: Path
    n_images: int = 0
    n_captions: int = 0


# ----------------------------------------------------------------------------------------------------------------
# Scenes
# ----------------------------------------------------------------------------------------------------------------


def sample_scene(rng: np.random.Generator) -> Scene:
    """1 to 3 objects in distinct cells; distinct (shape, colour) unless a deliberate group of 2 or 3."""
    n_objects = int(rng.choice(3, p=N_OBJECTS_WEIGHTS)) + 1
    cells = rng.choice(GRID * GRID, size=n_objects, replace=False)
    kinds: list[tuple[str, str]] = []
    group_size = 0
    if n_objects >= 2 and rng.random() < P_GROUP:
        group_size = 3 if n_objects == 3 and rng.random() < 0.3 else 2
    while len(kinds) < n_objects:
        kind = (SHAPES[rng.integers(len(SHAPES))], COLOURS[rng.integers(len(COLOURS))])
        if kind in kinds:
            continue
        kinds.extend([kind] * (group_size if not kinds and group_size else 1))
    order = rng.permutation(n_objects)  # the group should not always come first
    objects = tuple(
        SceneObject(kinds[k][0], kinds[k][1], SIZES[rng.integers(len(SIZES))], divmod(int(cells[i]), GRID))
        for i, k in enumerate(order)
    )
    return Scene(objects)


# ----------------------------------------------------------------------------------------------------------------
# Caption contents
# ----------------------------------------------------------------------------------------------------------------


def _true_relations(a: SceneObject, b: SceneObject) -> list[str]:
    """Relations "a REL b" that hold on the grid (cells differ, so at least one does)."""
    relations = []
    if a.cell[1] != b.cell[1]:
        relations.append("left_of" if a.cell[1] < b.cell[1] else "right_of")
    if a.cell[0] != b.cell[0]:
        relations.append("above" if a.cell[0] < b.cell[0] else "below")
    return relations


def _mention(scene: Scene, group: list[int], rng: np.random.Generator) -> Mention:
    obj = scene.objects[group[0]]
    colour = obj.colour if rng.random() < P_NAME_COLOUR else None
    size = obj.size if len(group) == 1 and rng.random() < P_NAME_SIZE else None
    return Mention(obj.shape, colour, size, count=len(group))


def sample_content(scene: Scene, rng: np.random.Generator) -> tuple[CaptionContent, frozenset[int]]:
    """One caption's content and the set of groups it mentions."""
    groups = scene.groups()
    k = len(groups) if rng.random() < P_MENTION_ALL else int(rng.integers(1, len(groups) + 1))
    chosen = sorted(int(g) for g in rng.choice(len(groups), size=k, replace=False))
    mentions = {g: _mention(scene, groups[g], rng) for g in chosen}
    items: list[Item] = []
    singles = [g for g in chosen if len(groups[g]) == 1]
    if len(singles) >= 2 and rng.random() < P_RELATION:
        a, b = (int(g) for g in rng.choice(singles, size=2, replace=False))
        relations = _true_relations(scene.objects[groups[a][0]], scene.objects[groups[b][0]])
        relation = relations[int(rng.integers(len(relations)))]
        if rng.random() < 0.5:  # say it from the other end: "B right of A" instead of "A left of B"
            a, b, relation = b, a, INVERSE_RELATION[relation]
        items.append(Relation(mentions.pop(a), relation, mentions.pop(b)))
    items.extend(mentions.values())
    order = rng.permutation(len(items))
    content = CaptionContent(tuple(items[i] for i in order), frame=int(rng.integers(N_FRAMES)))
    return content, frozenset(chosen)


def sample_captions(
    scene: Scene, rng: np.random.Generator, translated: int, independent: int
) -> list[tuple[str, CaptionContent]]:
    """``(kind, content)`` for each caption of an image: translated ones first, then independent ones whose set
    of mentioned objects differs from every translated caption's (when the scene has more than one group)."""
    captions, seen = [], set()
    for _ in range(translated):
        content, subset = sample_content(scene, rng)
        captions.append(("translation", content))
        seen.add(subset)
    for _ in range(independent):
        for _attempt in range(10):
            content, subset = sample_content(scene, rng)
            if subset not in seen or len(scene.groups()) == 1:
                break
        captions.append(("independent", content))
        seen.add(subset)
    return captions


# ----------------------------------------------------------------------------------------------------------------
# The world
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class Example:
    image_id: str
    split: str
    scene: Scene
    png: bytes
    captions: list[tuple[str, CaptionContent]] = field(default_factory=list)
    # (caption number, lang) -> (content with one MT error, the error's name), for the renderings that have one
    mistranslations: dict[tuple[int, str], tuple[CaptionContent, str]] = field(default_factory=dict)

    def rendering(self, number: int, code: str) -> tuple[str, str]:
        """Caption ``number`` in language ``code`` and the name of its MT error ("" when exact)."""
        content, error = self.mistranslations.get((number, code), (self.captions[number][1], ""))
        return lang.render(content, code), error


def image_id(split: str, index: int) -> str:
    return f"{split}-{index:06d}"


def generate_example(config: SynthConfig, split: str, index: int) -> Example:
    """Image ``index`` of ``split``: depends only on (seed, split, index) and the image size."""
    seed_sequence = np.random.SeedSequence([config.seed, SPLITS.index(split), index])
    scene_seed, render_seed, caption_seed, error_seed = seed_sequence.spawn(4)  # the 4th leaves the others as they are
    scene = sample_scene(np.random.default_rng(scene_seed))
    png = encode_png(render_scene(scene, np.random.default_rng(render_seed), config.image_size))
    captions = sample_captions(
        scene, np.random.default_rng(caption_seed), config.translated_per_image, config.independent_per_image
    )
    example = Example(image_id(split, index), split, scene, png, captions)
    if split == "train":
        example.mistranslations = sample_mistranslations(captions, config.mt_errors, error_seed)
    return example


def sample_mistranslations(
    captions: list[tuple[str, CaptionContent]], rates: tuple[tuple[str, float], ...], seed: np.random.SeedSequence
) -> dict[tuple[int, str], tuple[CaptionContent, str]]:
    """Which renderings get an MT error, and which. Each (caption, language) draws from its own stream, keyed by
    the language code, so changing one language's rate changes no other language's captions."""
    chosen = {}
    for number, (_kind, content) in enumerate(captions):
        for code, rate in rates:
            key = int.from_bytes(code.encode("utf-8"), "little")
            rng = np.random.default_rng(np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key + (number, key)))
            if rng.random() < rate:
                chosen[(number, code)] = mt_errors.mistranslate(content, rng)
    return chosen


def synth_data(config: SynthConfig) -> Path:
    """``mltk synth-data``: generate the world into ``config.out``; returns that folder, which holds the
    ``images`` and ``captions`` artifacts and ``world.json``."""
    if config.out is None:
        raise ConfigError("SynthConfig.out names no folder to write the world into")
    return synthesize(config.out, config).path


def synthesize(out_dir: str | Path, config: SynthConfig = SynthConfig()) -> SynthResult:
    """Generate the world into ``out_dir``: ``images/`` and ``captions/`` artifacts plus ``world.json``; returns
    where they are and how many rows they hold (``synth_data`` is the public form).

    ``world.json`` is written last and removed first, so a world directory with it is complete."""
    out_dir = Path(out_dir).resolve()
    settings = artifacts.settings_without(config, "out")  # what the world is made of
    reused = [
        artifacts.reusable(out_dir / name, kind, stage="synth-data", config=settings)
        for name, kind in ((IMAGES_DIR, "images"), (CAPTIONS_DIR, "captions"))
    ]
    if all(reused) and (out_dir / WORLD_FILE).is_file():
        return load_world(out_dir)
    _prepare_world_dir(out_dir)
    images = {"image_id": [], "split": [], "image": [], "scene": []}
    captions = {"image_id": [], "lang": [], "caption": [], "caption_id": [], "split": [], "kind": [], "mt_error": []}
    tasks = [(split, i) for split in SPLITS for i in range(config.split_sizes()[split])]
    for split, index in track(tasks, "synth-data", total=len(tasks)):
        example = generate_example(config, split, index)
        images["image_id"].append(example.image_id)
        images["split"].append(split)
        images["image"].append(example.png)
        images["scene"].append(example.scene.to_json())
        for number, (kind, _content) in enumerate(example.captions):
            caption_id = f"{example.image_id}#{number}"
            for code in config.langs:
                caption, error = example.rendering(number, code)
                captions["image_id"].append(example.image_id)
                captions["lang"].append(code)
                captions["caption"].append(caption)
                captions["mt_error"].append(error)
                captions["caption_id"].append(caption_id)
                captions["split"].append(split)
                captions["kind"].append(kind)
    images_table = pa.table(
        {
            "image_id": pa.array(images["image_id"], pa.string()),
            "split": pa.array(images["split"], pa.string()),
            "image": pa.array(images["image"], pa.binary()),
            "scene": pa.array(images["scene"], pa.string()),
        }
    )
    if not config.mt_errors:
        del captions["mt_error"]
    captions_table = pa.table({name: pa.array(values, pa.string()) for name, values in captions.items()})
    summary = {"splits": config.split_sizes(), "image_size": config.image_size, "format": "png"}
    images_path = artifacts.write_images(
        out_dir / IMAGES_DIR, images_table, stage="synth-data", config=settings, **summary
    )
    captions_path = artifacts.write_captions(
        out_dir / CAPTIONS_DIR, captions_table, stage="synth-data", config=settings, splits=config.split_sizes()
    )
    world = {
        "kind": "synthetic-world",
        "config": settings,
        "images": IMAGES_DIR,
        "captions": CAPTIONS_DIR,
        "n_images": images_table.num_rows,
        "n_captions": captions_table.num_rows,
        "vocabulary": {
            "shapes": list(SHAPES),
            "colours": list(COLOURS),
            "sizes": list(SIZES),
            "relations": sorted(INVERSE_RELATION),
            "frames": N_FRAMES,
        },
    }
    artifacts.write_json(out_dir / WORLD_FILE, world)
    log(
        f"synth-data: {images_table.num_rows} images, {captions_table.num_rows} captions in "
        f"{len(config.langs)} language(s) -> {out_dir}"
    )
    return SynthResult(out_dir, images_path, captions_path, images_table.num_rows, captions_table.num_rows)


def _prepare_world_dir(out_dir: Path) -> None:
    """Refuse to write into a directory that holds something other than a world; forget an old world's
    completeness marker before its artifacts are replaced."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ArtifactError("exists and is not a directory", out_dir)
    if out_dir.is_dir():
        ours = {WORLD_FILE, IMAGES_DIR, CAPTIONS_DIR}
        foreign = [p.name for p in out_dir.iterdir() if p.name not in ours and not p.name.startswith(".")]
        if foreign:
            raise ArtifactError(
                f"exists and holds other files ({', '.join(sorted(foreign)[:3])}); refusing to "
                f"write a synthetic world into it",
                out_dir,
            )
        (out_dir / WORLD_FILE).unlink(missing_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)


def load_world(path: str | Path) -> SynthResult:
    """Locate the artifacts of a world written by ``synthesize`` (``path`` is the world directory or its
    ``world.json``)."""
    path = Path(path)
    world_file = path if path.name == WORLD_FILE else path / WORLD_FILE
    if not world_file.is_file():
        raise ArtifactError(f"not a synthetic world (no {WORLD_FILE})", path)
    try:
        world = json.loads(world_file.read_text(encoding="utf-8"))
        images_path, captions_path = world_file.parent / world["images"], world_file.parent / world["captions"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ArtifactError(f"{WORLD_FILE} is unreadable ({exc})", world_file)
    artifacts.read_manifest(images_path, "images")
    artifacts.read_manifest(captions_path, "captions")
    return SynthResult(
        world_file.parent.resolve(),
        images_path.resolve(),
        captions_path.resolve(),
        world.get("n_images", 0),
        world.get("n_captions", 0),
    )


__all__ = [
    "SynthConfig",
    "SynthResult",
    "Scene",
    "SceneObject",
    "sample_scene",
    "render_scene",
    "sample_content",
    "sample_captions",
    "generate_example",
    "synthesize",
    "load_world",
    "SPLITS",
]
