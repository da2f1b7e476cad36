"""A caption corpus generated from a seed for the Arrow import, merge and overlap tests (and ``benchmarks/scale``):
plain caption files aligned with an image list, with the awkward lines real files hold (blank and whitespace-only
lines, CRLF ends, control characters, Unicode spaces, a repeated image name)."""

from __future__ import annotations

import random
from pathlib import Path

WORDS = [
    "a",
    "dog",
    "runs",
    "über",
    "the",
    "grass",
    "café",
    "two",
    "men",
    "play",
    "ball",
    "near",
    "water",
    "猫",
    "красный",
    "mit",
    "einem",
    "ball",
]
ODD_CAPTIONS = ["", "   ", "\u3000tabbed\tcaption\u00a0", "nul\x00inside", "trailing  \x85", "\x1cleading sep"]


def write_corpus(
    folder: Path,
    images: int,
    seed: int = 0,
    languages: tuple[str, ...] = ("en", "de"),
    captions_per_image: int = 2,
    flickr_names: bool = True,
    repeat_an_image: bool = True,
) -> dict:
    """``folder/images.txt`` and ``folder/{lang}.{k}`` (k = 1..captions_per_image): line i of every file describes
    image i; the first language has no blank line (the others translate it). Returns the paths:
    ``{"images": path, lang: [files]}``."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"{1000 + 7 * i}.jpg" if flickr_names else f"photos/img_{i:05d}.JPG" for i in range(images)]
    if images > 3 and repeat_an_image:
        names[3] = names[1]  # an image listed twice
    image_list = folder / "images.txt"
    image_list.write_text("\n".join(names) + "\n", encoding="utf-8")
    paths: dict = {"images": image_list}
    for lang in languages:
        paths[lang] = []
        for k in range(1, captions_per_image + 1):
            lines = []
            for i in range(images):
                if rng.random() < 0.05:  # the first language has no blank line: the others translate it
                    line = rng.choice(ODD_CAPTIONS[2:] if lang == languages[0] else ODD_CAPTIONS)
                else:
                    line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
                lines.append(line + ("\r" if rng.random() < 0.1 else ""))
            path = folder / f"train.{k}.{lang}"
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            paths[lang].append(path)
    return paths
