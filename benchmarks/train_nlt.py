"""NLT training samples per second: mltk's ``train_nlt`` against a straightforward version, side by side in one run.

    .venv/bin/python benchmarks/train_nlt.py [--steps 12] [--batch-size 32] [--pairs 1024] [--threads 1]
                                             [--tokenizer vocab|wordpiece]
    .venv/bin/python benchmarks/train_nlt.py --tower minilm ...   (the real all-MiniLM-L6-v2 tower:
                                                                  benchmarks/train_nlt_minilm.py)

Both sides train the same model on the same batches with the same optimizer, starting from the same weights:
a random-weight open_clip ViT-B-32 (saved as a checkpoint artifact, because an MLA checkpoint must name its base),
mltk's ``LanguageAcquisitionEncoder`` with acquirers for German and a trained shared embedding, real Multi30K
translation pairs (the first ``--pairs`` lines of ``../shared/data/multi30k/task1/raw/train.{en,de}``), and a
German tokenizer trained on all 29,000 German train lines: ``--tokenizer vocab`` (default) grows CLIP's BPE with
``mltk build-vocab``; ``--tokenizer wordpiece`` is an M-BERT-style WordPiece (the paper's kind of tokenizer, and
shorter German sequences, so trimming saves more).

- **mltk**: ``mltk.train.mla.train_nlt`` (the code behind ``mltk train-nlt``: ``NltTask`` on ``mltk.train.loop.fit``)
  with the English teacher embeddings cached once by ``mltk.train.teacher`` and each batch run as 4 groups of
  similar length, each trimmed to its longest sequence (``OpenClipTextTower.forward_embeddings``). The one-off
  teacher caching is timed on its own (same function, same inputs, same cache directory, so ``train_nlt`` then
  finds it cached) and reported with the number of steps it takes to pay for itself.
- **straightforward**: what a first implementation (and the MLA authors' code) does each step: run the frozen
  English CLIP (``encode_text``, 77 tokens) on the batch's English captions, pad the German batch to 77 tokens,
  run every block with the full causal mask and the acquirers, ``ln_final`` on all positions, pool at the first
  end token, project; MSE; backward; per-tensor clipping; AdamW (``mltk.train.loop.default_optimizer``) with the
  same warm-up. English tokens are tokenised once up front (which only helps this side).

Interleaving: each straightforward step k runs inside ``train_nlt``'s ``on_step`` callback right after mltk's step
k, so machine-load drifts hit both alike. The time of mltk's step k is everything between the end of callback k-1
and the start of callback k (loss, backward, clipping, AdamW, the loop's bookkeeping); step 0 (warm-up) and the
last step (it includes the final validation) are left out, and medians are reported. The losses of both sides
are printed: the math is the same (cached vs recomputed teacher, trimmed vs 77-padded causal forward pooled at
the first end token), so they agree up to float rounding. Target: >= 3x on CPU.

Threads: ``--threads 1`` by default. On a CPU shared with other work, 2 OpenMP threads per process slow down
erratically (spinning threads wait on a descheduled peer; memory-bound steps such as AdamW varied 10x between
steps), which swamps the comparison; give ``--threads N`` on a machine of your own.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import torch
from interleave import Interleaved, synchronize  # benchmarks/, the script's folder

from mltk import artifacts
from mltk.core.runtime import Runtime, resolve_runtime, seed_everything
from mltk.losses import mse_distill
from mltk.models.clip import clip_checkpoint_config, load_clip
from mltk.models.multilingual import LanguageAcquisitionEncoder, build_encoder
from mltk.models.text import end_positions
from mltk.settings.resolve import resolve
from mltk.settings.vocab import build_vocab
from mltk.train import mla
from mltk.train.batches import LanguageBatches
from mltk.train.loop import clip_gradients, default_optimizer, lr_factor
from mltk.train.teacher import teacher_embeddings

MULTI30K = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k" / "task1"
LANG = "de"


# ----------------------------------------------------------------------------------------------------------------
# Data, base model and vocabulary
# ----------------------------------------------------------------------------------------------------------------


def read_lines(path: Path, n: int | None = None) -> list[str]:
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and not lines[-1]:
        lines.pop()  # the final newline
    return [line.rstrip("\r").strip() for line in lines[:n]]


def multi30k_captions(train: int, val: int) -> pa.Table:
    """The first ``train``/``val`` lines of Multi30K task 1 in English and German as a captions table; line i of
    both languages shares ``caption_id`` ``{split}-{i}`` (a translation pair)."""
    if not (MULTI30K / "raw" / "train.de").is_file():
        raise SystemExit(f"needs the Multi30K text in {MULTI30K} (see /work/shared/data/README.md)")
    rows = {name: [] for name in ("image_id", "lang", "caption", "caption_id", "split")}
    for split, n in (("train", train), ("val", val)):
        images = read_lines(MULTI30K / "image_splits" / f"{split}.txt", n)
        for lang in ("en", LANG):
            for i, (image, caption) in enumerate(zip(images, read_lines(MULTI30K / "raw" / f"{split}.{lang}", n))):
                if caption:
                    for key, value in (
                        ("image_id", Path(image).stem),
                        ("lang", lang),
                        ("caption", caption),
                        ("caption_id", f"{split}-{i}"),
                        ("split", split),
                    ):
                        rows[key].append(value)
    return pa.table(rows)


def save_random_base(root: Path, architecture: str) -> Path:
    """A random-weight CLIP as a checkpoint artifact (what ``mltk pretrain`` would write), so the MLA encoder
    can name its base."""
    torch.manual_seed(0)
    return artifacts.write_checkpoint(
        root / "base",
        load_clip(architecture).model.state_dict(),
        clip_checkpoint_config(architecture),
        stage="pretrain",
    )


def german_tokenizer(root: Path, kind: str, size: int) -> Path:
    """A tokenizer for the German side, trained on all German train captions of Multi30K (29,000 lines).

    ``vocab``: ``mltk build-vocab`` (CLIP's BPE grown by ``size`` German tokens; CLIP's merges keep priority, so
    German stays close to CLIP's own segmentation). ``wordpiece``: a cased WordPiece tokenizer in M-BERT's format
    (``[CLS] ... [SEP]``, the paper's kind of tokenizer) trained with the ``tokenizers`` library, loaded through the
    transformers path as ``bert-base-multilingual-cased`` would be.
    """
    texts = [t for t in read_lines(MULTI30K / "raw" / "train.de") if t]
    if kind == "vocab":
        n = len(texts)
        table = pa.table(
            {
                "image_id": [str(i) for i in range(n)],
                "lang": [LANG] * n,
                "caption": texts,
                "caption_id": [str(i) for i in range(n)],
                "split": ["train"] * n,
            }
        )
        return build_vocab(table, LANG, root / "vocab", size=size)
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    directory = root / "wordpiece"
    directory.mkdir()
    trainer = BertWordPieceTokenizer(lowercase=False, strip_accents=False)
    trainer.train_from_iterator(texts, vocab_size=size, min_frequency=2)
    trainer.save_model(str(directory))
    # transformers 5 reads the word list from `vocab=` (a `vocab_file=` keyword is silently ignored)
    BertTokenizerFast(vocab=str(directory / "vocab.txt"), do_lower_case=False).save_pretrained(directory)
    return directory


# ----------------------------------------------------------------------------------------------------------------
# The straightforward side
# ----------------------------------------------------------------------------------------------------------------


def padded_forward(encoder: LanguageAcquisitionEncoder, tokens: torch.Tensor, lang: str) -> torch.Tensor:
    """The acquisition encoder without trimming, as open_clip's ``encode_text`` is written: German tokens
    [B, 77] -> features [B, D]."""
    tower = encoder.tower
    x = encoder.embedding(tokens) + tower.positional_embedding  # [B, 77, W]
    if not tower._batch_first:
        x = x.transpose(0, 1)
    for index, block in enumerate(tower.blocks):
        x = block(x, attn_mask=tower.attn_mask)  # full 77 x 77 causal mask
        x = encoder.acquirers[lang][index](x)
    if not tower._batch_first:
        x = x.transpose(0, 1)
    x = tower.ln_final(x)  # every position, then pool
    x = x[torch.arange(x.shape[0]), end_positions(tokens, encoder.non_native.end_token_id)]  # [B, W]
    return x @ tower.text_projection  # [B, D]


class StraightforwardNlt:
    """NLT recomputing the English teacher every step and padding every batch to 77 tokens."""

    def __init__(
        self,
        encoder: LanguageAcquisitionEncoder,
        english: torch.Tensor,
        german: torch.Tensor,
        config: mla.MlaConfig,
        runtime: Runtime,
    ):
        self.encoder, self.english, self.german, self.runtime = encoder, english, german, runtime  # [N, 77] each
        self.loop = config.loop
        self.batches = LanguageBatches({LANG: len(german)}, config.batch_size, config.loop.steps, config.loop.seed)
        self.params = encoder.trainable_tensors([LANG], embedding=True)
        self.optimizer = default_optimizer(self.params, self.loop)
        self.teacher_seconds = 0.0  # of the last step

    def step(self, step: int) -> float:
        lang, index = self.batches.batch(step)
        index = torch.as_tensor(index)
        device = self.runtime.device
        start = time.perf_counter()
        with torch.no_grad(), self.runtime.autocast():
            teacher = self.encoder.clip.model.encode_text(self.english[index].to(device)).float()  # [b, D]
        synchronize(device)
        self.teacher_seconds = time.perf_counter() - start
        with self.runtime.autocast():
            loss = mse_distill(padded_forward(self.encoder, self.german[index].to(device), lang).float(), teacher)
        loss.backward()
        trained = list(self.params.values())
        if self.loop.grad_clip is not None:
            clip_gradients(trained, self.loop.grad_clip, self.loop.clip_mode)
        for group in self.optimizer.param_groups:
            group["lr"] = self.loop.lr * lr_factor(step, self.loop)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())


def pad_to(tokens: torch.Tensor, length: int) -> torch.Tensor:
    """[N, L] -> [N, length] with id 0 after the end (the WordPiece tokenizer pads to the longest text only).
    What follows the first end token never reaches the pooled feature, so the pad id does not matter."""
    return torch.nn.functional.pad(tokens, (0, length - tokens.shape[1]), value=0)


# ----------------------------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------------------------


def main() -> None:
    import sys

    if "--tower" in sys.argv or any(a.startswith("--tower=") for a in sys.argv):  # the real MiniLM tower
        from train_nlt_minilm import main as minilm_main

        return minilm_main(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ViT-B-32", help="open_clip architecture (random weights)")
    parser.add_argument("--steps", type=int, default=12, help="training steps of each side (>= 4)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=1024, help="Multi30K train translation pairs")
    parser.add_argument("--val-pairs", type=int, default=32, help="Multi30K val pairs (train_nlt's validation)")
    parser.add_argument(
        "--tokenizer",
        default="vocab",
        choices=("vocab", "wordpiece"),
        help="German tokenizer: mltk build-vocab BPE, or an M-BERT-style WordPiece",
    )
    parser.add_argument("--vocab-size", type=int, default=10000, help="new BPE tokens (vocab) / WordPiece size")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--show-losses", type=int, default=5)
    args = parser.parse_args()
    if args.steps < 4:
        parser.error("--steps must be at least 4 (the first and last steps are not timed)")
    torch.set_num_threads(args.threads)
    runtime = resolve_runtime(args.device, args.precision)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        table = multi30k_captions(args.pairs, args.val_pairs)
        captions = artifacts.write_captions(root / "captions", table, stage="benchmark")
        base = save_random_base(root, args.model)
        vocab = german_tokenizer(root, args.tokenizer, args.vocab_size)
        config = resolve(
            mla.MlaConfig(
                captions=captions,
                out=root / "nlt",
                model=str(base),
                tokenizer=str(vocab),
                languages=(LANG,),
                batch_size=args.batch_size,
                device=args.device,
                precision=args.precision,
                cache_dir=root / "cache",
                loop={"steps": args.steps, "lr": args.lr},
            ),
            "train-nlt",
        )

        # The straightforward side's encoder: built exactly as train_nlt builds its own (same seed, same calls),
        # so both start from the same weights (the step-0 losses show it).
        seed_everything(config.loop.seed)
        encoder = build_encoder(str(base), None, str(vocab), [LANG], device=runtime.device)
        encoder.train()

        # One-off cost of mltk: the English teacher embeddings of the train (and validation) pairs, cached by the
        # same function with the same inputs that train_nlt uses, so train_nlt then finds them cached.
        teacher_start = time.perf_counter()
        cached = 0
        for split in (config.split, config.val_split):
            pairs, english = mla.translation_pairs(table, split, [LANG])
            needed = sorted(set(pairs[LANG][0]))
            teacher_embeddings(encoder, encoder.spec, needed, [english[c] for c in needed], runtime, config.cache_dir)
            cached += len(needed)
        teacher_seconds = time.perf_counter() - teacher_start
        caches_before = sorted(p.name for p in config.cache_dir.iterdir())

        pairs, english = mla.translation_pairs(table, config.split, [LANG])
        ids, german_texts = pairs[LANG]
        german_tokens = pad_to(encoder.tokenize(german_texts, LANG), encoder.tower.context_length)  # [N, 77]
        english_tokens = encoder.clip.tokenizer([english[c] for c in ids])  # [N, 77]
        baseline = StraightforwardNlt(encoder, english_tokens, german_tokens, config, runtime)

        record = Interleaved(baseline, runtime.device)

        mla.train_nlt(config, on_step=record)
        if sorted(p.name for p in config.cache_dir.iterdir()) != caches_before:
            raise SystemExit("train_nlt did not find the teacher cache: the timing would include it")

    timed = range(1, args.steps - 1)
    mltk_step, straight_step, teacher_step = record.medians(timed)
    german_lengths = (end_positions(german_tokens, encoder.non_native.end_token_id) + 1).float()
    english_lengths = (english_tokens != 0).sum(1).float()
    diffs, losses = record.loss_differences(args.steps), record.losses
    relative = max(d / abs(losses["straightforward"][k]) for k, d in enumerate(diffs))
    b = args.batch_size
    batch_lengths = [int(german_lengths[torch.as_tensor(baseline.batches.batch(k)[1])].max()) for k in timed]
    amortised = teacher_seconds / (straight_step - mltk_step)

    print(
        f"model {args.model} (random weights) + MLA acquirers ({LANG}), vocab {encoder.non_native.vocab_size} "
        f"x {encoder.embedding.table.embedding_dim}, device {runtime.device} {runtime.precision}, "
        f"threads {torch.get_num_threads()}"
    )
    print(
        f"data: {len(ids)} Multi30K train pairs en-{LANG}; tokens per caption mean/max: {LANG} "
        f"{german_lengths.mean():.1f}/{int(german_lengths.max())}, en {english_lengths.mean():.1f}/"
        f"{int(english_lengths.max())} (context 77)"
    )
    print(
        f"batch {b}, {args.steps} steps each, interleaved; timed steps 1..{args.steps - 2} "
        f"({len(timed)} per side), medians; longest caption per batch: mean "
        f"{statistics.mean(batch_lengths):.1f} tokens (straightforward: 77; mltk cuts length groups shorter)"
    )
    print(
        f"straightforward : {b / straight_step:8.2f} samples/s  ({straight_step:.3f} s/step, of which "
        f"teacher recompute {teacher_step:.3f} s)"
    )
    print(f"mltk train_nlt  : {b / mltk_step:8.2f} samples/s  ({mltk_step:.3f} s/step)")
    print(f"speed ratio mltk/straightforward: {straight_step / mltk_step:.2f}x (target >= 3x on CPU)")
    print(
        f"one-off teacher caching: {teacher_seconds:.2f} s for {cached} English captions "
        f"({cached / teacher_seconds:.1f} captions/s); amortised after {amortised:.1f} steps "
        f"({amortised * b / len(ids):.2f} of an epoch, whatever the dataset size)"
    )
    shown = range(min(args.show_losses, args.steps))
    print("losses mltk           : " + " ".join(f"{losses['mltk'][k]:.6f}" for k in shown))
    print("losses straightforward: " + " ".join(f"{losses['straightforward'][k]:.6f}" for k in shown))
    print(f"max abs loss difference over {args.steps} steps: {max(diffs):.2e} (relative {relative:.2e})")


if __name__ == "__main__":
    main()
