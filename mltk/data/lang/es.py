"""Spanish captions: colour after the noun with gender/number agreement, size before it, and ``grande``
apocopated to ``gran`` before a singular noun (``un gran círculo rojo``, ``una pequeña estrella roja``,
``dos corazones anaranjados``, ``tres cruces verdes``).
"""

from __future__ import annotations

from mltk.data.lang.content import CaptionContent, Item, Mention, Relation, capitalize_first, join_list

CODE, NAME, SCRIPT = "es", "Spanish", "Latin"

# masculine singular, feminine singular, masculine plural, feminine plural
COLOUR = {
    "red": ("rojo", "roja", "rojos", "rojas"),
    "green": ("verde", "verde", "verdes", "verdes"),
    "blue": ("azul", "azul", "azules", "azules"),
    "yellow": ("amarillo", "amarilla", "amarillos", "amarillas"),
    "purple": ("morado", "morada", "morados", "moradas"),
    "orange": ("anaranjado", "anaranjada", "anaranjados", "anaranjadas"),
    "white": ("blanco", "blanca", "blancos", "blancas"),
    "black": ("negro", "negra", "negros", "negras"),
}
SIZE = {"small": ("pequeño", "pequeña"), "large": ("gran", "gran")}  # before a singular noun: "gran"
SHAPE = {  # gender, singular, plural
    "circle": ("m", "círculo", "círculos"),
    "square": ("m", "cuadrado", "cuadrados"),
    "triangle": ("m", "triángulo", "triángulos"),
    "star": ("f", "estrella", "estrellas"),
    "cross": ("f", "cruz", "cruces"),
    "heart": ("m", "corazón", "corazones"),
    "diamond": ("m", "rombo", "rombos"),
    "ring": ("m", "anillo", "anillos"),
}
NUMBER = {2: "dos", 3: "tres"}
RELATION = {"left_of": "a la izquierda de", "right_of": "a la derecha de", "above": "encima de", "below": "debajo de"}


def noun_phrase(mention: Mention) -> str:
    gender, singular, plural = SHAPE[mention.shape]
    feminine = gender == "f"
    if mention.count == 1:
        words = ["una" if feminine else "un"]
        if mention.size:
            words.append(SIZE[mention.size][feminine])
        words.append(singular)
    else:
        words = [NUMBER[mention.count], plural]
    if mention.colour:
        words.append(COLOUR[mention.colour][feminine + 2 * (mention.count > 1)])
    return " ".join(words)


def item_phrase(item: Item) -> str:
    if isinstance(item, Relation):
        return f"{noun_phrase(item.subject)} {RELATION[item.relation]} {noun_phrase(item.landmark)}"
    return noun_phrase(item)


def render(content: CaptionContent) -> str:
    # "y" would become "e" before an /i/ sound; every phrase here starts with un/una/dos/tres.
    listed = join_list([item_phrase(i) for i in content.items], " y ")
    frames = ("{}.", "Hay {}.", "Una imagen con {}.", "Un dibujo de {}.")
    return capitalize_first(frames[content.frame].format(listed))
