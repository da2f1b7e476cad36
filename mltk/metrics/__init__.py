"""Retrieval and continual-learning metrics, pure numpy/torch and chunked: ranks by counting and the scores built on
them (``ranks``), ranks with several positives per query (``grouped_ranks``), and the retrieval protocol that turns
embeddings into metrics (``retrieval``, ``retrieval_options``). No model is loaded here."""
