"""What the torchrun tests share: a tiny CLIP checkpoint that separate processes load identically, launching a
test file as a 2-process torchrun worker (gloo on the CPU, one thread each), and leaving a worker cleanly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from mltk import artifacts


def tiny_clip_checkpoint(directory: Path) -> Path:
    """A whole mltk-tiny CLIP (seed 0) saved as a checkpoint artifact."""
    from mltk.models.clip import clip_checkpoint_config, clip_state_for_checkpoint, load_clip

    torch.manual_seed(0)
    bundle = load_clip("mltk-tiny")
    return artifacts.write_checkpoint(
        directory / "tiny", clip_state_for_checkpoint(bundle.model), clip_checkpoint_config("mltk-tiny"), stage="test"
    )


def run_two_ranks(script: str, *args: object) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --standalone --nproc_per_node 2 SCRIPT ARGS...`` with one intra-op thread
    per rank (OMP_NUM_THREADS=1), so that a one-thread single process gives the same bits."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("WORLD_SIZE", None)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(Path(script).resolve()),
        *map(str, args),
    ]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def leave_worker() -> None:
    """End a torchrun worker: a barrier (neither rank closes its connections while the other still uses them), the
    group torn down, then exit without interpreter finalisation (see tests/test_distributed.py: gloo threads can
    abort it)."""
    from mltk.core import distributed

    torch.distributed.barrier()
    distributed._destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def report_shard_writes(module, name: str) -> None:
    """Wrap ``module.name(first, shard, ...)`` so that each call prints ``test-worker: rank R wrote shard S`` on
    stderr (one write, one line), for the parent to see which rank encoded which shard."""
    from mltk.core import distributed

    write = getattr(module, name)

    def reporting_write(first, shard, *args):
        sys.stderr.write(f"test-worker: rank {distributed.world()[0]} wrote shard {shard}\n")
        sys.stderr.flush()
        return write(first, shard, *args)

    setattr(module, name, reporting_write)
