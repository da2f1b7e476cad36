"""The version of mltk, recorded in every manifest."""

__version__ = "0.1.0"
