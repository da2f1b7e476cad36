"""Italian captions: colour after the noun with agreement (``una stella rossa``, ``due croci bianche``;
``blu`` and ``viola`` are invariable), ``piccolo``/``grande`` before it, and the indefinite article chosen by the
next word (``un``/``uno``/``una``/``un'``). "C'è" for one singular item, "Ci sono" otherwise.
"""

from __future__ import annotations

from mltk.data.lang.content import CaptionContent, Item, Mention, Relation, capitalize_first, join_list

CODE, NAME, SCRIPT = "it", "Italian", "Latin"

# masculine singular, feminine singular, masculine plural, feminine plural
COLOUR = {
    "red": ("rosso", "rossa", "rossi", "rosse"),
    "green": ("verde", "verde", "verdi", "verdi"),
    "blue": ("blu", "blu", "blu", "blu"),
    "yellow": ("giallo", "gialla", "gialli", "gialle"),
    "purple": ("viola", "viola", "viola", "viola"),
    "orange": ("arancione", "arancione", "arancioni", "arancioni"),
    "white": ("bianco", "bianca", "bianchi", "bianche"),
    "black": ("nero", "nera", "neri", "nere"),
}
SIZE = {"small": ("piccolo", "piccola"), "large": ("grande", "grande")}
SHAPE = {  # gender, singular, plural
    "circle": ("m", "cerchio", "cerchi"),
    "square": ("m", "quadrato", "quadrati"),
    "triangle": ("m", "triangolo", "triangoli"),
    "star": ("f", "stella", "stelle"),
    "cross": ("f", "croce", "croci"),
    "heart": ("m", "cuore", "cuori"),
    "diamond": ("m", "rombo", "rombi"),
    "ring": ("m", "anello", "anelli"),
}
NUMBER = {2: "due", 3: "tre"}
RELATION = {"left_of": "a sinistra di", "right_of": "a destra di", "above": "sopra", "below": "sotto"}
VOWELS = "aeiouàèéìòù"


def indefinite_article(feminine: bool, next_word: str) -> str:
    if feminine:
        return "un'" if next_word[0] in VOWELS else "una "
    impure = (
        (next_word[0] == "s" and next_word[1] not in VOWELS)
        or next_word[0] in "zxy"
        or next_word.startswith(("gn", "ps", "pn"))
    )
    return "uno " if impure else "un "


def noun_phrase(mention: Mention) -> str:
    gender, singular, plural = SHAPE[mention.shape]
    feminine = gender == "f"
    if mention.count == 1:
        words = ([SIZE[mention.size][feminine]] if mention.size else []) + [singular]
    else:
        words = [NUMBER[mention.count], plural]
    if mention.colour:
        words.append(COLOUR[mention.colour][feminine + 2 * (mention.count > 1)])
    phrase = " ".join(words)
    return indefinite_article(feminine, phrase) + phrase if mention.count == 1 else phrase


def item_phrase(item: Item) -> str:
    if isinstance(item, Relation):
        return f"{noun_phrase(item.subject)} {RELATION[item.relation]} {noun_phrase(item.landmark)}"
    return noun_phrase(item)


def render(content: CaptionContent) -> str:
    listed = join_list([item_phrase(i) for i in content.items], " e ")
    if content.frame == 0:
        text = f"{listed}."
    elif content.frame == 1:
        verb = "Ci sono" if content.plural else "C'è"
        text = f"{verb} {listed}."
    elif content.frame == 2:
        text = f"Un'immagine con {listed}."
    else:
        text = f"Un disegno di {listed}."
    return capitalize_first(text)
