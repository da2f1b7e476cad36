"""The example Makefiles, dry-run (`make -n`): the plan of each, what a complete artifact skips, what runs
independently, and the paper recipes on real data and on the embedded default through the same variables."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def plan(makefile: str, *args: str) -> list[str]:
    """The mltk commands `make -n` would run (one per line, continuation lines joined), in order."""
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "-f", f"examples/{makefile}", "MLTK=mltk", "PYTHON=python3", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    joined = result.stdout.replace("\\\n", " ")
    return [" ".join(line.split()) for line in joined.splitlines() if line.startswith("mltk ")]


def record(makefile: str, *args: str) -> None:
    """Write the settings and data stamps as a real build of every stage would, building nothing (goals in
    ``args`` are left out: only the variables count)."""
    variables = [arg for arg in args if "=" in arg]
    result = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-f",
            f"examples/{makefile}",
            "MLTK=mltk",
            "PYTHON=python3",
            *variables,
            "settings-stamps",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def stages(commands: list[str]) -> list[str]:
    return [" ".join(c.split()[1:3]) if c.split()[1] == "index" else c.split()[1] for c in commands]


def option(command: str, name: str) -> str:
    return re.search(rf"{name} (\S+)", command).group(1)


def complete(*manifests: Path) -> None:
    """Pretend these artifacts are complete, each newer than the one before (make compares times)."""
    for n, manifest in enumerate(manifests):
        manifest.parent.mkdir(parents=True, exist_ok=True)
        manifest.write_text("{}")
        os.utime(manifest, (1_000_000 + n, 1_000_000 + n))


def test_quickstart_plan_order_and_vocabulary_chain(tmp_path):
    base = tmp_path / "q"
    commands = plan("quickstart.mk", f"BASE={base}")
    order = stages(commands)
    assert order.index("synth-data") < order.index("pretrain") < order.index("train-nlt") < order.index("train-le")
    assert order.index("encode-images") < order.index("train-le") < order.index("evaluate")
    assert order.count("index query") == 2 and order.count("build-vocab") == 5
    vocabs = [c for c in commands if c.startswith("mltk build-vocab")]
    assert [option(c, "--lang") for c in vocabs] == ["de", "fr", "ru", "zh", "ar"]
    assert "--parent" not in vocabs[0] and all(
        option(c, "--parent") == f"{base}/vocab/{prev}" for c, prev in zip(vocabs[1:], ["de", "fr", "ru", "zh"])
    )
    nlt = next(c for c in commands if c.startswith("mltk train-nlt"))
    assert option(nlt, "--tokenizer") == f"{base}/vocab/ar" and option(nlt, "--steps") == "500"
    evaluate = next(c for c in commands if c.startswith("mltk evaluate"))
    assert option(evaluate, "--plot") == f"{base}/plots" and option(evaluate, "--lang") == "en,de,fr,ru,zh,ar"
    small = plan("quickstart.mk", f"BASE={base}", "NLT_STEPS=7", "LANGS=de,zh")
    assert option(next(c for c in small if "train-nlt" in c), "--steps") == "7"
    assert stages(small).count("build-vocab") == 2


def test_quickstart_skips_complete_artifacts_and_reruns_what_depends_on_a_newer_one(tmp_path):
    base = tmp_path / "q"
    done = [
        base / "world/captions/manifest.json",
        base / "native/manifest.json",
        base / "img/manifest.json",
        *[base / f"vocab/{lang}/manifest.json" for lang in ("de", "fr", "ru", "zh", "ar")],
        base / "nlt/manifest.json",
        base / "mla/manifest.json",
        base / "index/manifest.json",
        base / "query-de.png",
        base / "query-zh.png",
        base / "metrics/manifest.json",
    ]
    complete(*done)
    assert plan("quickstart.mk", f"BASE={base}") == []
    os.utime(done[8], (2_000_000, 2_000_000))  # NLT rerun: LE, the queries and the metrics follow
    assert sorted(stages(plan("quickstart.mk", f"BASE={base}"))) == [
        "evaluate",
        "index query",
        "index query",
        "train-le",
    ]


def test_a_changed_variable_rebuilds_its_stage_and_dependants_and_an_unchanged_run_nothing(tmp_path):
    """Each stage depends on a stamp of the make variables it uses (BASE/.settings), rewritten only when they
    change: NLT_STEPS=12 after a run with the default retrains NLT and what follows it, and nothing else."""
    base = tmp_path / "q"
    done = [
        base / "world/captions/manifest.json",
        base / "native/manifest.json",
        base / "img/manifest.json",
        *[base / f"vocab/{lang}/manifest.json" for lang in ("de", "fr", "ru", "zh", "ar")],
        base / "nlt/manifest.json",
        base / "mla/manifest.json",
        base / "index/manifest.json",
        base / "query-de.png",
        base / "query-zh.png",
        base / "metrics/manifest.json",
    ]
    complete(*done)
    assert plan("quickstart.mk", f"BASE={base}") == []  # a tree made before its stamps: nothing to rebuild
    record("quickstart.mk", f"BASE={base}")
    assert plan("quickstart.mk", f"BASE={base}") == []  # the first stamps rebuild nothing that exists
    assert (base / ".settings/nlt").read_text() == "LANGS=de,fr,ru,zh,ar\nNLT_STEPS=500\nNLT_LR=1e-3\n"
    changed = plan("quickstart.mk", f"BASE={base}", "NLT_STEPS=12")
    assert sorted(stages(changed)) == ["evaluate", "index query", "index query", "train-le", "train-nlt"]
    assert option(next(c for c in changed if "train-nlt" in c), "--steps") == "12"
    record("quickstart.mk", f"BASE={base}", "NLT_STEPS=12")  # the real run's stamp, then its artifacts
    stamped = (base / ".settings/nlt").stat().st_mtime
    for n, manifest in enumerate(done[8:], 1):  # as if that run finished: an unchanged second run does nothing
        os.utime(manifest, (stamped + n / 1000, stamped + n / 1000))
    assert plan("quickstart.mk", f"BASE={base}", "NLT_STEPS=12") == []
    assert stages(plan("quickstart.mk", f"BASE={base}", "NLT_STEPS=12", "LE_LR=3e-4")) == [
        "train-le",
        "index query",
        "index query",
        "evaluate",
    ]  # the metrics last: the job ends on its numbers
    assert (
        stages(plan("quickstart.mk", f"BASE={base}", "NLT_STEPS=12", "LE_LR=3e-4", "VOCAB_SIZE=900"))[:5]
        == ["build-vocab"] * 5
    )


def files_and_times(tree: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(tree)): (p.read_bytes(), p.stat().st_mtime_ns) for p in tree.rglob("*") if p.is_file()}


def test_make_n_and_make_q_only_look(tmp_path):
    """`make -q`, then `make -n` with a changed variable, then `make -q` again: rc 0, 0 and nothing written (the
    settings stamps used to be rewritten by -n, and the next real make replaced every artifact); `make -n` prints
    the mltk commands and nothing else; a real build with the changed variable still reruns the stage."""
    base = tmp_path / "q"
    done = [
        base / "world/captions/manifest.json",
        base / "native/manifest.json",
        base / "img/manifest.json",
        *[base / f"vocab/{lang}/manifest.json" for lang in ("de", "fr", "ru", "zh", "ar")],
        base / "nlt/manifest.json",
        base / "mla/manifest.json",
        base / "index/manifest.json",
        base / "query-de.png",
        base / "query-zh.png",
        base / "metrics/manifest.json",
    ]
    record("quickstart.mk", f"BASE={base}")
    complete(*done)
    make = ["make", "--no-print-directory", "-f", "examples/quickstart.mk", "MLTK=mltk", f"BASE={base}"]
    finished = files_and_times(base)
    assert subprocess.run([*make, "-q"], cwd=ROOT).returncode == 0
    looked = subprocess.run([*make, "-n", "NLT_STEPS=50"], cwd=ROOT, capture_output=True, text=True)
    assert looked.returncode == 0 and "--steps 50" in looked.stdout
    lines = looked.stdout.replace("\\\n", " ").splitlines()
    assert lines and all(line.startswith("mltk ") for line in lines), lines
    assert subprocess.run([*make, "-q", "NLT_STEPS=50"], cwd=ROOT).returncode == 1
    assert subprocess.run([*make, "-q"], cwd=ROOT).returncode == 0
    assert files_and_times(base) == finished
    record("quickstart.mk", f"BASE={base}", "NLT_STEPS=50")  # what the real build writes before it runs
    assert sorted(stages(plan("quickstart.mk", f"BASE={base}", "NLT_STEPS=50"))) == [
        "evaluate",
        "index query",
        "index query",
        "train-le",
        "train-nlt",
    ]


def test_make_lets_mltk_replace_the_artifact_of_a_stage_it_reruns(tmp_path):
    """make reruns a stage only when its inputs or settings changed; mltk, refusing an artifact made with other
    settings unless --overwrite, takes MLTK_OVERWRITE=1 from the Makefiles for it."""
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "-f", "examples/quickstart.mk", "MLTK=mltk", f"BASE={tmp_path}", "-p"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert re.search(r"^MLTK_OVERWRITE := 1$", result.stdout, re.M)
    from typer.testing import CliRunner

    from mltk.cli import app

    def synth(train: int, **env: str):
        return CliRunner().invoke(
            app,
            [
                "synth-data",
                "--train",
                str(train),
                "--val",
                "2",
                "--test",
                "2",
                "--lang",
                "en,de",
                "-o",
                str(tmp_path / "world"),
            ],
            env=env,
        )

    assert synth(4).exit_code == 0
    refused = synth(6)
    assert refused.exit_code == 2 and "--overwrite" in refused.stderr
    assert synth(6, MLTK_OVERWRITE="1").exit_code == 0


def test_image_encoding_does_not_wait_for_the_vocabularies_or_nlt(tmp_path):
    """make -j2 can run encode-images beside build-vocab and train-nlt: its target needs neither."""
    order = stages(plan("quickstart.mk", f"BASE={tmp_path}", f"{tmp_path}/img/manifest.json"))
    assert order == ["synth-data", "pretrain", "encode-images"]


def test_mla_ablation_reuses_the_quickstart_at_seed_0_and_trains_other_seeds(tmp_path):
    commands = plan("mla_ablation.mk", f"RUN={tmp_path}/a", f"BASE={tmp_path}/q", "SEEDS=0 1")
    order = stages(commands)
    assert order.count("train-nlt") == 2 and order.count("train-le") == 4  # BASE's + seed 1's; LE only twice
    assert order.count("evaluate") == 6 and order.count("compare") == 2
    le_only = [c for c in commands if "le-only" in c and c.startswith("mltk train-le")]
    assert [option(c, "--seed") for c in le_only] == ["0", "1"] and all(option(c, "--steps") == "700" for c in le_only)


def test_continual_runs_every_variant_and_seed_over_one_vocabulary_chain(tmp_path):
    commands = plan("continual.mk", f"RUN={tmp_path}", "SEEDS=0 1")
    runs = [c for c in commands if c.startswith("mltk train-continual")]
    assert len(runs) == 8 and stages(commands).count("build-vocab") == 6
    flags = sorted({next((w for w in c.split() if w.startswith("--teir")), "plain") for c in runs})
    assert flags == ["--teir", "--teir-init-only", "--teir-reg-only", "plain"]
    assert all(option(c, "--vocab-dir") == f"{tmp_path}/vocab" for c in runs)


def test_ccrk_parts_and_seeds(tmp_path):
    commands = plan("ccrk.mk", f"RUN={tmp_path}/c", f"BASE={tmp_path}/q", "PARTS=2 4", "SEEDS=0 1")
    trains = [c for c in commands if c.startswith("mltk train-ccrk")]
    assert len(trains) == 2 * 2 * 3
    assert sorted({option(c, "--loss") for c in trains}) == ["english-bridge", "one-to-k", "one-to-one"]
    assert {option(c, "--init") for c in trains} == {f"{tmp_path}/q/nlt", f"{tmp_path}/c/cll"}
    assert f"{tmp_path}/c/cll-one-to-k-s1" in {option(c, "--out") for c in trains}
    assert stages(commands).count("compare") == 2 * 2 * 2 and "synth-data --train 6000 --mt-errors" not in commands


def test_paper_recipes_on_real_data_use_openai_vit_b32_and_m_bert(tmp_path):
    data = tmp_path / "data"
    complete(data / "train/captions/manifest.json", data / "coco-test/captions/manifest.json")
    commands = plan("papers.mk", f"DATA={data}", f"RUN={tmp_path}/p", "all")
    assert {c.split()[2] for c in commands if c.startswith("mltk import-data")} == {
        "multi30k",
        "crossmodal3600",
        "xflickrco",
        "lexicon",
    }
    encodes = [c for c in commands if c.startswith("mltk encode-images")]
    assert len(encodes) == 5 and all("--model ViT-B-32-quickgelu --pretrained openai" in c for c in encodes)
    nlt = next(c for c in commands if c.startswith("mltk train-nlt"))
    assert "--tokenizer bert-base-multilingual-cased --init-embeddings" in nlt and option(nlt, "--steps") == "117150"
    le = next(c for c in commands if c.startswith("mltk train-le"))
    # the paper's lr 3e-6 and temperature 0.01 come from the recipe, not restated
    assert (option(le, "--steps"), option(le, "--recipe")) == ("11715", "mla-le")
    assert "--lr" not in le and "--temperature" not in le and "--batch-size" not in le
    recipes = {(c.split()[1], option(c, "--recipe")) for c in commands if c.startswith("mltk train-")}
    assert recipes == {
        ("train-nlt", "mla-nlt"),
        ("train-le", "mla-le"),
        ("train-continual", "cll-clip"),
        ("train-ccrk", "ccrk"),
        ("train-ccrk", "ame"),
    }
    assert_ame_runs_the_authors_settings(commands, align_every=500)
    # five tables; AME: 2 similarities x (without, with RCSLS) x (recall, BLI) and the NLT start's BLI; fusion
    assert len([c for c in commands if c.startswith("mltk evaluate")]) == 5 + 2 * 2 * 2 + 1 + 1


def test_paper_recipes_run_on_the_embedded_default_through_the_same_variables(tmp_path):
    commands = plan("papers.mk", "EMBEDDED=1", f"RUN={tmp_path}/p", f"BASE={tmp_path}/q", "NLT_STEPS=50", "all")
    order = stages(commands)
    assert [c.split()[2] for c in commands if c.startswith("mltk import-data")] == ["synth-lexicon"]  # AME's
    assert order.count("encode-images") == 1  # one img-train shared by all sets
    assert option(next(c for c in commands if "train-nlt" in c and "/p/nlt" in c), "--steps") == "50"
    assert all(f"--model {tmp_path}/q/native" in c for c in commands if c.startswith("mltk encode-images"))
    assert order.count("evaluate") == 5 + 2 * 2 * 2 + 1 + 1  # the tables, AME, fusion; not the quickstart's own
    assert_ame_runs_the_authors_settings(commands, align_every=None)


def assert_ame_runs_the_authors_settings(commands: list[str], align_every: int | None) -> None:
    """AME's runs: its recipe (Adam 1.1e-4, step decay, global clip 2.0), no --align-weight (the map form ignores
    it), the lexicon filtered to the training words on real data, and more steps than the map's interval, so
    that the map is updated (``align_every``: the recipe's, when the command gives none)."""
    from mltk.recipes import load_recipe

    runs = [c for c in commands if c.startswith("mltk train-ccrk") and "/ame-" in c]
    assert len(runs) == 4 and all(option(c, "--recipe") == "ame" for c in runs)
    assert not any("--align-weight" in c or "--lr" in c for c in runs)
    aligned = [c for c in runs if "--lexicon" in c]
    assert len(aligned) == 2
    for run in aligned:
        every = (
            int(option(run, "--align-every"))
            if "--align-every" in run
            else load_recipe("ame").config["alignment"]["every"]
        )
        assert every == (align_every or every) and int(option(run, "--steps")) >= 2 * every
    lexicon = [c for c in commands if c.startswith("mltk import-data lexicon")]
    assert all("--vocab-from" in c for c in lexicon)


def test_real_text_plan_trains_each_language_twice_at_equal_steps(tmp_path):
    """examples/real_text.mk: Multi30K lines imported per split and language and merged, the frozen tower
    evaluated, then per language MLA's acquirers and the full fine-tune at the same steps and batch."""
    data = tmp_path / "task1"
    write_task1(data, ("en", "de", "cs"))
    commands = plan(
        "real_text.mk",
        f"RUN={tmp_path / 'rt'}",
        f"DATA={data}",
        "TOWER=/minilm",
        "STEPS=20",
        "PAIRS=500",
        "LANGUAGES=de cs",
    )
    order = stages(commands)
    assert order.count("import-data") == 9 and order.index("merge-captions") < order.index("evaluate")
    nlt = [c for c in commands if c.startswith("mltk train-nlt")]
    assert [(option(c, "--lang"), option(c, "--train")) for c in nlt] == [
        ("de", "acquirers"),
        ("cs", "acquirers"),
        ("de", "full"),
        ("cs", "full"),
    ]
    assert {option(c, "--steps") for c in nlt} == {"20"} and {option(c, "--recipe") for c in nlt} == {
        "real-text-minilm"
    }  # batch 64, lr 1e-3, table lr 2e-4, decay 0.01; the full fine-tune's lr is its own
    assert [option(c, "--lr") if "--lr " in c else None for c in nlt] == [None, None, "5e-5", "5e-5"]
    assert not any("--batch-size" in c for c in nlt)
    assert all(option(c, "--model") == "/minilm" and "--tokenizer" not in c for c in nlt)
    frozen = next(c for c in commands if c.startswith("mltk evaluate"))
    assert option(frozen, "--model") == "/minilm" and option(frozen, "--lang") == "en,de,cs"


def test_teir_minilm_plan_runs_every_variant_and_seed_on_the_same_text_only_captions(tmp_path):
    """examples/teir_minilm.mk: Multi30K lines cut to PAIRS/VAL/TEST and imported, then one text-only
    train-continual run per seed and variant (no image embeddings), all on the same captions and settings."""
    data = tmp_path / "task1"
    write_task1(data, ("en", "de", "fr", "cs"))
    run = tmp_path / "tm"
    commands = plan(
        "teir_minilm.mk", f"RUN={run}", f"DATA={data}", "TOWER=/minilm", "SEEDS=0 1", "STEPS=7", "PAIRS=300"
    )
    order = stages(commands)
    assert order.count("import-data") == 12 and order.index("merge-captions") < order.index("train-continual")
    runs = [c for c in commands if c.startswith("mltk train-continual")]
    assert len(runs) == 8
    flags = [
        next((f for f in ("--teir-init-only", "--teir-reg-only", "--teir") if f" {f} " in c), "plain") for c in runs
    ]
    assert flags == ["plain", "--teir-init-only", "--teir-reg-only", "--teir"] * 2
    assert [option(c, "--seed") for c in runs] == ["0"] * 4 + ["1"] * 4
    for command in runs:
        assert command.split()[2] == f"{run}/captions" and "--images" not in command and "--gamma1" not in command
        assert option(command, "--model") == "/minilm" and option(command, "--lang") == "de,fr,cs"
        assert option(command, "--steps") == "7" and option(command, "--recipe") == "teir-minilm"
        assert option(command, "--cache-dir") == f"{run}/cache"
    assert option(runs[5], "--out") == f"{run}/seed1/cll-teir-init-only"
    lines = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "-f",
            "examples/teir_minilm.mk",
            "MLTK=mltk",
            "PYTHON=python3",
            f"RUN={run}",
            f"DATA={data}",
            "TOWER=/minilm",
            "PAIRS=300",
            "TEST=50",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout
    assert "train:train:300 val:val:500 test:test_2016_flickr:50" in lines


def write_task1(data: Path, langs=("en", "de")) -> list[Path]:
    """A Multi30K task 1 folder with every file real_text.mk and teir_minilm.mk read, made long ago."""
    files = [data / "image_splits" / f"{split}.txt" for split in ("train", "val", "test_2016_flickr")]
    files += [data / "raw" / f"{split}.{lang}" for split in ("train", "val", "test_2016_flickr") for lang in langs]
    for file in files:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("a\n")
        os.utime(file, (500_000, 500_000))
    return files


IMPORTED = [
    f"import/{split}-{lang}/captions/manifest.json" for split in ("train", "val", "test") for lang in ("en", "de")
]


@pytest.mark.parametrize("makefile, lines", [("real_text.mk", "lines/train.en"), ("teir_minilm.mk", "lines/manifest")])
def test_real_text_imports_are_skipped_once_their_artifacts_are_complete(tmp_path, makefile, lines):
    """The import targets are the manifests import-data writes (RUN/import/SPLIT-LANG/captions/manifest.json), so
    a second `make` re-imports nothing (the targets named RUN/import/SPLIT-LANG/manifest.json never existed)."""
    data, run = tmp_path / "task1", tmp_path / "rt"
    write_task1(data)
    args = (f"RUN={run}", f"DATA={data}", "TOWER=/minilm", "LANGUAGES=de", "data")
    assert len(plan(makefile, *args)) == 7  # writes the data stamp: 6 imports and the merge
    complete(run / lines, *(run / path for path in IMPORTED), run / "captions/manifest.json")
    assert plan(makefile, *args) == []


@pytest.mark.parametrize("makefile, lines", [("real_text.mk", "lines/train.en"), ("teir_minilm.mk", "lines/manifest")])
def test_real_text_runs_survive_the_same_data_provisioned_again(tmp_path, makefile, lines):
    """Data copied or provisioned again (same bytes, new times) re-imports and retrains nothing; changed bytes do:
    the lines depend on a sha256 stamp of the data files, not on their times."""
    data, run = tmp_path / "task1", tmp_path / "rt"
    files = write_task1(data)
    args = (f"RUN={run}", f"DATA={data}", "TOWER=/minilm", "LANGUAGES=de", "data")
    record(makefile, *args)  # the stamp, as the first run leaves it
    complete(run / lines, *(run / path for path in IMPORTED), run / "captions/manifest.json")
    for file in files:
        os.utime(file, (2_000_000, 2_000_000))  # provisioned again, after the run
    assert plan(makefile, *args) == []
    assert (run / "lines/data.sha256").stat().st_mtime == 0  # the first stamp rebuilds nothing that exists
    (data / "raw" / "val.de").write_text("b\n")
    assert "import-data" in " ".join(plan(makefile, *args))


def stamps(run: Path) -> dict[str, tuple[str, int]]:
    """Every settings stamp under ``run`` (path relative to it -> content and modification time)."""
    return {
        str(p.relative_to(run)): (p.read_text(), p.stat().st_mtime_ns) for p in run.rglob(".settings/*") if p.is_file()
    }


@pytest.mark.parametrize(
    "makefile, args, change, expected",
    [
        ("mla_ablation.mk", ["SEEDS=0 1"], "LE_ONLY_STEPS=9", {"seed0/.settings/le-only", "seed1/.settings/le-only"}),
        (
            "continual.mk",
            ["SEEDS=0"],
            "EPOCHS=2",
            {f"seed0/.settings/cll-{v}" for v in ("plain", "teir-init-only", "teir-reg-only", "teir")}
            | {
                "baselines/.settings/joint",
                *(
                    f"baselines/.settings/{m}-{v}"
                    for v in ("plain", "teir")
                    for m in ("cll-clip", "oewc", "er", "der", "mla", "lora", "ptuning", "dualprompt", "codaprompt")
                ),
            },
        ),
        ("ccrk.mk", ["PARTS=3"], "MT_ERRORS=de=0.5", {".settings/world-mt"}),
        ("papers.mk", ["all"], "LE_LR=1e-5", {".settings/mla", "base/.settings/mla"}),
        (
            "teir_minilm.mk",
            ["SEEDS=0", "VARIANTS=plain teir"],
            "VOCAB_SIZE=99",
            {"seed0/.settings/cll-plain", "seed0/.settings/cll-teir"},
        ),
        ("real_text.mk", ["LANGUAGES=de"], "FULL_LR=1e-6", {".settings/full-de"}),
    ],
)
def test_every_makefile_stamps_each_stage_with_the_variables_it_uses(tmp_path, makefile, args, change, expected):
    """A variable's change rewrites the settings stamps of exactly the stages whose commands use it."""
    data, run = tmp_path / "task1", tmp_path / "run"
    write_task1(data, ("en", "de", "fr", "cs"))
    complete(data / "train/captions/manifest.json", data / "coco-test/captions/manifest.json")
    # papers.mk includes the quickstart for BASE, whose stamps of the same names must live elsewhere
    base = run / "base" if makefile == "papers.mk" else run
    common = [f"RUN={run}", f"BASE={base}", f"DATA={data}", "TOWER=/minilm", *args]
    first = plan(makefile, *common)
    record(makefile, *common)
    before = stamps(run)
    assert before and plan(makefile, *common) == first and stamps(run) == before  # unchanged: nothing rewritten
    record(makefile, *common)
    assert stamps(run) == before
    plan(makefile, *common, change)
    assert stamps(run) == before  # make -n only looks
    record(makefile, *common, change)
    after = stamps(run)
    assert {name for name in after if after[name] != before.get(name)} == expected
    assert all(change in after[name][0] for name in expected)


def test_papers_zero_shot_and_video_targets_have_embedded_twins(tmp_path):
    """MLA's zero-shot classification (frozen CLIP, MLA, full fine-tune) and its video retrieval, each a
    papers.mk target whose EMBEDDED=1 twin runs on the world and the synthetic clips."""
    commands = plan("papers.mk", "EMBEDDED=1", f"RUN={tmp_path}/p", f"BASE={tmp_path}/q", "zero-shot", "video-msrvtt")
    classify = [c for c in commands if c.startswith("mltk classify")]
    assert sorted(option(c, "--out").rsplit("-", 1)[-1] for c in classify) == ["full", "mla", "native"]
    assert all(option(c, "--classes") == f"{tmp_path}/q/world" for c in classify)
    assert any(c.startswith("mltk train-nlt") and "--train full" in c for c in commands)
    assert [c.split()[1] for c in commands if c.split()[1] in ("synth-videos", "encode-videos")] == [
        "synth-videos",
        "encode-videos",
    ]
    assert option(next(c for c in commands if c.startswith("mltk encode-videos")), "--frames") == "12"


def test_summarize_reports_the_variants_a_subset_run_made(tmp_path):
    """`make -f examples/teir_minilm.mk VARIANTS="plain teir-init-only"` made only those; the summary used to
    read every variant's file and stop with FileNotFoundError."""
    import json
    import sys

    tasks = ["de", "fr"]
    for seed, shift in (("0", 0.0), ("1", 1.0)):
        for variant, ar in (("plain", 50.0), ("teir-init-only", 30.0)):
            run = tmp_path / f"seed{seed}" / f"cll-{variant}"
            run.mkdir(parents=True)
            (run.parent / f"cll-{variant}.json").write_text(json.dumps({"AR": ar + shift, "F": 1.0}))
            (run / "continual.json").write_text(
                json.dumps(
                    {
                        "continual": {"tasks": tasks, "metric": "R@1", "matrix": [[ar, 0.0], [ar - 1, ar + shift]]},
                        "per_task": [{"lang": t, "vocabulary": {"new_tokens": 10}} for t in tasks],
                        "protocol": {"loss": "MSE"},
                    }
                )
            )
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "summarize.py"), "teir_minilm", str(tmp_path), "0", "1"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "| plain | 50.50 ± 0.71 |" in result.stdout and "| teir-init-only | 30.50 ± 0.71 |" in result.stdout
    assert "teir-init-only vs plain: AR 0/2" in result.stdout and "teir-reg-only" not in result.stdout
