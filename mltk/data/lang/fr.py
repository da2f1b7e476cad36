"""French captions: colour after the noun, ``petit``/``grand`` before it, gender and number agreement
(``une petite étoile verte``, ``deux cercles rouges``, ``deux cœurs orange`` since *orange* is invariable,
``deux anneaux`` and ``trois croix`` with their irregular plurals). ``de`` elides before a vowel
(``à gauche d'un carré``, ``un dessin d'une étoile et de deux cercles``).
"""

from __future__ import annotations

from mltk.data.lang.content import CaptionContent, Item, Mention, Relation, capitalize_first, join_list

CODE, NAME, SCRIPT = "fr", "French", "Latin"

# masculine singular, feminine singular, masculine plural, feminine plural
COLOUR = {
    "red": ("rouge", "rouge", "rouges", "rouges"),
    "green": ("vert", "verte", "verts", "vertes"),
    "blue": ("bleu", "bleue", "bleus", "bleues"),
    "yellow": ("jaune", "jaune", "jaunes", "jaunes"),
    "purple": ("violet", "violette", "violets", "violettes"),
    "orange": ("orange", "orange", "orange", "orange"),
    "white": ("blanc", "blanche", "blancs", "blanches"),
    "black": ("noir", "noire", "noirs", "noires"),
}
SIZE = {"small": ("petit", "petite"), "large": ("grand", "grande")}  # singular only (groups name no size)
SHAPE = {  # gender, singular, plural
    "circle": ("m", "cercle", "cercles"),
    "square": ("m", "carré", "carrés"),
    "triangle": ("m", "triangle", "triangles"),
    "star": ("f", "étoile", "étoiles"),
    "cross": ("f", "croix", "croix"),
    "heart": ("m", "cœur", "cœurs"),
    "diamond": ("m", "losange", "losanges"),
    "ring": ("m", "anneau", "anneaux"),
}
NUMBER = {2: "deux", 3: "trois"}
RELATION = {"left_of": "à gauche", "right_of": "à droite", "above": "au-dessus", "below": "en dessous"}  # + de


def with_de(phrase: str) -> str:
    """``de`` + phrase with elision: ``d'un``, ``d'une``, but ``de deux``."""
    return f"d'{phrase}" if phrase[0] in "aeiouéèêhy" else f"de {phrase}"


def noun_phrase(mention: Mention) -> str:
    gender, singular, plural = SHAPE[mention.shape]
    feminine = gender == "f"
    words = []
    if mention.count == 1:
        words.append("une" if feminine else "un")
        if mention.size:
            words.append(SIZE[mention.size][feminine])
        words.append(singular)
    else:
        words += [NUMBER[mention.count], plural]
    if mention.colour:
        words.append(COLOUR[mention.colour][feminine + 2 * (mention.count > 1)])
    return " ".join(words)


def item_phrase(item: Item) -> str:
    if isinstance(item, Relation):
        return f"{noun_phrase(item.subject)} {RELATION[item.relation]} {with_de(noun_phrase(item.landmark))}"
    return noun_phrase(item)


def render(content: CaptionContent) -> str:
    phrases = [item_phrase(i) for i in content.items]
    if content.frame == 3:  # "Un dessin d'un cercle rouge et d'un carré bleu": de repeated on every conjunct
        return capitalize_first(f"Un dessin {join_list([with_de(p) for p in phrases], ' et ')}.")
    listed = join_list(phrases, " et ")
    frames = ("{}.", "Il y a {}.", "Une image avec {}.")
    return capitalize_first(frames[content.frame].format(listed))
