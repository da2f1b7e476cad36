"""One image id per picture, whatever file or importer names it.

Public test and training sets name the same COCO or Flickr30K photo in different ways:
``COCO_train2014_000000391895.jpg`` (COCO 2014 files, XTD10, COCO-CN), ``000000391895.jpg`` (COCO 2017 files),
``391895`` (the ``cocoid`` of Karpathy's json, xFlickr&CO's integer ids), ``1000092795.jpg`` (Flickr30K, Multi30K,
xFlickr&CO's string ids).
To join such sets, or to check that a test set's images are not in a training set, every importer gives an image
the same **canonical id**:

- COCO: ``coco:`` and the numeric COCO id zero-padded to 12 digits, as in the 2017 file names
  (``coco:000000391895``). The same picture keeps its id whether it was read from train2014 or val2014.
- Flickr30K: ``flickr30k:`` and the Flickr photo id (``flickr30k:1000092795``).
- Anything else: the file name without folders and extension, unchanged (Crossmodal-3600 keys, custom sets).

A name that is already canonical (``coco:...``, ``flickr30k:...``) is returned as it is.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

COCO = "coco"
FLICKR30K = "flickr30k"
NAMESPACES = (COCO, FLICKR30K)

_COCO_FILE = re.compile(r"^COCO_(?:train|val|test)20\d\d_0*(\d+)$", re.IGNORECASE)
_COCO_2017_FILE = re.compile(r"^(\d{12})$")  # 000000391895: COCO 2017's zero-padded file names
_CANONICAL = re.compile(rf"^(?:{'|'.join(NAMESPACES)}):\S+$")
_FLICKR30K_PHOTO = re.compile(r"^[1-9]\d{3,10}$")  # Flickr photo ids: no leading zero


def coco_id(number: int | str) -> str:
    """``391895`` -> ``coco:000000391895``."""
    return f"{COCO}:{int(number):012d}"


def canonical_image_id(name: str | int, namespace: str | None = None) -> str:
    """The canonical id of an image named ``name`` (a file name or path, or a dataset's numeric id).

    ``namespace`` says which collection a bare number belongs to (``"coco"`` for a ``cocoid``, ``"flickr30k"``
    for a Flickr30K file stem); without it a bare number is ambiguous and only unambiguous forms are converted
    (COCO file names, COCO 2017's 12-digit names)."""
    if namespace is not None and namespace not in NAMESPACES:
        raise ValueError(f"unknown image id namespace {namespace!r}; expected one of {NAMESPACES}")
    text = str(name).strip()
    if _CANONICAL.match(text):
        return text
    stem = _stem(text)
    match = _COCO_FILE.match(stem) or _COCO_2017_FILE.match(stem)
    if match:
        return coco_id(match.group(1))
    if namespace == COCO and stem.isdigit():
        return coco_id(stem)
    if namespace == FLICKR30K and stem.isdigit():
        return f"{FLICKR30K}:{int(stem)}"
    return stem


def looks_like_flickr30k(names: list[str]) -> bool:
    """Whether every name is a Flickr photo id (digits without a leading zero), as Flickr30K's file names are."""
    return bool(names) and all(_FLICKR30K_PHOTO.match(_stem(name)) for name in names)


def _stem(text: str) -> str:
    name = PurePosixPath(text.replace("\\", "/")).name
    return name.rsplit(".", 1)[0] if "." in name else name
