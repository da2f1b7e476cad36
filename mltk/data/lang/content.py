"""What a caption says, independent of any language.

A caption's content is sampled once and then rendered by every language module, so all renderings of one
content are translations of each other and share a ``caption_id``. The vocabulary is deliberately tiny
(8 shapes, 8 colours, 2 sizes, 4 relations, counts 1 to 3) so that a tiny CLIP can learn it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

SHAPES = ("circle", "square", "triangle", "star", "cross", "heart", "diamond", "ring")
COLOURS = ("red", "green", "blue", "yellow", "purple", "orange", "white", "black")
SIZES = ("small", "large")
# "A left_of B": A's centre is left of B's; "A above B": A is higher up in the image.
RELATIONS = ("left_of", "right_of", "above", "below")
INVERSE_RELATION = {"left_of": "right_of", "right_of": "left_of", "above": "below", "below": "above"}
MAX_COUNT = 3

# Every language offers the same number of sentence frames; frame i means roughly the same in all of them:
# 0 a bare noun-phrase list, 1 "there is ...", 2 "a picture with/of ...", 3 "... is shown / a drawing of ...".
N_FRAMES = 4


@dataclass(frozen=True)
class Mention:
    """A noun phrase naming one object (``count`` 1) or a group of identical objects (``count`` 2 or 3).

    ``colour`` and ``size`` are ``None`` when the caption leaves them out; groups never name a size."""

    shape: str
    colour: str | None = None
    size: str | None = None
    count: int = 1

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"unknown shape {self.shape!r}")
        if self.colour is not None and self.colour not in COLOURS:
            raise ValueError(f"unknown colour {self.colour!r}")
        if self.size is not None and self.size not in SIZES:
            raise ValueError(f"unknown size {self.size!r}")
        if not 1 <= self.count <= MAX_COUNT:
            raise ValueError(f"count must be 1..{MAX_COUNT}, got {self.count}")
        if self.count > 1 and self.size is not None:
            raise ValueError("a group of objects does not name a size")


@dataclass(frozen=True)
class Relation:
    """A noun phrase "subject <relation> landmark", e.g. "a red circle to the left of a blue square".

    Both ends are single objects (``count`` 1), which keeps the case government of every language simple."""

    subject: Mention
    relation: str
    landmark: Mention

    def __post_init__(self) -> None:
        if self.relation not in RELATIONS:
            raise ValueError(f"unknown relation {self.relation!r}")
        if self.subject.count != 1 or self.landmark.count != 1:
            raise ValueError("both ends of a relation are single objects")


Item = Union[Mention, Relation]


@dataclass(frozen=True)
class CaptionContent:
    """The items a caption lists, in order, and the sentence frame (``0 <= frame < N_FRAMES``)."""

    items: tuple[Item, ...]
    frame: int = 0

    def __post_init__(self) -> None:
        if not self.items:
            raise ValueError("a caption names at least one item")
        if not 0 <= self.frame < N_FRAMES:
            raise ValueError(f"frame must be 0..{N_FRAMES - 1}, got {self.frame}")

    @property
    def plural(self) -> bool:
        """Whether the listed items, taken together as a subject, are grammatically plural."""
        return len(self.items) > 1 or head(self.items[0]).count > 1


def head(item: Item) -> Mention:
    """The mention that heads an item: the subject of a relation, or the mention itself."""
    return item.subject if isinstance(item, Relation) else item


def join_list(phrases: list[str], conjunction: str, comma: str = ", ") -> str:
    """``A``, ``A and B``, ``A, B and C`` with the given conjunction (spaces included by the caller)."""
    if len(phrases) == 1:
        return phrases[0]
    return comma.join(phrases[:-1]) + conjunction + phrases[-1]


def capitalize_first(text: str) -> str:
    """Upper-case the first character only (``str.capitalize`` would lower-case the rest, e.g. German nouns)."""
    return text[:1].upper() + text[1:]
