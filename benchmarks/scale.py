"""Cost per row and peak memory of the data stages and of train-nlt's start at 1x, 5x and 25x Multi30K.

    .venv/bin/python benchmarks/scale.py [--scales 1 5 25] [--nlt-scales 1 5 25] [--work /tmp/mltk-scale]
        [--row-group-rows N]

The corpus at scale k is Multi30K task 1's German-English training pairs (29,000 images) and validation pairs
(1,014) repeated k times, each repetition r giving its captions the suffix `` rR`` and its image names the stem
suffix ``_R`` (so every row is a new caption of a new image). Each stage at each scale runs in a process of its
own (``python benchmarks/scale.py --child STAGE ...``), so the peak resident memory (``resource.getrusage``'s
``ru_maxrss``) is that stage's, the Python, pyarrow and torch the process imports included:

- ``import en``: ``import-data lines`` of the English train lines; ``import de``: ``--translation-of en
  --parent`` the English import (the German lines take the English caption_ids, image by image);
- ``merge``: ``merge-captions`` of the four imports (English and German, train and val);
- ``check-overlap``: the merged captions' training images against the German import's images;
- ``encode-texts``: the English val captions (1,014 k rows) by the tiny CLIP (``mltk-tiny``, random weights saved
  as a checkpoint);
- ``train-nlt``: seconds from the call to the end of the first step (``--steps 2``, batch 64, German acquirers on
  the tiny CLIP, a German vocabulary grown once at 1x, an empty teacher cache per run).

Printed side by side: wall seconds, CPU seconds (user + system of the process: on a shared machine the wall clock
also counts the other processes) and peak MB at each scale, and the cost per extra row between the smallest and
the largest scale (extra seconds / extra rows, extra MB / extra rows). Then a projection, stated as one, of the
measured per-row costs to CC3M in 36 languages (about 120 million caption rows; 3.3 million images).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MULTI30K = Path(os.environ.get("MLTK_SHARED_DATA") or ROOT.parent / "shared" / "data") / "multi30k" / "task1"
DATA_STAGES = ("import en", "import de", "merge", "check-overlap", "encode-texts")
CC3M_ROWS = 120_000_000


# ----------------------------------------------------------------------------------------------------------------
# The corpus
# ----------------------------------------------------------------------------------------------------------------


def write_scaled(work: Path, scale: int) -> Path:
    """``work/xK/{train,val}.{en,de}`` and ``{train,val}.images``: Multi30K repeated ``scale`` times."""
    folder = work / f"x{scale}"
    if (folder / "done").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for split, images in (("train", "train.txt"), ("val", "val.txt")):
        names = (MULTI30K / "image_splits" / images).read_text().splitlines()
        lines = {
            lang: (MULTI30K / "raw" / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
            for lang in ("en", "de")
        }
        with open(folder / f"{split}.images", "w") as out:
            for r in range(scale):
                out.writelines(f"{name.rsplit('.', 1)[0]}_{r}.jpg\n" for name in names)
        for lang, texts in lines.items():
            with open(folder / f"{split}.{lang}", "w", encoding="utf-8") as out:
                for r in range(scale):
                    out.writelines(f"{text} r{r}\n" for text in texts)
    (folder / "done").write_text("")
    return folder


# ----------------------------------------------------------------------------------------------------------------
# One stage in a process of its own
# ----------------------------------------------------------------------------------------------------------------


def child(stage: str, scale: int, work: Path) -> dict:
    """Run ``stage`` at ``scale`` (its inputs made by the earlier stages); seconds and rows."""
    from mltk.data.importers import import_dataset, merge_captions
    from mltk.data.overlap import run_check_overlap

    if os.environ.get("MLTK_SCALE_ROW_GROUP_ROWS"):  # --row-group-rows: the streamed writers' row group
        from mltk.artifacts import table_stream

        table_stream.ROW_GROUP_ROWS = int(os.environ["MLTK_SCALE_ROW_GROUP_ROWS"])
    folder, runs = work / f"x{scale}", work / f"x{scale}" / "runs"
    common = {"images_root": "/images"}
    start, cpu = time.perf_counter(), cpu_seconds()
    if stage == "import en":
        for split in ("train", "val"):
            import_dataset(
                "lines",
                [folder / f"{split}.en"],
                runs / f"en-{split}",
                lang="en",
                image_list=folder / f"{split}.images",
                splits=[split],
                **common,
            )
        rows = 30_014 * scale
    elif stage == "import de":
        for split in ("train", "val"):
            import_dataset(
                "lines",
                [folder / f"{split}.de"],
                runs / f"de-{split}",
                lang="de",
                image_list=folder / f"{split}.images",
                splits=[split],
                translation_of="en",
                parent=runs / f"en-{split}" / "captions",
                **common,
            )
        rows = 30_014 * scale
    elif stage == "merge":
        merge_captions(
            [runs / f"{lang}-{split}" / "captions" for lang in ("en", "de") for split in ("train", "val")],
            runs / "merged",
        )
        rows = 2 * 30_014 * scale
    elif stage == "check-overlap":
        run_check_overlap(runs / "merged", runs / "de-train" / "images", runs / "overlap")
        rows = 2 * 30_014 * scale
    elif stage == "encode-texts":
        from mltk.encode.texts import write_text_embeddings

        write_text_embeddings(
            runs / "merged",
            str(work / "native"),
            runs / "val-en",
            languages=["en"],
            splits=["val"],
            device="cpu",
            precision="fp32",
        )
        rows = 1_014 * scale
    elif stage == "train-nlt":
        return _first_step(work, runs)
    elif stage == "models":
        prepare_models(work, scale)
        rows = 0
    else:
        raise SystemExit(f"unknown stage {stage!r}")
    return {"seconds": time.perf_counter() - start, "cpu": cpu_seconds() - cpu, "rows": rows}


def cpu_seconds() -> float:
    """User and system CPU seconds of this process: on a shared machine the wall clock also counts the others."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _first_step(work: Path, runs: Path) -> dict:
    from mltk.train import mla

    class FirstStep(Exception):
        pass

    def stop(step: int, loss: float) -> None:
        raise FirstStep

    config = mla.MlaConfig(
        captions=runs / "merged",
        out=runs / "nlt",
        model=str(work / "native"),
        tokenizer=str(work / "vocab-de"),
        languages=("de",),
        batch_size=64,
        device="cpu",
        cache_dir=runs / f"teacher-{time.time_ns()}",
        loop={"steps": 2},
    )
    start, cpu = time.perf_counter(), cpu_seconds()
    try:
        mla.train_nlt(config, on_step=stop)
    except FirstStep:
        pass
    return {"seconds": time.perf_counter() - start, "cpu": cpu_seconds() - cpu, "rows": 0}


