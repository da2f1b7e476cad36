"""German captions with gender and case agreement.

An indefinite article with adjectives takes the mixed declension (``ein roter Kreis``, ``eine rote Raute``,
``ein rotes Quadrat``; accusative ``einen roten Kreis``; dative ``einem roten Kreis``, ``einer roten Raute``).
A numeral with adjectives takes the strong plural declension (``zwei rote Kreise``, dative ``zwei roten
Kreisen``). Frames put the list in the nominative ("... ist zu sehen"), the accusative ("Es gibt ...") or the
dative ("Ein Bild mit ..."); relations govern the dative ("links von einem blauen Quadrat", "über einem ...").
"""

from __future__ import annotations

from mltk.data.lang.content import CaptionContent, Item, Mention, Relation, capitalize_first, join_list

CODE, NAME, SCRIPT = "de", "German", "Latin"

COLOUR = {
    "red": "rot",
    "green": "grün",
    "blue": "blau",
    "yellow": "gelb",
    "purple": "violett",
    "orange": "orangefarben",
    "white": "weiß",
    "black": "schwarz",
}
SIZE = {"small": "klein", "large": "groß"}
# gender, nominative/accusative singular, dative singular, plural, dative plural ("Herz" is irregular: dem Herzen)
SHAPE = {
    "circle": ("m", "Kreis", "Kreis", "Kreise", "Kreisen"),
    "square": ("n", "Quadrat", "Quadrat", "Quadrate", "Quadraten"),
    "triangle": ("n", "Dreieck", "Dreieck", "Dreiecke", "Dreiecken"),
    "star": ("m", "Stern", "Stern", "Sterne", "Sternen"),
    "cross": ("n", "Kreuz", "Kreuz", "Kreuze", "Kreuzen"),
    "heart": ("n", "Herz", "Herzen", "Herzen", "Herzen"),
    "diamond": ("f", "Raute", "Raute", "Rauten", "Rauten"),
    "ring": ("m", "Ring", "Ring", "Ringe", "Ringen"),
}
ARTICLE = {  # indefinite article by (gender, case)
    ("m", "nom"): "ein",
    ("m", "acc"): "einen",
    ("m", "dat"): "einem",
    ("f", "nom"): "eine",
    ("f", "acc"): "eine",
    ("f", "dat"): "einer",
    ("n", "nom"): "ein",
    ("n", "acc"): "ein",
    ("n", "dat"): "einem",
}
MIXED_ENDING = {  # adjective after "ein"/"eine"/... by (gender, case)
    ("m", "nom"): "er",
    ("m", "acc"): "en",
    ("m", "dat"): "en",
    ("f", "nom"): "e",
    ("f", "acc"): "e",
    ("f", "dat"): "en",
    ("n", "nom"): "es",
    ("n", "acc"): "es",
    ("n", "dat"): "en",
}
STRONG_PLURAL_ENDING = {"nom": "e", "acc": "e", "dat": "en"}  # adjective after an undeclined numeral
NUMBER = {2: "zwei", 3: "drei"}
RELATION = {"left_of": "links von", "right_of": "rechts von", "above": "über", "below": "unter"}  # + dative


def noun_phrase(mention: Mention, case: str) -> str:
    gender, singular, singular_dative, plural, plural_dative = SHAPE[mention.shape]
    stems = ([SIZE[mention.size]] if mention.size else []) + ([COLOUR[mention.colour]] if mention.colour else [])
    if mention.count == 1:
        ending = MIXED_ENDING[gender, case]
        noun = singular_dative if case == "dat" else singular
        return " ".join([ARTICLE[gender, case], *(s + ending for s in stems), noun])
    ending = STRONG_PLURAL_ENDING[case]
    noun = plural_dative if case == "dat" else plural
    return " ".join([NUMBER[mention.count], *(s + ending for s in stems), noun])


def item_phrase(item: Item, case: str) -> str:
    if isinstance(item, Relation):
        return f"{noun_phrase(item.subject, case)} {RELATION[item.relation]} {noun_phrase(item.landmark, 'dat')}"
    return noun_phrase(item, case)


def render(content: CaptionContent) -> str:
    def listed(case: str) -> str:
        return join_list([item_phrase(i, case) for i in content.items], " und ")

    if content.frame == 0:
        text = f"{listed('nom')}."
    elif content.frame == 1:
        text = f"Es gibt {listed('acc')}."
    elif content.frame == 2:
        text = f"Ein Bild mit {listed('dat')}."
    else:
        text = f"Zu sehen {'sind' if content.plural else 'ist'} {listed('nom')}."
    return capitalize_first(text)
