"""Japanese captions: modifiers before the noun, particles, counters, no spaces.

Colours are i-adjectives (赤い, 青い, 黄色い, 白い, 黒い) or nouns with の (緑の, 紫の, オレンジ色の); sizes are
小さな/大きな. Counts use the native counter つ: as a prenominal quantifier "二つの赤い円", or floated after the
subject when the sentence names a single group: "赤い円が二つあります". A relation is a relative clause,
"青い正方形の左にある赤い円" (the red circle that is left of the blue square), or, when it is the only item of
an existential sentence, a locative: "青い正方形の左に赤い円があります". Lists join with と.
"""

from __future__ import annotations

from mltk.data.lang.content import CaptionContent, Item, Mention, Relation

CODE, NAME, SCRIPT = "ja", "Japanese", "Han+Kana"

COLOUR = {
    "red": "赤い",
    "green": "緑の",
    "blue": "青い",
    "yellow": "黄色い",
    "purple": "紫の",
    "orange": "オレンジ色の",
    "white": "白い",
    "black": "黒い",
}
SIZE = {"small": "小さな", "large": "大きな"}
SHAPE = {
    "circle": "円",
    "square": "正方形",
    "triangle": "三角形",
    "star": "星",
    "cross": "十字",
    "heart": "ハート",
    "diamond": "ひし形",
    "ring": "リング",
}
COUNTER = {2: "二つ", 3: "三つ"}
SIDE = {"left_of": "左", "right_of": "右", "above": "上", "below": "下"}


def bare_noun(mention: Mention) -> str:
    return (
        (SIZE[mention.size] if mention.size else "")
        + (COLOUR[mention.colour] if mention.colour else "")
        + SHAPE[mention.shape]
    )


def noun_phrase(mention: Mention) -> str:
    prefix = COUNTER[mention.count] + "の" if mention.count > 1 else ""
    return prefix + bare_noun(mention)


def item_phrase(item: Item) -> str:
    if isinstance(item, Relation):
        return noun_phrase(item.landmark) + "の" + SIDE[item.relation] + "にある" + noun_phrase(item.subject)
    return noun_phrase(item)


def render(content: CaptionContent) -> str:
    listed = "と".join(item_phrase(i) for i in content.items)
    if content.frame == 0:
        return f"{listed}。"
    if content.frame == 2:
        return f"{listed}の絵。"
    single = content.items[0] if len(content.items) == 1 else None
    if isinstance(single, Mention) and single.count > 1:  # "赤い円が二つあります": quantifier floats after が
        subject = f"{bare_noun(single)}が{COUNTER[single.count]}"
    elif isinstance(single, Relation):  # a locative sentence, "青い正方形の左に赤い円があります"
        subject = f"{noun_phrase(single.landmark)}の{SIDE[single.relation]}に{noun_phrase(single.subject)}が"
    else:
        subject = f"{listed}が"
    if content.frame == 1:
        return f"{subject}あります。"
    return f"画像には{subject}描かれています。"
