"""Presentation: tables (rich, Markdown, CSV) and pictures (matplotlib) of results, for people."""
