"""Data-parallel training: 2 CPU processes under torchrun (gloo) match one process on the same global batch.

This file is also the torchrun worker: ``python -m torch.distributed.run --standalone --nproc_per_node 2
tests/test_distributed.py OUT`` trains the toy contrastive task and rank 0 writes its final tensors to OUT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from helpers_loop import loop_config

from mltk.artifacts import load_tensors, save_tensors
from mltk.core import distributed
from mltk.core.distributed import gather_with_grad, init_from_env, shard, world
from mltk.core.errors import ConfigError
from mltk.core.runtime import resolve_runtime
from mltk.losses import info_nce
from mltk.train.loop import default_optimizer, fit

GLOBAL_BATCH = 16
OPTIMIZERS = ("adamw", "sgd")
CONFIG = loop_config(steps=10, lr=0.05, warmup_fraction=0.2, eval_every=5, save_every=4)


class ContrastiveTask:
    """Two linear towers aligned with symmetric InfoNCE; each rank encodes its shard of the global batch and the
    logits span the whole gathered batch, as open_clip trains with gather_with_grad=True, local_loss=False."""

    def __init__(self, optimizer: str = "adamw"):
        self.optimizer = optimizer
        g = torch.Generator().manual_seed(7)
        self.images = torch.randn(96, 8, generator=g)
        self.texts = self.images[:, :6] @ torch.randn(6, 6, generator=g) + 0.3 * torch.randn(96, 6, generator=g)
        self.image_proj = torch.nn.Parameter(0.3 * torch.randn(4, 8, generator=g))
        self.text_proj = torch.nn.Parameter(0.3 * torch.randn(4, 6, generator=g))
        self.text_bias = torch.nn.Parameter(torch.zeros(4))

    def parameters_to_train(self):
        return {"image.proj": self.image_proj, "text.proj": self.text_proj, "text.bias": self.text_bias}

    def _features(self, rows):
        image = F.normalize(self.images[rows] @ self.image_proj.T, dim=-1)  # [b, 4]
        text = F.normalize(self.texts[rows] @ self.text_proj.T + self.text_bias, dim=-1)  # [b, 4]
        return image, text

    def loss(self, step: int) -> torch.Tensor:
        batch = torch.randperm(80, generator=torch.Generator().manual_seed(step))[:GLOBAL_BATCH]
        image, text = self._features(shard(batch))
        return info_nce(gather_with_grad(image), gather_with_grad(text), logit_scale=10.0)

    def make_optimizer(self, params, config):
        # plain SGD makes the gradient's scale visible (Adam would hide a missing division by the world size)
        if self.optimizer == "sgd":
            return torch.optim.SGD(list(params.values()), lr=config.lr * 20)
        return default_optimizer(params, config)

    def validate(self) -> dict[str, float]:
        image, text = self._features(torch.arange(80, 96))
        return {"score": -float(info_nce(image, text, logit_scale=10.0))}


def test_helpers_are_identities_in_one_process():
    x = torch.randn(4, 3, requires_grad=True)
    assert world() == (0, 1)
    assert gather_with_grad(x) is x
    assert shard([1, 2, 3]) == [1, 2, 3]
    assert distributed.same_on_all_ranks(5)


def test_two_processes_match_one_process(tmp_path):
    """AdamW (the default) and SGD: final tensors and validation scores of 2 processes equal 1 process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(Path(__file__).resolve()),
        str(tmp_path),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    for optimizer in OPTIMIZERS:
        two = load_tensors(tmp_path / f"final-{optimizer}.safetensors")
        history_two = json.loads((tmp_path / f"history-{optimizer}.json").read_text())
        one = fit(ContrastiveTask(optimizer), CONFIG, resolve_runtime("cpu", "fp32"), tmp_path / f"one-{optimizer}")
        assert two.keys() == one.last_state.keys()
        for name in two:
            assert torch.allclose(two[name], one.last_state[name], atol=1e-5), (optimizer, name)
        assert not torch.allclose(two["text.proj"], ContrastiveTask().text_proj.detach(), atol=1e-3)  # it trained
        validations_two = [h["score"] for h in history_two if h["event"] == "validate"]
        validations_one = [h["score"] for h in one.history if h["event"] == "validate"]
        assert validations_two == pytest.approx(validations_one, abs=1e-5)
        assert (tmp_path / f"state-{optimizer}" / "loop.json").is_file()
    # only rank 0 logs: one line per run at each log step, not one per process
    assert done.stderr.count("step 10/10 loss") == len(OPTIMIZERS)


def _worker(out: Path) -> None:
    runtime = init_from_env(resolve_runtime("cpu", "fp32"))
    rank, world_size = world()
    assert world_size == 2 and torch.distributed.get_backend() == "gloo"
    assert shard(list(range(8))) == list(range(4 * rank, 4 * rank + 4))
    try:
        shard(list(range(7)))
        raise AssertionError("an uneven global batch must be refused")
    except ConfigError:
        pass
    for optimizer in OPTIMIZERS:
        result = fit(ContrastiveTask(optimizer), CONFIG, runtime, out / f"state-{optimizer}")
        if rank == 0:
            save_tensors(out / f"final-{optimizer}.safetensors", result.last_state)
            (out / f"history-{optimizer}.json").write_text(json.dumps(result.history))
    torch.distributed.barrier()  # neither rank closes its connections while the other still uses them
    distributed._destroy_process_group()  # what init_from_env registers to run at exit
    assert not torch.distributed.is_initialized()
    distributed._destroy_process_group()  # a no-op the second time (atexit after an explicit teardown)


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
    # Leave without interpreter finalisation: gloo's worker threads can still hold tensors then, and destroying
    # them without a whole interpreter aborts the process now and then (SIGABRT, "terminate called without an
    # active exception") although every result is written. The results are what this test checks.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
