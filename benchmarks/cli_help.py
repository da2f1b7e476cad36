"""`mltk --help` and `mltk COMMAND --help` against `python -c 'import torch'`: median wall time of several runs of
each, and their ratio. --help imports no torch, numpy or pyarrow (tests/test_cli_vocabulary.py holds that), so it
should cost a small fraction of one torch import.

    PYTHONPATH=$PWD python benchmarks/cli_help.py --runs 7
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
    "mltk --help": [sys.executable, "-m", "mltk", "--help"],
    "mltk train-nlt --help": [sys.executable, "-m", "mltk", "train-nlt", "--help"],
    "mltk evaluate --help": [sys.executable, "-m", "mltk", "evaluate", "--help"],
    "python -c pass": [sys.executable, "-c", "pass"],
}


def median_seconds(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    median_seconds(COMMANDS["python -c 'import torch'"], 1)  # warm the file cache
    results = {name: median_seconds(command, args.runs) for name, command in COMMANDS.items()}
    torch_time = results["python -c 'import torch'"]
    print(f"{'command':32} {'median s':>9} {'/ import torch':>15}")
    for name, seconds in results.items():
        print(f"{name:32} {seconds:9.3f} {seconds / torch_time:15.3f}")


if __name__ == "__main__":
    main()
