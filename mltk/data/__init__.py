"""Data for mltk: the embedded synthetic scene world (``mltk.data.synth``) and its caption grammars
(``mltk.data.lang``)."""
