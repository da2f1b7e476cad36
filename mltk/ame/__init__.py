"""AME's word-level alignment (Mohammadshahi, Lebret and Aberer 2019, "Aligning Multilingual Word Embeddings for
Cross-Modal Retrieval Task") in mltk's terms:

- ``lexicon``: the ``lexicon`` artifact (``src_lang, src, tgt_lang, tgt``), imported from MUSE's ``src tgt`` lines,
  induced from parallel captions (``induce``), or emitted by the embedded world (``world``).
- ``words``: a word's vector in a model's trainable token table and in the frozen English table.
- ``rcsls``: the RCSLS alignment term (Joulin et al. 2018) that a training stage adds to its loss.
- ``bli``: bilingual lexicon induction accuracy (P@1 with CSLS, as MUSE reports it).
"""
