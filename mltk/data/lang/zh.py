"""Chinese (simplified) captions: numeral + measure word + modifiers + noun, no spaces.

Measure words: 个 for most shapes, 颗 for 星星 (star) and 桃心 (heart). The numeral 2 before a measure word is
两, not 二. Modifiers: "红色的小圆形" (colour + 的, then the monosyllabic size next to the noun). A relation is a
relative clause inside the noun phrase: "一个在蓝色正方形左边的红色圆形" (a red circle that is left of the blue
square); inside the clause the landmark carries no numeral and the modifiers drop 的 to avoid stacking it.
"""

from __future__ import annotations

from mltk.data.lang.content import CaptionContent, Item, Mention, Relation, join_list

CODE, NAME, SCRIPT = "zh", "Chinese", "Han"

COLOUR = {
    "red": "红色",
    "green": "绿色",
    "blue": "蓝色",
    "yellow": "黄色",
    "purple": "紫色",
    "orange": "橙色",
    "white": "白色",
    "black": "黑色",
}
SIZE = {"small": "小", "large": "大"}
SHAPE = {  # noun, measure word
    "circle": ("圆形", "个"),
    "square": ("正方形", "个"),
    "triangle": ("三角形", "个"),
    "star": ("星星", "颗"),
    "cross": ("十字", "个"),
    "heart": ("桃心", "颗"),
    "diamond": ("菱形", "个"),
    "ring": ("圆环", "个"),
}
NUMBER = {1: "一", 2: "两", 3: "三"}
SIDE = {"left_of": "左边", "right_of": "右边", "above": "上方", "below": "下方"}


def bare_noun(mention: Mention, with_de: bool) -> str:
    """Modifiers + noun without numeral: "红色的小圆形" (``with_de``) or "红色小圆形"."""
    noun = SHAPE[mention.shape][0]
    size = SIZE[mention.size] if mention.size else ""
    if not mention.colour:
        return size + noun
    return COLOUR[mention.colour] + ("的" if with_de else "") + size + noun


def quantity(mention: Mention) -> str:
    return NUMBER[mention.count] + SHAPE[mention.shape][1]


def item_phrase(item: Item) -> str:
    if isinstance(item, Relation):
        clause = "在" + bare_noun(item.landmark, with_de=False) + SIDE[item.relation] + "的"
        return quantity(item.subject) + clause + bare_noun(item.subject, with_de=False)
    return quantity(item) + bare_noun(item, with_de=True)


def render(content: CaptionContent) -> str:
    phrases = [item_phrase(i) for i in content.items]
    listed = join_list(phrases, "和", comma="、")
    frames = ("{}。", "图中有{}。", "画面里是{}。", "这张图上画着{}。")
    return frames[content.frame].format(listed)
