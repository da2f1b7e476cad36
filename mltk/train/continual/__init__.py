"""``mltk train-continual``: CLL-CLIP, learning languages one after another (with TEIR and baselines).

Yang et al., "Embracing Language Inclusivity and Diversity in CLIP through Continual Language Learning" (AAAI
2024). The text tower of a frozen CLIP reads an expandable token-embedding table
(``mltk.cll_clip.model``); for each task t (one language, English first by default):

1. **Vocabulary.** V_t = V_{t-1} ∪ V̂_t, V̂_t a BPE vocabulary trained on the task's training captions
   (``mltk.vocab``; ``vocab_size`` tokens, 10K in the paper), or taken prebuilt from ``vocab_dir/<lang>``.
2. **Growth.** The table gains a row per new token: N(mu, sigma) with the scalar mean and std of the previous
   table under TEIR's initialisation, N(0, 0.02) for plain CLL-CLIP (``mltk.cll_clip.teir.init_new_rows``).
3. **Training** of the table, the temperature (from 0.07) and the method's own tensors with

       loss = gamma1 * InfoNCE(image, text) + gamma2 * MSE(English teacher, text)      (0.01 and 1)

   (``mltk.losses.CLLCLIPLoss``), where the teacher is the frozen CLIP's unnormalised English embedding of the
   caption with the same ``caption_id`` (encoded once, cached on disk: ``mltk.train.teacher``); captions without an
   English counterpart are left out. AdamW lr 5e-5, weight decay 0.05, 10% linear warm-up then constant,
   gradients clipped by their global norm (1.0), batch 128, 3 epochs; an epoch is one pass over the task's
   captions (the authors' definition; ``epoch_unit="images"``: one pass over its images, one caption of each
   drawn per step, batches of distinct images). The epoch with the best validation recall sum (R@1+R@5+R@10,
   both directions) of the task's language is kept. Under TEIR's regularisation the optimizer is ``TeirAdamW``:
   lambda_j = 1 / (1 + c_j) for the task's tokens (``token_sets``: occurrence in its text, the default, or
   membership of its new vocabulary), 0 (frozen, no decay) for the others and the special tokens, applied to the
   clipped gradient before the moment estimates and to the decoupled decay (each part alone for the ablations:
   ``teir_reg_grad``, ``teir_reg_decay``). A method's own tensors (adapters, LoRA, prompts) train at the table's
   lr unless ``method_lr``.
4. **Evaluation** of every language seen so far on the test split: a_{j,i} (``metric``, t2i R@1 by default),
   AR_j and F_j (``mltk.metrics.continual.continual_metrics``).

Text only. On a text-only tower (a transformers / sentence-transformers folder such as all-MiniLM-L6-v2: no image
tower, no image embeddings) the vocabulary grown is the tower's WordPiece (``mltk.vocab.wordpiece``), the table
replaces its word embeddings only, the loss is the MSE term alone (gamma1 = 0: InfoNCE needs images) and a_{j,i}
is caption-to-caption retrieval of language i against English (``x2en.R@1``), English being the teacher, the
frozen tower (``judges.CaptionRetrieval``). The tasks are the non-English languages; validation is the recall sum
of that retrieval on the validation split.

The English task. Its teacher is the frozen CLIP on the very same caption, so its MSE term starts at zero and
anchors the English rows where CLIP had them while the (0.01-weighted) contrastive term adapts them to the image
embeddings; its vocabulary is grown like every other task's (CLIP already holds most English words, so few new
tokens occur). English is then the first task that later languages can make forget.

Output: a checkpoint artifact (format ``cll``, readable by ``mltk evaluate --model`` and ``mltk index``) holding
the final table, temperature and method tensors (``model.safetensors``), the checkpoint config naming the base model,
the final vocabulary (``vocab/``) and the method, plus ``continual.json`` (tasks, metric, the matrix, AR, F,
per-task test metrics, validation history and vocabulary sizes; ``read_summary`` returns it for the CLI to print),
``continual_matrix.png``, ``continual_curve.png`` and the vocabularies built on the way (``vocabs/NN-lang``).
Methods that route by language (``mla``) say ``needs_task_identity: true`` in the checkpoint config, continual.json
and the manifest.

Resume. The artifact is built in its partial directory (``mltk.train.stage.open_run``, which records the run's
settings and continues it only under the one resume rule, ``mltk.train.loop_state.MAY_CHANGE_ON_RESUME``): each
finished task is a complete ``cll`` checkpoint ``tasks/NN-lang`` (with the method's training state: Fisher, replay
memory), which a rerun loads instead of training the task again, and the running task keeps the training loop's
exact-resume state in ``train/NN-lang`` (``fit`` with the task's own LoopConfig, ``loop_config``; the best state
comes back through ``mltk.train.stage.fit_best``). The result equals an uninterrupted run on the CPU. The task
checkpoints are removed when the run completes unless ``keep_task_checkpoints``.
"""

from mltk.cll_clip.teir import TeirAdamW
from mltk.train.continual.data import Corpus, Examples, TaskData, task_data
from mltk.train.continual.judges import CaptionRetrieval, ImageRetrieval, evaluate_languages
from mltk.train.continual.order import (
    CONTINUAL_FILE,
    ContinualTrainConfig,
    final_summary,
    metric_value,
    read_summary,
    task_order,
    teir_parts,
)
from mltk.train.continual.report import CURVE_PNG, MATRIX_PNG
from mltk.train.continual.run import loop_config, prepare_task, split_task_data, train_continual, write_task_checkpoint  # noqa: F401
from mltk.train.continual.task import (
    CllClipTask,
    RecallSumValidator,
    task_seed,
    task_vocabulary,
    teir_lambdas,
    vocabulary_summary,
)

__all__ = [
    "CONTINUAL_FILE",
    "CURVE_PNG",
    "MATRIX_PNG",
    "CaptionRetrieval",
    "CllClipTask",
    "ContinualTrainConfig",
    "ImageRetrieval",
    "Corpus",
    "Examples",
    "RecallSumValidator",
    "TaskData",
    "TeirAdamW",
    "evaluate_languages",
    "final_summary",
    "loop_config",
    "metric_value",
    "prepare_task",
    "read_summary",
    "task_data",
    "task_order",
    "task_seed",
    "task_vocabulary",
    "teir_lambdas",
    "teir_parts",
    "train_continual",
    "vocabulary_summary",
]
