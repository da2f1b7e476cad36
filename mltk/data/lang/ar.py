"""Arabic captions (right to left, stored in logical order, no diacritics).

The adjective follows the noun and agrees in gender: "دائرة حمراء" (f), "مربع أحمر" (m); colour adjectives of
the أفعل/فعلاء pattern have their own feminine. Two objects take the dual on noun and adjective, nominative
-ان or genitive -ين: "دائرتان حمراوان", after "تحتوي على" "دائرتين حمراوين". Three take the numeral with reversed
gender (ثلاثة before a masculine noun, ثلاث before a feminine one) and the plural noun, whose non-human plural
takes a feminine singular adjective: "ثلاث دوائر حمراء", "ثلاثة مربعات حمراء". Relations: "على يسار",
"على يمين", "فوق", "تحت" + genitive (invisible without diacritics). "و" is written attached to the next word.
"""

from __future__ import annotations

from mltk.data.lang.content import CaptionContent, Item, Mention, Relation

CODE, NAME, SCRIPT = "ar", "Arabic", "Arabic"

# masculine, feminine, masculine dual nom/gen, feminine dual nom/gen
COLOUR = {
    "red": ("أحمر", "حمراء", "أحمران", "أحمرين", "حمراوان", "حمراوين"),
    "green": ("أخضر", "خضراء", "أخضران", "أخضرين", "خضراوان", "خضراوين"),
    "blue": ("أزرق", "زرقاء", "أزرقان", "أزرقين", "زرقاوان", "زرقاوين"),
    "yellow": ("أصفر", "صفراء", "أصفران", "أصفرين", "صفراوان", "صفراوين"),
    "purple": ("بنفسجي", "بنفسجية", "بنفسجيان", "بنفسجيين", "بنفسجيتان", "بنفسجيتين"),
    "orange": ("برتقالي", "برتقالية", "برتقاليان", "برتقاليين", "برتقاليتان", "برتقاليتين"),
    "white": ("أبيض", "بيضاء", "أبيضان", "أبيضين", "بيضاوان", "بيضاوين"),
    "black": ("أسود", "سوداء", "أسودان", "أسودين", "سوداوان", "سوداوين"),
}
SIZE = {"small": ("صغير", "صغيرة"), "large": ("كبير", "كبيرة")}  # singular only (groups name no size)
SHAPE = {  # gender, singular, dual nom, dual gen, plural
    "circle": ("f", "دائرة", "دائرتان", "دائرتين", "دوائر"),
    "square": ("m", "مربع", "مربعان", "مربعين", "مربعات"),
    "triangle": ("m", "مثلث", "مثلثان", "مثلثين", "مثلثات"),
    "star": ("f", "نجمة", "نجمتان", "نجمتين", "نجمات"),
    "cross": ("m", "صليب", "صليبان", "صليبين", "صلبان"),
    "heart": ("m", "قلب", "قلبان", "قلبين", "قلوب"),
    "diamond": ("m", "معين", "معينان", "معينين", "معينات"),
    "ring": ("f", "حلقة", "حلقتان", "حلقتين", "حلقات"),
}
THREE = {"m": "ثلاثة", "f": "ثلاث"}  # gender polarity: the numeral takes the opposite gender form
RELATION = {"left_of": "على يسار", "right_of": "على يمين", "above": "فوق", "below": "تحت"}  # + genitive


def noun_phrase(mention: Mention, case: str) -> str:
    gender, singular, dual_nom, dual_gen, plural = SHAPE[mention.shape]
    feminine = gender == "f"
    colour = COLOUR[mention.colour] if mention.colour else None
    if mention.count == 1:
        words = [singular]
        if colour:
            words.append(colour[feminine])
        if mention.size:
            words.append(SIZE[mention.size][feminine])
    elif mention.count == 2:  # the dual says "two" by itself
        genitive = case == "gen"
        words = [dual_gen if genitive else dual_nom]
        if colour:
            words.append(colour[2 + 2 * feminine + genitive])
    else:
        words = [THREE[gender], plural]
        if colour:
            words.append(colour[1])  # non-human plural: feminine singular agreement
    return " ".join(words)


def item_phrase(item: Item, case: str) -> str:
    if isinstance(item, Relation):
        return f"{noun_phrase(item.subject, case)} {RELATION[item.relation]} {noun_phrase(item.landmark, 'gen')}"
    return noun_phrase(item, case)


def render(content: CaptionContent) -> str:
    def listed(case: str) -> str:
        return " و".join(item_phrase(i, case) for i in content.items)

    frames = ("{nom}.", "هناك {nom}.", "صورة تحتوي على {gen}.", "في الصورة {nom}.")
    template = frames[content.frame]
    return template.format(nom=listed("nom")) if "{nom}" in template else template.format(gen=listed("gen"))
