"""A scene of the embedded world: up to three objects (shape, colour, size) in the cells of a grid. Drawn by
``mltk.data.render``, sampled and described by ``mltk.data.synth``."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class SceneObject:
    shape: str
    colour: str
    size: str
    cell: tuple[int, int]  # (row, column) on the GRID x GRID board; row 0 is the top


@dataclass(frozen=True)
class Scene:
    objects: tuple[SceneObject, ...]

    def groups(self) -> list[list[int]]:
        """Indices of objects grouped by (shape, colour), in order of first appearance."""
        by_key: dict[tuple[str, str], list[int]] = {}
        for i, obj in enumerate(self.objects):
            by_key.setdefault((obj.shape, obj.colour), []).append(i)
        return list(by_key.values())

    def to_json(self) -> str:
        return json.dumps(
            [{"shape": o.shape, "colour": o.colour, "size": o.size, "cell": list(o.cell)} for o in self.objects],
            separators=(",", ":"),
        )
