"""A nearest-neighbour index over embeddings (FAISS), its queries and their contact sheets (``faiss_index``)."""
