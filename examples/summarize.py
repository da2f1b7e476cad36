"""Tables the example Makefiles print at the end: mean ± sample std over seeds, and how many seeds keep each of
the paper's claims. Usage: python examples/summarize.py {mla,continual,ccrk,baselines,real_text,teir_minilm}
RUN ... (see each Makefile); zero_shot_video, mkd and ame are examples/small_scale.mk's."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def stat(values: list[float]) -> str:
    return f"{statistics.mean(values):.2f}" + (f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else "")


def _metrics(path: Path) -> dict:
    return json.loads((path / "metrics.json").read_text(encoding="utf-8"))


def mla(run: Path, langs: str, *seeds: str) -> None:
    """Each variant's mean AR of the trained languages against English's (examples/mla_ablation.mk)."""
    langs = langs.split(",")
    print(f"seed(s): {' '.join(seeds)}\n")
    print(
        "| variant | English AR | mean AR of " + ", ".join(langs) + " | ratio | per seed |\n|:---|---:|---:|---:|:---|"
    )
    for name, label in (("mla", "NLT then LE"), ("nlt", "NLT only"), ("le-only", "LE only")):
        english, others = [], []
        for seed in seeds:
            per_language = _metrics(run / f"seed{seed}" / f"metrics-{name}")["per_language"]
            english.append(per_language["en"]["AR"])
            others.append(sum(per_language[lang]["AR"] for lang in langs) / len(langs))
        ratio = statistics.mean(others) / statistics.mean(english)
        print(f"| {label} | {stat(english)} | {stat(others)} | {ratio:.2f} | {' '.join(f'{x:.2f}' for x in others)} |")


CONTINUAL_VARIANTS = ("plain", "teir-init-only", "teir-reg-only", "teir")


def present_variants(run: Path, seeds: tuple[str, ...]) -> list[str]:
    """The variants run for every seed (a Makefile's VARIANTS may name a subset)."""
    return [v for v in CONTINUAL_VARIANTS if all((run / f"seed{s}" / f"cll-{v}.json").is_file() for s in seeds)]


def continual(run: Path, *seeds: str) -> None:
    """Final AR and F of each CLL-CLIP variant, and the seeds that keep the paper's order (examples/continual.mk)."""
    variants = present_variants(run, seeds)
    final = {v: [json.loads((run / f"seed{s}" / f"cll-{v}.json").read_text()) for s in seeds] for v in variants}
    print(f"{len(seeds)} seed(s): {' '.join(seeds)}\n")
    print("| variant | final AR | final F | AR per seed | F per seed |\n|:---|---:|---:|:---|:---|")
    for v in variants:
        ar, f = [r["AR"] for r in final[v]], [r["F"] for r in final[v]]
        print(
            f"| {v} | {stat(ar)} | {stat(f)} | {' '.join(f'{x:.2f}' for x in ar)} | {' '.join(f'{x:.2f}' for x in f)} |"
        )
    print("\nseeds where the first beats the second (higher AR / lower F):")
    for a, b in (
        ("teir", "plain"),
        ("teir", "teir-init-only"),
        ("teir", "teir-reg-only"),
        ("teir-init-only", "plain"),
        ("teir-reg-only", "plain"),
    ):
        if a not in variants or b not in variants:
            continue
        ar = sum(x["AR"] > y["AR"] for x, y in zip(final[a], final[b]))
        f = sum(x["F"] < y["F"] for x, y in zip(final[a], final[b]))
        print(f"  {a} vs {b}: AR {ar}/{len(seeds)}, F {f}/{len(seeds)}")


def teir_minilm(run: Path, *seeds: str) -> None:
    """CLL-CLIP's variants on all-MiniLM-L6-v2, text only (examples/teir_minilm.mk): final AR and F as ``continual``
    prints them, then each language's final a_{T,i} (its captions retrieving English, R@1) and the WordPiece tokens
    each task appended to the table."""
    continual(run, *seeds)
    reports = {
        v: [json.loads((run / f"seed{s}" / f"cll-{v}" / "continual.json").read_text(encoding="utf-8")) for s in seeds]
        for v in present_variants(run, seeds)
    }
    first = next(iter(reports.values()))[0]
    tasks, metric = first["continual"]["tasks"], first["continual"]["metric"]
    print(f"\nafter the last task, {metric} of each language against English (mean ± std over seeds):\n")
    print("| variant | " + " | ".join(tasks) + " |\n|:---|" + "---:|" * len(tasks))
    for v in reports:
        final = [stat([r["continual"]["matrix"][-1][i] for r in reports[v]]) for i in range(len(tasks))]
        print(f"| {v} | {' | '.join(final)} |")
    grown = ", ".join(f"{t['lang']} +{t['vocabulary']['new_tokens']:,}" for t in first["per_task"])
    print(f"\nnew WordPiece tokens per task: {grown}; {first['protocol']['loss']}")


def baselines(run: Path, *methods: str) -> None:
    """CLL-CLIP's Table 2 at small scale: final AR and F of each method plain and with TEIR, and the joint bound
    (examples/continual.mk baselines)."""
    print("| method | AR plain | F plain | AR TEIR | F TEIR |\n|:---|---:|---:|---:|---:|")
    for method in methods:
        plain, teir = (json.loads((run / f"{method}-{v}.json").read_text()) for v in ("plain", "teir"))
        print(f"| {method} | {plain['AR']:.2f} | {plain['F']:.2f} | {teir['AR']:.2f} | {teir['F']:.2f} |")
    joint = json.loads((run / "joint.json").read_text())
    print(f"| joint (upper bound) | {joint['AR']:.2f} | - | - | - |")


def ccrk(run: Path, parts: str, *seeds: str) -> None:
    """Every seed of every part: mean ± std, and the seeds in which 1-to-K keeps each claim (examples/ccrk.mk)."""
    parts = parts.split()
    starts = {"1": "fresh", "2": "nlt", "3": "mt", "4": "cll"}

    def rows(start: str, seed: str, trained: bool = False) -> list[dict]:
        name = f"compare-{start}{'-trained' if trained else ''}{'' if seed == '0' else '-s' + seed}"
        return _metrics(run / name)["comparison"]["runs"][:3]

    print(f"seed(s): {' '.join(seeds)}\n")
    print("| part | loss | mean AR | MRV i2t | MRV t2i | AR spread (6) | AR spread (non-English) |")
    print("|:---|:---|---:|---:|---:|---:|---:|")
    for part in parts:
        start = starts[part]
        six = [rows(start, s) for s in seeds]
        five = [rows(start, s, trained=True) for s in seeds]
        for i, loss in enumerate(("1-to-K", "1-to-1", "English bridge")):
            cells = [stat([r[i][key] for r in six]) for key in ("mean_AR", "MRV_i2t", "MRV_t2i", "recall_spread")]
            cells.append(stat([r[i]["recall_spread"] for r in five]))
            print(f"| {part}. {start} | {loss} | {' | '.join(cells)} |")
    print("\nseeds where 1-to-K keeps the claim:")
    for part in parts:
        start = starts[part]
        six = [rows(start, s) for s in seeds]
        five = [rows(start, s, trained=True) for s in seeds]
        mrv = sum(
            k["MRV_i2t"] < o["MRV_i2t"] and k["MRV_t2i"] < o["MRV_t2i"] and k["mean_AR"] >= o["mean_AR"]
            for k, o, _ in six
        )
        spread6 = sum(k["recall_spread"] < b["recall_spread"] for k, _, b in six)
        spread5 = sum(k["recall_spread"] < b["recall_spread"] for k, _, b in five)
        print(
            f"  {part}. {start}: lower MRV (both directions) than 1-to-1 at equal or better mean AR "
            f"{mrv}/{len(seeds)}; smaller spread than the bridge {spread6}/{len(seeds)} (6 languages), "
            f"{spread5}/{len(seeds)} (non-English)"
        )


def real_text(run: Path, langs: str) -> None:
    """Caption-to-caption recall x->en of the frozen tower, MLA's acquirers and the full fine-tune, with the
    parameters each trained and its training wall time (examples/real_text.mk)."""
    print("| language | method | steps | R@1 | R@5 | R@10 | parameters trained | training wall time |")
    print("|:---|:---|---:|---:|---:|---:|---:|---:|")
    for lang in langs.split(","):
        rows = [("frozen tower", run / "frozen", None)]
        rows += [
            (label, run / f"metrics-{name}-{lang}", name)
            for name, label in (("mla", "MLA acquirers"), ("full", "full fine-tune"))
        ]
        for label, metrics, name in rows:
            recall = _metrics(metrics)["c2c"][f"{lang}-en"][f"{lang}->en"]
            steps, params, seconds = "-", "0", "-"
            if name is not None:
                manifest = json.loads((run / f"{name}-{lang}" / "manifest.json").read_text(encoding="utf-8"))
                steps, params = f"{manifest['steps']:,}", f"{manifest['parameters_trained']:,}"
                seconds = f"{manifest['train_seconds'] / 60:.1f} min"
            print(
                f"| {lang} | {label} | {steps} | {recall['R@1']:.1f} | {recall['R@5']:.1f} | "
                f"{recall['R@10']:.1f} | {params} | {seconds} |"
            )


# --- examples/small_scale.mk: one world, one native CLIP; seed-independent rows (the frozen CLIP) are one value --


def _runs(run: Path, name: str, seeds: tuple[str, ...]) -> list[dict]:
    """RUN/seedS/NAME's metrics for every seed, or RUN/NAME's once when NAME was not trained per seed."""
    if (run / name / "metrics.json").is_file():
        return [_metrics(run / name)]
    return [_metrics(run / f"seed{s}" / name) for s in seeds]


def _per_seed(values: list[float]) -> str:
    return " ".join(f"{x:.2f}" for x in values)


def _zero_shot_rows(
    run: Path, variants: tuple[tuple[str, str], ...], langs: list[str], seeds: tuple[str, ...]
) -> dict[str, list[dict]]:
    print(
        "| text side | "
        + " | ".join(f"top-1 {lang}" for lang in langs)
        + " | "
        + " | ".join(f"top-5 {lang}" for lang in langs)
        + " |\n|:---|"
        + "---:|" * (2 * len(langs))
    )
    found = {}
    for name, label in variants:
        found[name] = [m["zero_shot"] for m in _runs(run, name, seeds)]
        cells = [stat([z[lang][f"top{k}"] for z in found[name]]) for k in (1, 5) for lang in langs]
        print(f"| {label} | {' | '.join(cells)} |")
    return found


def _mean_of(entries: list[dict], langs: list[str], key) -> list[float]:
    """Per seed, the mean over ``langs`` of ``key(entry[lang])``."""
    return [sum(key(e[lang]) for lang in langs) / len(langs) for e in entries]


def zero_shot_video(run: Path, langs: str, *seeds: str) -> None:
    """MLA's zero-shot classification and video retrieval: the frozen CLIP, the acquirers and the full fine-tune."""
    trained, every = langs.split(","), ["en", *langs.split(",")]
    variants = (
        ("zero-shot-native", "frozen CLIP"),
        ("zero-shot-acquirers", "MLA acquirers (NLT)"),
        ("zero-shot-full", "full fine-tune (NLT --train full)"),
    )
    print(f"seed(s): {' '.join(seeds)}\n\nzero-shot classification, accuracy (%):\n")
    zs = _zero_shot_rows(run, variants, every, seeds)
    print("\nvideo retrieval (test clips), T->V R@1 and AR:\n")
    print(
        "| text side | "
        + " | ".join(f"T->V R@1 {lang}" for lang in every)
        + " | "
        + " | ".join(f"AR {lang}" for lang in every)
        + " |\n|:---|"
        + "---:|" * (2 * len(every))
    )
    video = {}
    for name, _ in variants:
        name = name.replace("zero-shot", "video")
        video[name] = [m["per_language"] for m in _runs(run, name, seeds)]
        cells = [stat([v[lang]["t2i"]["R@1"] for v in video[name]]) for lang in every]
        cells += [stat([v[lang]["AR"] for v in video[name]]) for lang in every]
        print(f"| {dict(variants)[name.replace('video', 'zero-shot')]} | {' | '.join(cells)} |")
    print(f"\nper seed, mean over {', '.join(trained)}:\n")
    print("| text side | zero-shot top-1 | video AR |\n|:---|:---|:---|")
    top1 = {n: _mean_of(zs[n], trained, lambda e: e["top1"]) for n in zs}
    ar = {n: _mean_of(video[n], trained, lambda e: e["AR"]) for n in video}
    for (name, label), v in zip(variants, video):
        print(f"| {label} | {_per_seed(top1[name])} | {_per_seed(ar[v])} |")
    wins_zs = sum(a > f for a, f in zip(top1["zero-shot-acquirers"], top1["zero-shot-full"]))
    wins_v = sum(a > f for a, f in zip(ar["video-acquirers"], ar["video-full"]))
    print(
        f"\nseeds where the acquirers beat the full fine-tune (mean over {', '.join(trained)}): zero-shot top-1 "
        f"{wins_zs}/{len(seeds)}, video AR {wins_v}/{len(seeds)}"
    )


def mkd(run: Path, langs: str, *seeds: str) -> None:
    """MLA's MKD baseline (English through the student) beside the acquirers, zero-shot classification."""
    trained, every = langs.split(","), ["en", *langs.split(",")]
    variants = (
        ("zero-shot-native", "frozen CLIP"),
        ("zero-shot-acquirers", "MLA acquirers"),
        ("zero-shot-mkd", "MKD, English through the student"),
    )
    print(f"seed(s): {' '.join(seeds)}\n\nzero-shot classification, accuracy (%):\n")
    zs = _zero_shot_rows(run, variants, every, seeds)
    print(f"\nper seed, top-1:\n\n| text side | en | mean of {', '.join(trained)} |\n|:---|:---|:---|")
    en = {n: [z["en"]["top1"] for z in zs[n]] for n in zs}
    others = {n: _mean_of(zs[n], trained, lambda e: e["top1"]) for n in zs}
    for name, label in variants:
        print(f"| {label} | {_per_seed(en[name])} | {_per_seed(others[name])} |")
    lost = sum(m < a for m, a in zip(en["zero-shot-mkd"], en["zero-shot-acquirers"]))
    ahead = sum(m > a for m, a in zip(others["zero-shot-mkd"], others["zero-shot-acquirers"]))
    print(
        f"\nseeds where MKD is below the acquirers in English top-1: {lost}/{len(seeds)}; above them in the mean "
        f"top-1 of {', '.join(trained)}: {ahead}/{len(seeds)}"
    )


AME_RUNS = (
    ("ame-order-map", "order similarity + map"),
    ("ame-order", "order similarity, no map"),
    ("ame-cosine-map", "cosine + map"),
    ("ame-cosine", "cosine, no map"),
)


def ame(run: Path, langs: str, *seeds: str) -> None:
    """AME with and without its learnt map, order and cosine similarity: German test recall by the trained scorer
    (and by cosine for order), BLI of the de-en lexicon; the NLT start's BLI first."""
    lang = "de"
    print(f"seed(s): {' '.join(seeds)}; recall of {lang} on the test split\n")
    print(
        "| run | i2t R@1 | t2i R@1 | AR (trained scorer) | AR by cosine | BLI P@1 | P@1 reverse | P@1 CSLS |\n"
        "|:---|---:|---:|---:|---:|---:|---:|---:|"
    )
    bli = {"nlt": [m["bli"] for m in _runs(run, "nlt-acquirers-bli", seeds)]}

    def bli_cells(name: str) -> list[str]:
        return [stat([b[key] for b in bli[name]]) for key in ("P@1", "P@1_reverse", "P@1_csls")]

    print(f"| NLT start | - | - | - | - | {' | '.join(bli_cells('nlt'))} |")
    ar, cosine = {}, {}
    for name, label in AME_RUNS:
        recall = [m["per_language"][lang] for m in _runs(run, f"{name}-recall", seeds)]
        bli[name] = [m["bli"] for m in _runs(run, f"{name}-bli", seeds)]
        ar[name] = [r["AR"] for r in recall]
        cells = [stat([r["i2t"]["R@1"] for r in recall]), stat([r["t2i"]["R@1"] for r in recall]), stat(ar[name])]
        if name.startswith("ame-order"):
            cosine[name] = [m["per_language"][lang]["AR"] for m in _runs(run, f"{name}-cosine", seeds)]
            cells.append(stat(cosine[name]))
        else:
            cells.append("-")
        print(f"| {label} | {' | '.join(cells + bli_cells(name))} |")
    print("\nper seed:\n\n| run | AR (trained scorer) | BLI P@1 |\n|:---|:---|:---|")
    print(f"| NLT start | - | {_per_seed([b['P@1'] for b in bli['nlt']])} |")
    for name, label in AME_RUNS:
        print(f"| {label} | {_per_seed(ar[name])} | {_per_seed([b['P@1'] for b in bli[name]])} |")
    print("\nseeds where the map raises BLI P@1 / lowers AR:")
    for similarity in ("order", "cosine"):
        with_map, without = f"ame-{similarity}-map", f"ame-{similarity}"
        up = sum(a["P@1"] > b["P@1"] for a, b in zip(bli[with_map], bli[without]))
        down = sum(a < b for a, b in zip(ar[with_map], ar[without]))
        print(f"  {similarity}: P@1 {up}/{len(seeds)}, AR {down}/{len(seeds)}")


if __name__ == "__main__":
    command, run, *rest = sys.argv[1:]
    {
        "mla": mla,
        "continual": continual,
        "ccrk": ccrk,
        "baselines": baselines,
        "real_text": real_text,
        "teir_minilm": teir_minilm,
        "zero_shot_video": zero_shot_video,
        "mkd": mkd,
        "ame": ame,
    }[command](Path(run), *rest)
