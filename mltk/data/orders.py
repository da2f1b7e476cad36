"""Published task orders of continual language learning, shipped as data (``mltk/assets/language_orders.json``).

``cll-clip``: the 36-language order of CLL-CLIP's experiments (Yang et al. 2024), copied from the authors'
``scripts/run_cl.sh`` (``order222``): English, then the other 35 XM3600 languages in the order Python's
``random.shuffle`` gives with seed 222. ``mltk train-continual --order cll-clip`` trains in this order (the
captions must hold every language of it; ``--lang`` picks a prefix or a subset in the same order).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from mltk.core.errors import ConfigError

ORDERS_FILE = Path(__file__).resolve().parent.parent / "assets" / "language_orders.json"


@cache
def _orders() -> dict:
    return json.loads(ORDERS_FILE.read_text(encoding="utf-8"))


def order_names() -> list[str]:
    return list(_orders())


def language_order(name: str) -> tuple[str, ...]:
    """The languages of the published order ``name``, first task first."""
    orders = _orders()
    if name not in orders:
        raise ConfigError(f"--order must be one of {', '.join(orders)}, got {name!r}")
    return tuple(orders[name]["languages"])


def ordered_subset(name: str, languages: tuple[str, ...]) -> tuple[str, ...]:
    """``languages`` (all of the order when empty) in the order ``name``; a language outside it is an error."""
    order = language_order(name)
    if not languages:
        return order
    outside = [lang for lang in languages if lang not in order]
    if outside:
        raise ConfigError(f"language(s) {', '.join(outside)} are not in the {name} order ({', '.join(order)})")
    return tuple(lang for lang in order if lang in set(languages))
