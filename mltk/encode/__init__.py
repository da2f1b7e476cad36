"""Frozen towers run over data once: images (``images``), videos as mean-pooled frames (``videos``) and captions or
plain sentences (``texts``), through the text encoder a model or checkpoint names (``text_encoders``)."""
