"""Tables the example Makefiles print at the end: mean ± sample std over seeds, and how many seeds keep each of
the paper's claims. Usage: python examples/summarize.py {mla,continual,ccrk,baselines,real_text,teir_minilm}
RUN ... (see each Makefile)."""

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


if __name__ == "__main__":
    command, run, *rest = sys.argv[1:]
    {
        "mla": mla,
        "continual": continual,
        "ccrk": ccrk,
        "baselines": baselines,
        "real_text": real_text,
        "teir_minilm": teir_minilm,
    }[command](Path(run), *rest)
