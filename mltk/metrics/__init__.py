"""Retrieval and continual-learning metrics, pure numpy/torch and chunked: ranks by counting and the scores built on
them (``ranks``), ranks with several positives per query (``grouped_ranks``), the retrieval protocol that turns
embeddings into metrics (``retrieval``, ``retrieval_options``, and ``retrieval_rows`` for the rows it ranks), and
average recall and forgetting over a sequence of tasks (``continual``). No model is loaded here."""
