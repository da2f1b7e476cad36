"""Greek captions with gender, number and case agreement of article, adjectives and noun.

Nominative in the bare list and after "Υπάρχει/Υπάρχουν" and "Στην εικόνα φαίνεται/φαίνονται"; accusative
after "με" and after the relations "αριστερά από", "δεξιά από", "πάνω από", "κάτω από": "ένας κόκκινος
κύκλος" -> "έναν κόκκινο κύκλο", "μια κόκκινη καρδιά", "ένα κόκκινο τετράγωνο"; plural "δύο κόκκινοι κύκλοι"
-> "δύο κόκκινους κύκλους", "τρία κόκκινα αστέρια". "μπλε", "μωβ", "πορτοκαλί" are indeclinable.
"""

from __future__ import annotations

from mltk.data.lang.content import CaptionContent, Item, Mention, Relation, capitalize_first, join_list

CODE, NAME, SCRIPT = "el", "Greek", "Greek"

# -ος/-η/-ο adjectives by stem (the stress never moves in these adjectives), or one indeclinable form.
ADJECTIVE_ENDINGS = {  # (gender, number, case) -> ending, for a stem stressed before the ending
    ("m", "sg", "nom"): "ος",
    ("m", "sg", "acc"): "ο",
    ("m", "pl", "nom"): "οι",
    ("m", "pl", "acc"): "ους",
    ("f", "sg", "nom"): "η",
    ("f", "sg", "acc"): "η",
    ("f", "pl", "nom"): "ες",
    ("f", "pl", "acc"): "ες",
    ("n", "sg", "nom"): "ο",
    ("n", "sg", "acc"): "ο",
    ("n", "pl", "nom"): "α",
    ("n", "pl", "acc"): "α",
}
STRESSED_ENDING = {"ος": "ός", "ο": "ό", "οι": "οί", "ους": "ούς", "η": "ή", "ες": "ές", "α": "ά"}
COLOUR = {  # (stem, ending stressed?) or an indeclinable string
    "red": ("κόκκιν", False),
    "green": ("πράσιν", False),
    "blue": "μπλε",
    "yellow": ("κίτριν", False),
    "purple": "μωβ",
    "orange": "πορτοκαλί",
    "white": ("άσπρ", False),
    "black": ("μαύρ", False),
}
SIZE = {"small": ("μικρ", True), "large": ("μεγάλ", False)}
SHAPE = {  # gender, nom sg, acc sg, nom pl, acc pl
    "circle": ("m", "κύκλος", "κύκλο", "κύκλοι", "κύκλους"),
    "square": ("n", "τετράγωνο", "τετράγωνο", "τετράγωνα", "τετράγωνα"),
    "triangle": ("n", "τρίγωνο", "τρίγωνο", "τρίγωνα", "τρίγωνα"),
    "star": ("n", "αστέρι", "αστέρι", "αστέρια", "αστέρια"),
    "cross": ("m", "σταυρός", "σταυρό", "σταυροί", "σταυρούς"),
    "heart": ("f", "καρδιά", "καρδιά", "καρδιές", "καρδιές"),
    "diamond": ("m", "ρόμβος", "ρόμβο", "ρόμβοι", "ρόμβους"),
    "ring": ("m", "δακτύλιος", "δακτύλιο", "δακτύλιοι", "δακτυλίους"),
}
ARTICLE = {
    ("m", "nom"): "ένας",
    ("m", "acc"): "έναν",
    ("f", "nom"): "μια",
    ("f", "acc"): "μια",
    ("n", "nom"): "ένα",
    ("n", "acc"): "ένα",
}
NUMBER = {(2, "m"): "δύο", (2, "f"): "δύο", (2, "n"): "δύο", (3, "m"): "τρεις", (3, "f"): "τρεις", (3, "n"): "τρία"}
RELATION = {"left_of": "αριστερά από", "right_of": "δεξιά από", "above": "πάνω από", "below": "κάτω από"}  # + acc


def adjective(entry, gender: str, number: str, case: str) -> str:
    if isinstance(entry, str):
        return entry
    stem, stressed_ending = entry
    ending = ADJECTIVE_ENDINGS[gender, number, case]
    return stem + (STRESSED_ENDING[ending] if stressed_ending else ending)


def noun_phrase(mention: Mention, case: str) -> str:
    gender, nom_sg, acc_sg, nom_pl, acc_pl = SHAPE[mention.shape]
    number = "sg" if mention.count == 1 else "pl"
    adjectives = ([SIZE[mention.size]] if mention.size else []) + ([COLOUR[mention.colour]] if mention.colour else [])
    noun = {("sg", "nom"): nom_sg, ("sg", "acc"): acc_sg, ("pl", "nom"): nom_pl, ("pl", "acc"): acc_pl}[number, case]
    determiner = ARTICLE[gender, case] if mention.count == 1 else NUMBER[mention.count, gender]
    return " ".join([determiner, *(adjective(a, gender, number, case) for a in adjectives), noun])


def item_phrase(item: Item, case: str) -> str:
    if isinstance(item, Relation):
        return f"{noun_phrase(item.subject, case)} {RELATION[item.relation]} {noun_phrase(item.landmark, 'acc')}"
    return noun_phrase(item, case)


def render(content: CaptionContent) -> str:
    def listed(case: str) -> str:
        return join_list([item_phrase(i, case) for i in content.items], " και ")

    if content.frame == 0:
        text = f"{listed('nom')}."
    elif content.frame == 1:
        text = f"{'Υπάρχουν' if content.plural else 'Υπάρχει'} {listed('nom')}."
    elif content.frame == 2:
        text = f"Μια εικόνα με {listed('acc')}."
    else:
        text = f"Στην εικόνα {'φαίνονται' if content.plural else 'φαίνεται'} {listed('nom')}."
    return capitalize_first(text)
