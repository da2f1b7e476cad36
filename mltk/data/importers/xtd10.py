"""XTD10 (Aggarwal and Kale 2020) as its repository distributes it: ``XTD10/test_image_names.txt`` (1,000 COCO
2014 file names, about 800 from train2014) and ``test_1kcaptions_LANG.txt`` files aligned with it by line.

Which captions are translations of which: the files beside the image list (XTD10/: es, it, ko, pl, ru, tr, zh)
and MIC/ (de, fr, from the Multilingual Image Captions set) translate the English line, so they share its
caption_id ``test-i``; STAIR/ (``jp`` = ja, STAIR Captions) was written independently for the image and gets
``test-i-STAIR``. Any other folder is taken as independent too. Image ids are canonical COCO ids.

The images are in COCO's train2014 and val2014 folders: give both with ``--images-root`` (repeatable).
"""

from __future__ import annotations

from pathlib import Path

from mltk.core.errors import ArtifactError
from mltk.data.importers.common import Imported, ImportRequest, normalize_lang, read_lines, require_aligned
from mltk.data.importers.image_ids import COCO, canonical_image_id

XTD10_IMAGE_LIST = "test_image_names.txt"
TRANSLATION_FOLDERS = frozenset({"XTD10", "MIC"})  # folders whose captions translate the English line


def import_xtd10(src: Path, request: ImportRequest) -> Imported:
    """SRC is the XTD10 repository (XTD10/, MIC/, STAIR/) or its XTD10 folder."""
    image_list = next((p for p in (src / XTD10_IMAGE_LIST, src / "XTD10" / XTD10_IMAGE_LIST) if p.is_file()), None)
    if image_list is None:
        raise ArtifactError(f"no {XTD10_IMAGE_LIST} here or in XTD10/", src)
    imported = Imported()
    if not request.wants("test"):
        return imported
    names = read_lines(image_list)
    ids = [canonical_image_id(name, COCO) for name in names]
    for image_id, name in zip(ids, names):
        imported.add_image(image_id, "test", request.images.path(name))
    home = image_list.parent
    caption_files = sorted(home.glob("test_1kcaptions_*.txt"))
    caption_files += sorted(p for p in home.parent.glob("*/test_1kcaptions_*.txt") if p.parent != home)
    for path in caption_files:
        lang = normalize_lang(path.stem.removeprefix("test_1kcaptions_"))
        lines = read_lines(path)
        require_aligned(lines, len(names), path, image_list)
        translation = path.parent == home or path.parent.name in TRANSLATION_FOLDERS
        suffix = "" if translation else f"-{path.parent.name}"
        for i, (image_id, caption) in enumerate(zip(ids, lines)):
            imported.add(image_id, lang, caption, f"test-{i}{suffix}", "test")
    return imported