def peak_mb() -> float:
    """This process's peak resident memory: ``VmHWM`` (``ru_maxrss`` keeps the parent's peak across exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child(stage: str, scale: int, work: Path, threads: int) -> dict:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, __file__, "--child", stage, "--scale", str(scale), "--work", str(work)],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{stage} at {scale}x failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------------------------------------
# Shared inputs: the tiny native CLIP and a German vocabulary
# ----------------------------------------------------------------------------------------------------------------


def prepare_models(work: Path, scale: int) -> None:
    """A random-weight tiny CLIP saved as a checkpoint, and a German vocabulary grown on the smallest scale."""
    import torch

    from mltk import artifacts
    from mltk.models.clip import clip_checkpoint_config, load_clip
    from mltk.settings.vocab import build_vocab

    if not (work / "native").is_dir():
        torch.manual_seed(0)
        artifacts.write_checkpoint(
            work / "native",
            load_clip("mltk-tiny").model.state_dict(),
            clip_checkpoint_config("mltk-tiny"),
            stage="pretrain",
        )
    if not (work / "vocab-de").is_dir():
        build_vocab(work / f"x{scale}" / "runs" / "merged", "de", work / "vocab-de", size=2000)


# ----------------------------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------------------------


def per_row(results: dict, stage: str) -> tuple[float, float, float] | None:
    """(wall us, CPU us and KB per extra row) between the smallest and largest scale the stage ran at."""
    ran = sorted(scale for name, scale in results if name == stage)
    if len(ran) < 2:
        return None
    low, high = results[(stage, ran[0])], results[(stage, ran[-1])]
    extra = high["rows"] - low["rows"]
    return (
        1e6 * (high["seconds"] - low["seconds"]) / extra,
        1e6 * (high["cpu"] - low["cpu"]) / extra,
        1024 * (high["peak_mb"] - low["peak_mb"]) / extra,
    )


def report(results: dict, scales: list[int]) -> None:
    print(
        f"| stage | {' | '.join(f'{s}x: wall s, CPU s, peak MB' for s in scales)} | per extra row: wall, CPU, memory |"
    )
    print("| --- | " + " | ".join("---" for _ in scales) + " | --- |")
    for stage in (*DATA_STAGES, "train-nlt"):
        cells = [
            f"{results[(stage, s)]['seconds']:.2f}, {results[(stage, s)]['cpu']:.2f}, "
            f"{results[(stage, s)]['peak_mb']:.0f}"
            if (stage, s) in results
            else "-"
            for s in scales
        ]
        cost = per_row(results, stage) if stage != "train-nlt" else None
        name = "train-nlt (call to end of step 1)" if stage == "train-nlt" else stage
        cost_cell = f"{cost[0]:.1f} us, {cost[1]:.1f} us, {cost[2]:.2f} KB" if cost else "-"
        print(f"| {name} | " + " | ".join(cells) + f" | {cost_cell} |")
    project(results)


def project(results: dict) -> None:
    """The measured per-row costs times CC3M's rows in 36 languages: a projection, not a measurement."""
    print(
        f"\nProjection (not measured): the per-row costs above times {CC3M_ROWS:,} caption rows (CC3M in 36 "
        "languages), one process on this CPU; 8 machines split the rows of import, encode-texts and training "
        "8 ways (merge and check-overlap read every row once, on one machine):"
    )
    for stage in DATA_STAGES[:4]:
        cost = per_row(results, stage)
        if cost:
            print(
                f"- {stage}: {cost[1] * CC3M_ROWS / 1e6 / 60:.0f} CPU min ({cost[0] * CC3M_ROWS / 1e6 / 60:.0f} min "
                f"of this run's wall clock), {cost[2] * CC3M_ROWS / 1024 / 1024:.0f} GB above the process's base"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 5, 25])
    parser.add_argument("--nlt-scales", type=int, nargs="*", default=[1, 5, 25])
    parser.add_argument(
        "--encode-scales",
        type=int,
        nargs="*",
        default=[1, 5],
        help="scales of the encode-texts run (the tiny CLIP's forward is the cost, linear in rows)",
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/mltk-scale"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--row-group-rows",
        type=int,
        help="rows per Parquet row group of the streamed import and merge (default 131,072, "
        "mltk.artifacts.table_stream: what they hold at most; a smaller one shows the bound at small scales)",
    )
    parser.add_argument("--child")
    parser.add_argument("--scale", type=int)
    args = parser.parse_args()
    if args.row_group_rows:
        os.environ["MLTK_SCALE_ROW_GROUP_ROWS"] = str(args.row_group_rows)
    if args.child:
        result = child(args.child, args.scale, args.work)
        result["peak_mb"] = peak_mb()
        print(json.dumps(result))
        return
    if not (MULTI30K / "raw" / "train.de").is_file():
        raise SystemExit(f"Multi30K task 1 not found under {MULTI30K} (MLTK_SHARED_DATA names its parent)")
    scales = sorted(args.scales)
    results = {}
    for scale in scales:
        write_scaled(args.work, scale)
        for stage in DATA_STAGES:
            if stage == "encode-texts":
                if scale not in args.encode_scales:
                    continue
                run_child("models", scales[0], args.work, args.threads)
            results[(stage, scale)] = run_child(stage, scale, args.work, args.threads)
            print(f"{stage} {scale}x: {results[(stage, scale)]}", file=sys.stderr)
        if scale in args.nlt_scales:
            results[("train-nlt", scale)] = run_child("train-nlt", scale, args.work, args.threads)
            print(f"train-nlt {scale}x: {results[('train-nlt', scale)]}", file=sys.stderr)
    report(results, scales)


if __name__ == "__main__":
    main()
