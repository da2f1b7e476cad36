"""Continual language learning (CLL-CLIP) pieces: the expandable-table text encoder and the baselines.

``mltk.cll_clip.methods`` holds the methods by name (``METHODS``, ``make_method``); ``mltk.cll_clip.options`` their
options, torch-free, so this package imports nothing itself (``mltk --help`` and ``mltk recipes show`` read the
options without torch).
"""
