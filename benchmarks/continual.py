"""Training step time of CLL-CLIP with TEIR against plain CLL-CLIP, side by side in one run.

One step is ``mltk.train.loop.training_step``, the update ``mltk.train.loop.fit`` makes: the task loss (frozen tower
over the grown table, CLL-CLIP loss), backward, gradient clipping as the recipe says (cll-clip's ``clip_mode``), the
optimizer step, zero_grad. Both variants train the same German task of a
small synthetic world after an English one, each with its own copy of the table: plain CLL-CLIP (N(0, 0.02) rows,
``torch.optim.AdamW``) and TEIR (table-statistics rows, ``TeirAdamW`` with the per-token lambdas). Steps are
interleaved in rounds (A then B, B then A) so that drifts in machine load hit both alike; medians are reported.
Target: TEIR costs at most 5% (the paper: 11.1 h against 11.3 h).

Run: ``.venv/bin/python benchmarks/continual.py [--model mltk-tiny] [--batch-size 128] [--rounds 15]``
(``--model ViT-B-32`` gives the real table width 512 with random weights; ``--device cuda`` on a GPU).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from mltk import artifacts
from mltk.cll_clip.methods import make_method
from mltk.cll_clip.model import ContinualTextEncoder
from mltk.core.runtime import resolve_runtime
from mltk.data.synth import SynthConfig, synthesize
from mltk.encode.text_encoders import ClipTextEncoder
from mltk.models.clip import load_clip
from mltk.settings import resolve
from mltk.train import continual as C
from mltk.train.loop import build_optimizer, training_step
from mltk.train.teacher import teacher_embeddings
from mltk.vocab import clip_vocabulary, select_captions, train_vocabulary


def build_world(root: Path, model: str, images: int, vocab_size: int, runtime):
    result = synthesize(root / "world", SynthConfig(train=images, val=16, test=16, langs=("en", "de")))
    torch.manual_seed(0)
    clip = load_clip(model, device=runtime.device)  # random weights: step time does not depend on them
    captions = artifacts.load_captions(result.captions_path)
    image_ids = sorted(set(captions.column("image_id").to_pylist()))
    dim = clip.model.text_projection.shape[1]
    vectors = torch.nn.functional.normalize(
        torch.randn(len(image_ids), dim, generator=torch.Generator().manual_seed(1)), dim=-1
    )  # timing needs no real images
    teacher = ClipTextEncoder(clip)
    corpus = C.Corpus(
        captions,
        "train",
        ["en", "de"],
        {i: n for n, i in enumerate(image_ids)},
        vectors,
        lambda ids, texts: teacher_embeddings(teacher, clip.spec, ids, texts, runtime, root / "cache"),
        result.captions_path,
    )
    english = train_vocabulary(select_captions(captions, "en"), "en", None, vocab_size, 2)
    german = train_vocabulary(select_captions(captions, "de"), "de", english, vocab_size, 2)
    return clip, corpus, english, german


def prepare(variant: str, clip, corpus, english, german, args, runtime) -> C.CllClipTask:
    """The German task after an English one, on a fresh copy of the table (no validation: timing needs none)."""
    teir = variant == "TEIR"
    config = resolve(
        C.ContinualTrainConfig(
            images=Path("-"),
            captions=Path("-"),
            out=Path("-"),
            languages=("en", "de"),
            teir_init=teir,
            teir_reg=teir,
            steps=10_000,
            batch_size=args.batch_size,
            device=args.device,
        ),
        "train-continual",
    )
    encoder = ContinualTextEncoder(
        clip, clip_vocabulary().tokenizer, make_method("cll-clip", {}, clip), init_temperature=config.temperature
    )
    for index, (lang, vocabulary) in enumerate((("en", english), ("de", german))):
        task = C.prepare_task(config, encoder, corpus, vocabulary, index, lang, None, runtime)
    return task


def timed_step(task: C.CllClipTask, optimizer, params, step: int, runtime) -> float:
    device = runtime.device
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    training_step(task, step, task_loop(task), runtime, params, optimizer)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def task_loop(task: C.CllClipTask):
    return C.loop_config(task.config, task)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mltk-tiny")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--images", type=int, default=512, help="training images of the synthetic world")
    parser.add_argument("--vocab-size", type=int, default=2000, help="tokens of each task's new vocabulary")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps-per-round", type=int, default=4)
    args = parser.parse_args()
    runtime = resolve_runtime(args.device, "fp32")
    with tempfile.TemporaryDirectory() as tmp:
        clip, corpus, english, german = build_world(Path(tmp), args.model, args.images, args.vocab_size, runtime)
        variants = ["plain", "TEIR"]
        tasks = {v: prepare(v, clip, corpus, english, german, args, runtime) for v in variants}
        setups = {}
        for variant, task in tasks.items():
            params = task.parameters_to_train()
            setups[variant] = (build_optimizer(task, params, task_loop(task)), params)
        lambdas = tasks["TEIR"].lambdas
        print(
            f"model {args.model}, device {runtime.device}, batch {args.batch_size}, table "
            f"{tuple(tasks['TEIR'].encoder.table.shape)}, rows with lambda > 0: {int((lambdas > 0).sum())}"
        )
        times = {v: [] for v in variants}
        step = 0
        for round_index in range(args.rounds + 1):
            order = variants if round_index % 2 == 0 else variants[::-1]
            for variant in order:
                optimizer, params = setups[variant]
                for offset in range(args.steps_per_round):
                    elapsed = timed_step(tasks[variant], optimizer, params, step + offset, runtime)
                    if round_index > 0:  # the first round warms up
                        times[variant].append(elapsed)
            step += args.steps_per_round
        plain, teir = (statistics.median(times[v]) for v in variants)
        for variant in variants:
            print(
                f"{variant:>6}: median step {statistics.median(times[variant]) * 1e3:8.2f} ms "
                f"({len(times[variant])} steps)"
            )
        print(f"TEIR / plain step time: {teir / plain:.3f} (target <= 1.05)")


if __name__ == "__main__":
    main()
