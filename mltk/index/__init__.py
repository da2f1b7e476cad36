"""A nearest-neighbour index over embeddings (FAISS), its queries and their contact sheets (``faiss_index``;
the sheet's tiles are drawn by ``sheet_drawing``)."""
