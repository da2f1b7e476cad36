"""docs/results.md against the example Makefiles: every table names the make command that rebuilds it, and every
such command's Makefile and targets exist (`make -n`, nothing runs)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results.md"
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")

# Tables with no make target, by (section heading, the table's first line). Keep this list short: a table that
# gets a Makefile target leaves it (an entry that no longer matches a table fails the test).
WITHOUT_TARGET = {
    # the index of tables recorded before a code change: it lists tables, it measures nothing
    ("# Results", "| table | recorded | code changed since, in what it measures |"),
    # hand-typed mltk commands, printed above the table
    ("### TEIR on MiniLM's trained token table", "| steps, lr | plain | TEIR initialisation | gap |"),
}


def make_commands(text: str) -> list[str]:
    """The `make -f examples/NAME.mk ...` commands of a piece of markdown: in backticks, or as indented code lines
    (with their continuation lines, after any VARIABLE=value environment); optional parts in [brackets] left out."""
    found = [m.group(1) for m in re.finditer(r"`(make [^`]*)`", text)]
    lines = text.splitlines()
    for i, line in enumerate(lines):
        code = re.match(r"    (?:\w+=\S+ )*(make .*)", line)  # an environment variable may come first
        if code:
            command = code.group(1)
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1] + " " + lines[i]
            found.append(command)
    commands = [" ".join(re.sub(r"\[[^\]]*\]", " ", c.replace("\\\n", " ")).split()) for c in found]
    return [c for c in commands if re.search(r"-f examples/\S+\.mk", c)]


def tables(text: str) -> list[tuple[str, str, str]]:
    """Each table as (section heading, its first line, the text between the previous table or heading and it)."""
    found, heading, since, inside = [], "", [], False
    for line in text.splitlines():
        if line.startswith("#"):
            heading, since, inside = line, [], False
        elif line.startswith("|"):
            if not inside:
                found.append((heading, line, "\n".join(since)))
            inside = True
        else:
            if inside:
                since, inside = [], False
            since.append(line)
    return found


def test_every_table_in_results_names_its_make_command():
    found = tables(RESULTS.read_text(encoding="utf-8"))
    missing = [
        (heading, first)
        for heading, first, before in found
        if not make_commands(before) and (heading, first) not in WITHOUT_TARGET
    ]
    assert not missing, f"tables without a `make -f examples/NAME.mk` command above them: {missing}"
    stale = WITHOUT_TARGET - {(heading, first) for heading, first, _ in found}
    assert not stale, f"WITHOUT_TARGET names tables that docs/results.md no longer has: {stale}"


def _command_id(command: str) -> str:
    return command[:80]


@pytest.mark.parametrize("command", make_commands(RESULTS.read_text(encoding="utf-8")), ids=_command_id)
def test_each_make_command_in_results_plans_its_targets(command):
    """`make -n` of the command as printed: its Makefile exists and every target it names has a rule. Placeholder
    data paths (PATH/TO/...) may lack their files; nothing else may be missing."""
    words = shlex.split(command)[1:]
    makefile = words[words.index("-f") + 1]
    assert (ROOT / makefile).is_file(), makefile
    rest = words[: words.index("-f")] + words[words.index("-f") + 2 :]
    variables = [w for w in rest if "=" in w and not w.startswith("-")]
    targets = [w for w in rest if "=" not in w and not w.startswith("-")]
    defaults = [
        d for d in ("MLTK=mltk", "PYTHON=python3") if not any(v.startswith(d.split("=")[0] + "=") for v in variables)
    ]
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "-f", makefile, *defaults, *variables, *targets],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    absent = re.findall(r"No rule to make target '([^']*)'", result.stderr)
    assert not [t for t in absent if t in targets], result.stderr
    assert all("PATH/TO" in t for t in absent), result.stderr
    assert result.returncode == 0 or absent, result.stderr


def test_small_scale_tables_train_every_variant_per_seed_from_one_world(tmp_path):
    """examples/small_scale.mk: one world, native CLIP and vocabulary chain; per seed NLT three ways (acquirers,
    full, mkd) and AME (--recipe ame) with cosine and order, with and without the map; each table a target."""
    result = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "-f",
            "examples/small_scale.mk",
            "MLTK=mltk",
            "PYTHON=python3",
            f"RUN={tmp_path}",
            "SEEDS=0 1",
            "zero-shot-video",
            "mkd",
            "ame",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    commands = [
        " ".join(line.split()) for line in result.stdout.replace("\\\n", " ").splitlines() if line.startswith("mltk ")
    ]
    stages = [c.split()[1] for c in commands]
    assert stages.count("synth-data") == stages.count("pretrain") == stages.count("encode-images") == 1
    nlt = [c for c in commands if c.startswith("mltk train-nlt")]
    assert sorted(re.search(r"--train (\S+) .*--seed (\d)", c).groups() for c in nlt) == [
        (k, s) for k in ("acquirers", "full", "mkd") for s in "01"
    ]
    ame = [c for c in commands if c.startswith("mltk train-ccrk")]
    assert len(ame) == 8 and all("--recipe ame" in c for c in ame)
    assert sum("--lexicon" in c for c in ame) == 4 and sum("--similarity order" in c for c in ame) == 4
    assert [c.split()[2] for c in commands if c.startswith("mltk evaluate") and "--metric bli" in c].count(
        "--model"
    ) == 10  # the NLT start and the four AME runs, per seed
    summaries = [line for line in result.stdout.splitlines() if "summarize.py" in line]
    assert [line.split()[2] for line in summaries] == ["zero_shot_video", "mkd", "ame"]


def _write_metrics(folder: Path, metrics: dict) -> None:
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.json").write_text(json.dumps(metrics))


def _summarize(*args: str) -> str:
    import sys

    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "summarize.py"), *args], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_small_scale_summaries_give_mean_std_per_seed_and_the_seeds_that_keep_each_comparison(tmp_path):
    """zero_shot_video and mkd: the frozen CLIP once, each trained variant over the seeds; ame: the NLT start's
    BLI, then each AME run's recall by its own scorer (and by cosine for order) and BLI."""
    zero_shot = {lang: {"top1": 40.0, "top5": 90.0} for lang in ("en", "de", "fr")}
    video = {lang: {"i2t": {"R@1": 10.0}, "t2i": {"R@1": 12.0}, "AR": 30.0} for lang in ("en", "de", "fr")}
    _write_metrics(tmp_path / "zero-shot-native", {"zero_shot": {**zero_shot, "de": {"top1": 5.0, "top5": 20.0}}})
    _write_metrics(tmp_path / "video-native", {"per_language": video})
    for seed, shift in (("0", 0.0), ("1", 2.0)):
        for kind, top1 in (("acquirers", 50.0), ("full", 45.0), ("mkd", 48.0)):
            english = 35.0 if kind == "mkd" else 40.0
            _write_metrics(
                tmp_path / f"seed{seed}" / f"zero-shot-{kind}",
                {
                    "zero_shot": {
                        "en": {"top1": english, "top5": 90.0},
                        **{lang: {"top1": top1 + shift, "top5": 95.0} for lang in ("de", "fr")},
                    }
                },
            )
            _write_metrics(tmp_path / f"seed{seed}" / f"video-{kind}", {"per_language": video})
    out = _summarize("zero_shot_video", str(tmp_path), "de,fr", "0", "1")
    assert "| frozen CLIP | 40.00 | 5.00 | 40.00 |" in out
    assert "| MLA acquirers (NLT) | 40.00 ± 0.00 | 51.00 ± 1.41 | 51.00 ± 1.41 |" in out
    assert "| full fine-tune (NLT --train full) | 45.00 47.00 | 30.00 30.00 |" in out  # per seed, mean of de, fr
    assert "zero-shot top-1 2/2, video AR 0/2" in out
    out = _summarize("mkd", str(tmp_path), "de,fr", "0", "1")
    assert "| MKD, English through the student | 35.00 35.00 | 48.00 50.00 |" in out
    assert "English top-1: 2/2; above them in the mean top-1 of de, fr: 0/2" in out

    recall = {"de": {"i2t": {"R@1": 30.0}, "t2i": {"R@1": 20.0}, "AR": 60.0}}
    for seed in ("0", "1"):
        _write_metrics(
            tmp_path / f"seed{seed}" / "nlt-acquirers-bli",
            {"bli": {"P@1": 40.0, "P@1_reverse": 30.0, "P@1_csls": 80.0}},
        )
        for similarity in ("cosine", "order"):
            for suffix, p1, ar in (("", 40.0, 61.0), ("-map", 50.0 + int(seed), 59.0)):
                name = f"ame-{similarity}{suffix}"
                _write_metrics(
                    tmp_path / f"seed{seed}" / f"{name}-bli",
                    {"bli": {"P@1": p1, "P@1_reverse": 30.0, "P@1_csls": 90.0}},
                )
                _write_metrics(
                    tmp_path / f"seed{seed}" / f"{name}-recall", {"per_language": {"de": {**recall["de"], "AR": ar}}}
                )
                if similarity == "order":
                    _write_metrics(
                        tmp_path / f"seed{seed}" / f"{name}-cosine",
                        {"per_language": {"de": {**recall["de"], "AR": ar + 1}}},
                    )
    out = _summarize("ame", str(tmp_path), "de,fr", "0", "1")
    assert "| NLT start | - | - | - | - | 40.00 ± 0.00 | 30.00 ± 0.00 | 80.00 ± 0.00 |" in out
    order_map = "| order similarity + map | 30.00 ± 0.00 | 20.00 ± 0.00 | 59.00 ± 0.00 | 60.00 ± 0.00 | 50.50 ± 0.71 |"
    assert order_map in out
    assert "| cosine, no map | 30.00 ± 0.00 | 20.00 ± 0.00 | 61.00 ± 0.00 | - | 40.00 ± 0.00 |" in out
    assert "order: P@1 2/2, AR 2/2" in out and "cosine: P@1 2/2, AR 2/2" in out
