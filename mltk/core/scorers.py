"""The similarities a model is trained and scored with, named in one torch-free place: the losses train with them,
and the metrics, the index and evaluate (which import no torch on embeddings) check a requested scorer against
them."""

SIMILARITIES = ("cosine", "order")  # cosine of unit vectors; AME's order violation (mltk.losses.ranking)
