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

import pyarrow as pa
import pyarrow.compute as pc

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


# ----------------------------------------------------------------------------------------------------------------
# The same ids for a whole column at once (Arrow compute; the rare name outside the plain form goes through
# ``canonical_image_id`` one by one)
# ----------------------------------------------------------------------------------------------------------------

# A name whose id Arrow can compute: folders and a stem of letters, digits, ``_ + -``, and at most one extension.
PLAIN_NAME = r"^(?:[A-Za-z0-9_+-]+/)*[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9]+)?$"


def canonical_image_ids(names: pa.Array, namespace: str | None = None) -> pa.Array:
    """``canonical_image_id`` of every name of a string array, vectorised: the same ids, at Arrow's speed."""
    if namespace is not None and namespace not in NAMESPACES:
        raise ValueError(f"unknown image id namespace {namespace!r}; expected one of {NAMESPACES}")
    names = pc.cast(names, pa.string())
    plain = pc.fill_null(pc.match_substring_regex(names, PLAIN_NAME), False)
    return canonical_from_stems(names, plain, plain_stems(names), namespace)


def image_list_ids(names: pa.Array) -> tuple[pa.Array, str | None]:
    """(canonical ids, namespace) of an image list: ``flickr30k`` when every name is a Flickr photo id
    (``looks_like_flickr30k``), else None; the names' stems computed once for both."""
    names = pc.cast(names, pa.string())
    plain = pc.fill_null(pc.match_substring_regex(names, PLAIN_NAME), False)
    stems = plain_stems(names)
    namespace = FLICKR30K if all_flickr30k(names, plain, stems) else None
    return canonical_from_stems(names, plain, stems, namespace), namespace


def looks_like_flickr30k_array(names: pa.Array) -> bool:
    """``looks_like_flickr30k`` of a string array, vectorised."""
    names = pc.cast(names, pa.string())
    plain = pc.fill_null(pc.match_substring_regex(names, PLAIN_NAME), False)
    return all_flickr30k(names, plain, plain_stems(names))


def all_flickr30k(names: pa.Array, plain: pa.Array, stems: pa.Array) -> bool:
    if len(names) == 0:
        return False
    photo = pc.match_substring_regex(stems, _FLICKR30K_PHOTO.pattern)
    if not pc.all(pc.or_(pc.invert(plain), photo)).as_py():
        return False
    odd = pc.filter(names, pc.invert(plain)).to_pylist()
    return all(_FLICKR30K_PHOTO.match(_stem(name)) for name in odd)


def canonical_from_stems(names: pa.Array, plain: pa.Array, stems: pa.Array, namespace: str | None) -> pa.Array:
    return _with_odd_names(_plain_ids(stems, namespace), names, plain, lambda name: canonical_image_id(name, namespace))


def plain_stems(names: pa.Array) -> pa.Array:
    """The stem of each plain name (folders and the extension cut)."""
    return pc.replace_substring_regex(pc.replace_substring_regex(names, r"^.*/", ""), r"\.[A-Za-z0-9]+$", "")


def _plain_ids(stems: pa.Array, namespace: str | None) -> pa.Array:
    """Canonical ids of plain names from their stems (rows of other names hold something meaningless; the caller
    replaces them)."""
    ids, digits = stems, pc.match_substring_regex(stems, r"^\d+$")
    if namespace == COCO:
        ids = pc.if_else(digits, _coco_ids(stems), ids)
    elif namespace == FLICKR30K:
        ids = pc.if_else(digits, pc.binary_join_element_wise(f"{FLICKR30K}:", _without_leading_zeros(stems), ""), ids)
    ids = pc.if_else(
        pc.match_substring_regex(stems, _COCO_2017_FILE.pattern),
        pc.binary_join_element_wise(f"{COCO}:", stems, ""),
        ids,
    )
    coco_number = pc.struct_field(pc.extract_regex(stems, r"(?i)^COCO_(?:train|val|test)20\d\d_0*(?P<n>\d+)$"), [0])
    ids = pc.if_else(pc.is_valid(coco_number), _coco_ids(coco_number), ids)
    return ids


def _without_leading_zeros(digits: pa.Array) -> pa.Array:
    """``str(int(d))`` of digit strings."""
    trimmed = pc.utf8_ltrim(digits, "0")
    return pc.if_else(pc.equal(pc.utf8_length(trimmed), 0), "0", trimmed)


def _coco_ids(digits: pa.Array) -> pa.Array:
    """``coco_id`` of digit strings: ``coco:`` and the number zero-padded to 12 digits."""
    return pc.binary_join_element_wise(
        f"{COCO}:", pc.utf8_lpad(_without_leading_zeros(pc.fill_null(digits, "0")), 12, "0"), ""
    )


def _with_odd_names(ids: pa.Array, names: pa.Array, plain: pa.Array, one_by_one) -> pa.Array:
    """``ids`` with the rows of names outside the plain form computed by ``one_by_one``."""
    odd = pc.invert(plain)
    if not pc.any(odd).as_py():
        return ids
    values = [one_by_one(name) for name in pc.filter(names, odd).to_pylist()]
    return pc.replace_with_mask(ids, odd, pa.array(values, pa.string()))
