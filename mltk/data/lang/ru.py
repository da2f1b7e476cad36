"""Russian captions with gender, case and numeral agreement.

Cases used: nominative (bare list, "На картинке ..."), genitive ("Изображение ..."; after "слева от",
"справа от"), instrumental ("Картинка с ..."; after "над", "под"). Numerals 2 and 3 in the nominative take the
genitive singular noun, with the adjective in the genitive plural for masculine and neuter nouns and in the
nominative plural for feminine ones: "два красных круга", "две красные звезды", "два красных сердца"; in the
oblique cases the whole phrase is plural: "двух красных кругов", "двумя красными кругами".
"""

from __future__ import annotations

from mltk.data.lang.content import CaptionContent, Item, Mention, Relation, capitalize_first, join_list

CODE, NAME, SCRIPT = "ru", "Russian", "Cyrillic"

# Adjective endings by declension type, keyed by (gender or "pl", case).
_KEYS = (
    ("m", "nom"),
    ("f", "nom"),
    ("n", "nom"),
    ("m", "gen"),
    ("f", "gen"),
    ("n", "gen"),
    ("m", "ins"),
    ("f", "ins"),
    ("n", "ins"),
    ("pl", "nom"),
    ("pl", "gen"),
    ("pl", "ins"),
)
ADJECTIVE_ENDINGS = {
    "hard": dict(zip(_KEYS, ("ый", "ая", "ое", "ого", "ой", "ого", "ым", "ой", "ым", "ые", "ых", "ыми"))),
    "soft": dict(zip(_KEYS, ("ий", "яя", "ее", "его", "ей", "его", "им", "ей", "им", "ие", "их", "ими"))),
    "velar": dict(zip(_KEYS, ("ий", "ая", "ое", "ого", "ой", "ого", "им", "ой", "им", "ие", "их", "ими"))),
    "stressed": dict(zip(_KEYS, ("ой", "ая", "ое", "ого", "ой", "ого", "им", "ой", "им", "ие", "их", "ими"))),
}
COLOUR = {  # stem, declension type
    "red": ("красн", "hard"),
    "green": ("зелён", "hard"),
    "blue": ("син", "soft"),
    "yellow": ("жёлт", "hard"),
    "purple": ("фиолетов", "hard"),
    "orange": ("оранжев", "hard"),
    "white": ("бел", "hard"),
    "black": ("чёрн", "hard"),
}
SIZE = {"small": ("маленьк", "velar"), "large": ("больш", "stressed")}
# gender, then forms: nom sg, gen sg, ins sg, gen pl, ins pl
SHAPE = {
    "circle": ("m", "круг", "круга", "кругом", "кругов", "кругами"),
    "square": ("m", "квадрат", "квадрата", "квадратом", "квадратов", "квадратами"),
    "triangle": ("m", "треугольник", "треугольника", "треугольником", "треугольников", "треугольниками"),
    "star": ("f", "звезда", "звезды", "звездой", "звёзд", "звёздами"),
    "cross": ("m", "крест", "креста", "крестом", "крестов", "крестами"),
    "heart": ("n", "сердце", "сердца", "сердцем", "сердец", "сердцами"),
    "diamond": ("m", "ромб", "ромба", "ромбом", "ромбов", "ромбами"),
    "ring": ("n", "кольцо", "кольца", "кольцом", "колец", "кольцами"),
}
NUMERAL = {  # (count, case) -> form; the nominative of 2 depends on gender
    (2, "nom", "m"): "два",
    (2, "nom", "n"): "два",
    (2, "nom", "f"): "две",
    (3, "nom", "m"): "три",
    (3, "nom", "n"): "три",
    (3, "nom", "f"): "три",
    (2, "gen"): "двух",
    (3, "gen"): "трёх",
    (2, "ins"): "двумя",
    (3, "ins"): "тремя",
}
RELATION = {  # preposition, case it governs
    "left_of": ("слева от", "gen"),
    "right_of": ("справа от", "gen"),
    "above": ("над", "ins"),
    "below": ("под", "ins"),
}


def adjective(stem_and_type: tuple[str, str], number_gender: str, case: str) -> str:
    stem, declension = stem_and_type
    return stem + ADJECTIVE_ENDINGS[declension][number_gender, case]


def noun(shape: str, plural: bool, case: str) -> str:
    _, nom_sg, gen_sg, ins_sg, gen_pl, ins_pl = SHAPE[shape]
    if plural:
        return {"gen": gen_pl, "ins": ins_pl}[case]
    return {"nom": nom_sg, "gen": gen_sg, "ins": ins_sg}[case]


def noun_phrase(mention: Mention, case: str) -> str:
    gender = SHAPE[mention.shape][0]
    adjectives = ([SIZE[mention.size]] if mention.size else []) + ([COLOUR[mention.colour]] if mention.colour else [])
    if mention.count == 1:
        return " ".join([*(adjective(a, gender, case) for a in adjectives), noun(mention.shape, False, case)])
    if case == "nom":  # "два красных круга", "две красные звезды"
        numeral = NUMERAL[mention.count, "nom", gender]
        adjective_case = "nom" if gender == "f" else "gen"
        words = [adjective(a, "pl", adjective_case) for a in adjectives]
        return " ".join([numeral, *words, noun(mention.shape, False, "gen")])
    numeral = NUMERAL[mention.count, case]
    return " ".join([numeral, *(adjective(a, "pl", case) for a in adjectives), noun(mention.shape, True, case)])


def with_s(phrase: str) -> str:
    """The preposition "с" (with), "со" before a sibilant + consonant cluster ("со звездой")."""
    first, second = phrase[0], phrase[1:2]
    cluster = first in "сзшжщ" and second and second not in "аеёиоуыэюяь"
    return f"со {phrase}" if cluster else f"с {phrase}"


def item_phrase(item: Item, case: str) -> str:
    if isinstance(item, Relation):
        preposition, governed = RELATION[item.relation]
        return f"{noun_phrase(item.subject, case)} {preposition} {noun_phrase(item.landmark, governed)}"
    return noun_phrase(item, case)


def render(content: CaptionContent) -> str:
    def listed(case: str) -> str:
        return join_list([item_phrase(i, case) for i in content.items], " и ")

    if content.frame == 0:
        text = f"{listed('nom')}."
    elif content.frame == 1:
        text = f"На картинке {listed('nom')}."
    elif content.frame == 2:
        # "с" is repeated on no conjunct after the first: "с красным кругом и синим квадратом"
        text = f"Картинка {with_s(listed('ins'))}."
    else:
        text = f"Изображение {listed('gen')}."
    return capitalize_first(text)
