"""Machine-translation errors for the synthetic world's translate-train captions.

The world renders every caption content exactly in every language, so by default each non-English caption is a
perfect translation of the English one. Real translate-train data (``mltk translate-data``, or the MT'd captions
the papers train on) is not: MT leaves out a phrase or a modifier, picks the wrong word for a colour or a shape,
and garbles spatial relations, and it does so more often for languages far from English. Test sets, in contrast,
are written or checked by people.

``synth-data --mt-errors de=0.1,zh=0.3`` reproduces that: each non-English rendering of a train-split caption is,
with its language's rate, rendered from a content with one error in it (``ERRORS``), drawn independently per
language. English, the val and test splits, and the images stay exactly as without errors, so a world with
errors shares its native CLIP and image embeddings with the world without them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mltk.core.errors import ConfigError
from mltk.data.lang.content import COLOURS, INVERSE_RELATION, SHAPES, CaptionContent, Item, Mention, Relation

# drop_item: a whole phrase left out; wrong_colour / wrong_shape: a mistranslated word; flip_relation: "left of"
# rendered as "right of" (or "above" as "below"); drop_modifier: a colour or size left out.
ERRORS = ("drop_item", "wrong_colour", "wrong_shape", "flip_relation", "drop_modifier")


def parse_error_rates(spec: str | tuple | list, languages: tuple[str, ...]) -> tuple[tuple[str, float], ...]:
    """``"0.2"`` (every non-English language), ``"de=0.1,zh=0.3"`` or ``[("de", 0.1), ...]`` -> sorted pairs
    ``(("de", 0.1), ("zh", 0.3))`` of the languages with a rate above 0."""
    if not isinstance(spec, str):
        pairs = [(code, float(rate)) for code, rate in spec]
    elif not spec.strip():
        return ()
    else:
        try:
            if "=" not in spec:
                pairs = [(code, float(spec)) for code in languages if code != "en"]
            else:
                pairs = [
                    (code.strip(), float(rate))
                    for code, rate in (part.split("=", 1) for part in spec.split(",") if part.strip())
                ]
        except ValueError:
            raise ConfigError(f"--mt-errors must be a rate (0.2) or LANG=RATE pairs (de=0.1,zh=0.3), got {spec!r}")
    for code, rate in pairs:
        if code == "en":
            raise ConfigError("--mt-errors: English is the source language of the translations and has no MT errors")
        if code not in languages:
            raise ConfigError(
                f"--mt-errors names {code!r}, which is not among the world's languages ({','.join(languages)})"
            )
        if not 0.0 <= rate <= 1.0:
            raise ConfigError(f"--mt-errors rate for {code} must be between 0 and 1, got {rate}")
    return tuple(sorted((code, float(rate)) for code, rate in pairs if rate > 0))


def _mentions(content: CaptionContent) -> list[tuple[int, str | None]]:
    """(item index, None for a plain mention or "subject"/"landmark" inside a relation) for every mention."""
    places = []
    for index, item in enumerate(content.items):
        places += [(index, "subject"), (index, "landmark")] if isinstance(item, Relation) else [(index, None)]
    return places


def _get(content: CaptionContent, place: tuple[int, str | None]) -> Mention:
    item = content.items[place[0]]
    return item if place[1] is None else getattr(item, place[1])


def _with_item(content: CaptionContent, index: int, item: Item) -> CaptionContent:
    return replace(content, items=content.items[:index] + (item,) + content.items[index + 1 :])


def _put(content: CaptionContent, place: tuple[int, str | None], mention: Mention) -> CaptionContent:
    index, end = place
    return _with_item(content, index, mention if end is None else replace(content.items[index], **{end: mention}))


def applicable_errors(content: CaptionContent) -> list[str]:
    """The errors that change this content (a one-item caption cannot lose an item, ...)."""
    mentions = [_get(content, place) for place in _mentions(content)]
    found = ["wrong_shape"]
    if len(content.items) >= 2:
        found.append("drop_item")
    if any(m.colour is not None for m in mentions):
        found.append("wrong_colour")
    if any(isinstance(item, Relation) for item in content.items):
        found.append("flip_relation")
    if any(m.colour is not None or m.size is not None for m in mentions):
        found.append("drop_modifier")
    return [error for error in ERRORS if error in found]


def mistranslate(content: CaptionContent, rng: np.random.Generator) -> tuple[CaptionContent, str]:
    """``content`` with one error of a kind drawn uniformly from those that apply, and the error's name."""
    options = applicable_errors(content)
    error = options[int(rng.integers(len(options)))]
    places = _mentions(content)
    if error == "drop_item":
        drop = int(rng.integers(len(content.items)))
        return replace(content, items=content.items[:drop] + content.items[drop + 1 :]), error
    if error == "flip_relation":
        relations = [i for i, item in enumerate(content.items) if isinstance(item, Relation)]
        index = relations[int(rng.integers(len(relations)))]
        item = content.items[index]
        return _with_item(content, index, replace(item, relation=INVERSE_RELATION[item.relation])), error
    if error == "wrong_shape":
        place = places[int(rng.integers(len(places)))]
        mention = _get(content, place)
        others = [shape for shape in SHAPES if shape != mention.shape]
        return _put(content, place, replace(mention, shape=others[int(rng.integers(len(others)))])), error
    if error == "wrong_colour":
        coloured = [p for p in places if _get(content, p).colour is not None]
        place = coloured[int(rng.integers(len(coloured)))]
        mention = _get(content, place)
        others = [colour for colour in COLOURS if colour != mention.colour]
        return _put(content, place, replace(mention, colour=others[int(rng.integers(len(others)))])), error
    modified = [p for p in places if _get(content, p).colour is not None or _get(content, p).size is not None]
    place = modified[int(rng.integers(len(modified)))]
    mention = _get(content, place)
    field = "colour" if mention.colour is not None and (mention.size is None or rng.random() < 0.5) else "size"
    return _put(content, place, replace(mention, **{field: None})), error
