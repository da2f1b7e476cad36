"""Training: one loop (``mltk.train.loop.fit``) shared by every training stage, and the stages as tasks.

A stage (pretrain, train-nlt, train-le, train-continual, train-ccrk) describes *what* trains as a ``TrainTask``:
the tensors to train, the loss of global step ``k`` built deterministically from ``(seed, k)``, and a validation
score. ``fit`` owns *how*: AdamW (or the task's optimizer), warm-up and schedule, AMP, gradient clipping,
gradient averaging across ``torchrun`` processes (``mltk.core.distributed``), validation and best-state
selection, progress on stderr, and exact resume from the state it saves (safetensors and JSON, never pickle).
``mltk.train.stage`` is the one runner around it: inputs, validator, encoder, fit, best state, checkpoint, and the
one rule for which settings may change on resume. Each stage config embeds one ``LoopConfig`` (``config.loop``).
"""
