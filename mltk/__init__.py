"""mltk: turn an English CLIP into a multilingual one and measure cross-lingual retrieval."""

__version__ = "0.1.0"
