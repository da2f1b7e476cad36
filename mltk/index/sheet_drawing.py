"""Drawing the tiles of a contact sheet (``mltk.index.faiss_index.write_contact_sheet``): the layout constants,
fonts for every script of the embedded world (``SheetFonts``), wrapped text cards, tile labels and image
thumbnails."""

from __future__ import annotations

import io

TILE_GAP, LABEL_LINES, SHEET_MARGIN = 8, 2, 12
SHEET_BACKGROUND, CARD_BACKGROUND, MISSING_TILE, INK, MUTED = (
    "white",
    (255, 248, 225),
    (200, 200, 200),
    (25, 25, 25),
    (105, 105, 105),
)

_ARABIC = ((0x0600, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF))
_KANA = ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F))
_CJK = ((0x2E80, 0x9FFF), (0xF900, 0xFAFF), (0xFF00, 0xFFEF))


def _in(ranges, text: str) -> bool:
    return any(low <= ord(ch) <= high for ch in text for low, high in ranges)


class SheetFonts:
    """The contact sheet's fonts at one size: Noto Sans (Latin, Greek, Cyrillic), Noto Sans CJK SC for Han and
    its JP face for text with kana, and Noto Sans Arabic, set right to left through raqm where Pillow has it
    (raqm also joins the letters). Without the font packages Pillow's own font is used (Latin only)."""

    def __init__(self, size: int):
        from PIL import ImageFont, features

        self.size = size
        self.bidi = features.check("raqm")
        self.layout = ImageFont.Layout.RAQM if self.bidi else ImageFont.Layout.BASIC
        try:
            import fontpkg_noto_sans
            import fontpkg_noto_sans_arabic
            import noto_cjk_sans_otc

            cjk = str(noto_cjk_sans_otc.FONT_PATH)  # a collection: face 0 is JP, face 2 SC
            arabic = str(next((fontpkg_noto_sans_arabic.ROOT / "files").glob("NotoSansArabic*.ttf")))
            sans = str(next((fontpkg_noto_sans.ROOT / "files").glob("NotoSans[[]*.ttf")))
            self.faces = {"sans": (sans, 0), "sc": (cjk, 2), "jp": (cjk, 0), "arabic": (arabic, 0)}
        except (ImportError, StopIteration):
            self.faces = {}
        self._cache: dict = {}
        self.line_height = round(size * 1.35)

    def font(self, text: str = "", size: int | None = None):
        """The face that covers ``text`` (Arabic, kana, Han, or else Noto Sans), at ``size``."""
        from PIL import ImageFont

        face = "arabic" if _in(_ARABIC, text) else "jp" if _in(_KANA, text) else "sc" if _in(_CJK, text) else "sans"
        key = (face, size or self.size)
        if key not in self._cache:
            if face in self.faces:
                path, index = self.faces[face]
                self._cache[key] = ImageFont.truetype(path, key[1], index=index, layout_engine=self.layout)
            else:
                self._cache[key] = ImageFont.load_default(size=key[1])
        return self._cache[key]

    def direction(self, text: str) -> str | None:
        """``rtl`` for Arabic where raqm can lay it out (it also joins the letters), else the default."""
        return "rtl" if self.bidi and _in(_ARABIC, text) else None


def _wrap(text: str, font, width: float, direction: str | None) -> list[str]:
    """Greedy line breaking at spaces, and between any two CJK characters, to fit ``width`` pixels."""
    import re

    units = re.findall(
        r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef][\s\u3000-\u303f\uff01-\uff0f]*|[^\s\u2e80-\u9fff"
        r"\uf900-\ufaff\uff00-\uffef]+\s*|\s+",
        text,
    )
    lines, line = [], ""
    for unit in units:
        if line and font.getlength((line + unit).rstrip(), direction=direction) > width:
            lines.append(line.rstrip())
            line = unit.lstrip()
        else:
            line += unit
    if line.strip():
        lines.append(line.rstrip())
    return lines


def text_card(draw, fonts: SheetFonts, box: tuple[int, int, int, int], text: str) -> None:
    """The whole of ``text`` wrapped into ``box``, at the largest size (down to 8 px) at which it fits."""
    left, top, right, bottom = box
    draw.rectangle(box, fill=CARD_BACKGROUND, outline=(225, 205, 150))
    pad, direction = 8, fonts.direction(text)
    for size in range(round(fonts.size * 1.5), 7, -1):
        font = fonts.font(text, size)
        lines = _wrap(text, font, right - left - 2 * pad, direction)
        line_height = round(size * 1.35)
        if len(lines) * line_height <= bottom - top - 2 * pad:
            break
    y = top + (bottom - top - len(lines) * line_height) / 2
    for line in lines:
        x, anchor = (right - pad, "ra") if direction == "rtl" else (left + pad, "la")
        draw.text((x, y), line, font=font, fill=INK, anchor=anchor, direction=direction)
        y += line_height


def tile_labels(draw, fonts: SheetFonts, origin: tuple[int, int], width: int, lines: list[str]) -> None:
    """Label lines under a tile, each shortened with an ellipsis only when it is wider than the tile."""
    x, y = origin
    for n, line in enumerate(lines[:LABEL_LINES]):
        font = fonts.font(line)
        while len(line) > 1 and font.getlength(line) > width:
            line = line[:-2] + "…"
        draw.text((x, y + n * fonts.line_height), line, font=font, fill=INK if n == 0 else MUTED)


def thumbnail(images: dict, image_id: str, width: int, height: int):
    """The image scaled (up or down, aspect kept) to fill a ``width`` x ``height`` tile, centred on a light
    background; a grey tile when it is missing or unreadable."""
    from PIL import Image, UnidentifiedImageError

    tile = Image.new("RGB", (width, height), MISSING_TILE)
    source = images.get(image_id)
    if source is None:
        return tile  # the label under it names the id
    try:
        picture = Image.open(io.BytesIO(source) if isinstance(source, bytes) else source).convert("RGB")
    except (OSError, UnidentifiedImageError):
        return tile
    scale = min(width / picture.width, height / picture.height)
    size = (max(1, round(picture.width * scale)), max(1, round(picture.height * scale)))
    picture = picture.resize(size, Image.Resampling.LANCZOS if scale < 1 else Image.Resampling.BICUBIC)
    tile.paste((240, 240, 240), (0, 0, width, height))
    tile.paste(picture, ((width - size[0]) // 2, (height - size[1]) // 2))
    return tile
