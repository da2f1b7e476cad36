"""English captions: "a small red circle to the left of a blue square", "there are two green stars"."""

from __future__ import annotations

from mltk.data.lang.content import CaptionContent, Item, Mention, Relation, capitalize_first, join_list

CODE, NAME, SCRIPT = "en", "English", "Latin"

COLOUR = {
    "red": "red",
    "green": "green",
    "blue": "blue",
    "yellow": "yellow",
    "purple": "purple",
    "orange": "orange",
    "white": "white",
    "black": "black",
}
SIZE = {"small": "small", "large": "large"}
SHAPE = {  # singular, plural
    "circle": ("circle", "circles"),
    "square": ("square", "squares"),
    "triangle": ("triangle", "triangles"),
    "star": ("star", "stars"),
    "cross": ("cross", "crosses"),
    "heart": ("heart", "hearts"),
    "diamond": ("diamond", "diamonds"),
    "ring": ("ring", "rings"),
}
NUMBER = {2: "two", 3: "three"}
RELATION = {"left_of": "to the left of", "right_of": "to the right of", "above": "above", "below": "below"}


def indefinite_article(next_word: str) -> str:
    """ "an" before a vowel sound; every word of this vocabulary that starts with a vowel letter sounds so."""
    return "an" if next_word[0] in "aeiou" else "a"


def noun_phrase(mention: Mention) -> str:
    words = [SIZE[mention.size]] if mention.size else []
    if mention.colour:
        words.append(COLOUR[mention.colour])
    words.append(SHAPE[mention.shape][mention.count > 1])
    determiner = NUMBER[mention.count] if mention.count > 1 else indefinite_article(words[0])
    return " ".join([determiner, *words])


def item_phrase(item: Item) -> str:
    if isinstance(item, Relation):
        return f"{noun_phrase(item.subject)} {RELATION[item.relation]} {noun_phrase(item.landmark)}"
    return noun_phrase(item)


def render(content: CaptionContent) -> str:
    listed = join_list([item_phrase(i) for i in content.items], " and ")
    # "there is/are" agrees with the first conjunct, as usual in English existentials.
    first_plural = (content.items[0].count if isinstance(content.items[0], Mention) else 1) > 1
    frames = (
        "{}.",
        ("There are {}." if first_plural else "There is {}."),
        "A picture of {}.",
        "An image showing {}.",
    )
    return capitalize_first(frames[content.frame].format(listed))
