"""The scorer travels with the model: a model trained with AME's order similarity is validated and evaluated by
order similarity (the authors' ``evaluation.py``, ``measure=opt.measure``), and every metrics file names the
similarity it ranked with. Order similarity is ranked in blocks (no [N, M, D] tensor)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.losses.ranking import order_violation_similarity
from mltk.metrics import ranks as M
from mltk.metrics.retrieval import evaluate_retrieval

runner = CliRunner()


def _world(seed: int = 3, images: int = 12, dim: int = 6):
    """Unit, non-negative image and caption vectors (order embeddings live in the positive orthant), two
    captions per image, near their image."""
    generator = torch.Generator().manual_seed(seed)
    image = torch.rand(images, dim, generator=generator)
    caption = image.repeat_interleave(2, 0) + 0.6 * torch.rand(2 * images, dim, generator=generator)
    image, caption = (torch.nn.functional.normalize(v, dim=-1).numpy() for v in (image, caption))
    image_table = {"id": [f"i{j}" for j in range(images)]}
    text_table = {
        "id": [f"c{j}" for j in range(2 * images)],
        "image_id": [f"i{j // 2}" for j in range(2 * images)],
        "lang": ["de"] * (2 * images),
        "caption_id": [f"c{j}" for j in range(2 * images)],
    }
    return image_table, image, text_table, caption


def test_order_recalls_differ_from_cosine_and_equal_the_brute_force_ranks():
    from mltk.losses.ranking import order_violation_scores  # noqa: F401  (the blocked scorer evaluate uses)

    image_table, image, text_table, caption = _world()
    order = evaluate_retrieval(image_table, image, text_table, caption, similarity="order", chunk_mb=0.0001)
    cosine = evaluate_retrieval(image_table, image, text_table, caption)
    assert order["settings"]["similarity"] == "order" and cosine["settings"]["similarity"] == "cosine"
    assert order["per_language"]["de"]["t2i"] != cosine["per_language"]["de"]["t2i"]
    scores = order_violation_similarity(torch.from_numpy(image), torch.from_numpy(caption))  # [N, M]
    t2i = M.ranks_from_scores(scores.T, [[j // 2] for j in range(len(caption))])
    i2t = M.ranks_from_scores(scores, [[2 * i, 2 * i + 1] for i in range(len(image))])
    assert order["per_language"]["de"]["t2i"] == M.rank_summary(t2i)
    assert order["per_language"]["de"]["i2t"] == M.rank_summary(i2t)


def test_order_scores_in_blocks_equal_the_whole_tensor():
    from mltk.losses.ranking import order_violation_scores

    generator = torch.Generator().manual_seed(0)
    specific, general = torch.rand(37, 5, generator=generator), torch.rand(53, 5, generator=generator)
    whole = order_violation_similarity(specific, general)
    assert torch.equal(order_violation_scores(specific, general, block_mb=0.0001), whole)  # 5 x 1 blocks


def _checkpoint(path, similarity):
    """A checkpoint config as train-ccrk writes it (the tensors do not matter here: evaluate reads the texts)."""
    config = {
        "format": "mla",
        "base": {"model": "mltk-tiny"},
        "native_lang": "en",
        "languages": ["de"],
        "non_native": {"kind": "vocab", "source": "vocab", "vocab_size": 10, "embed_dim": 4},
        "acquirer_hidden": 8,
        "train_ccrk": {"loss": "hinge", "similarity": similarity},
    }
    return artifacts.write_checkpoint(path, {"w": torch.zeros(1)}, config, stage="train-ccrk")


def test_an_order_trained_checkpoint_is_evaluated_by_order(tmp_path):
    image_table, image, text_table, caption = _world()
    checkpoint = _checkpoint(tmp_path / "ckpt", "order")
    images = artifacts.write_embeddings(tmp_path / "img", image_table["id"], image, stage="encode-images")
    texts = artifacts.write_embeddings(
        tmp_path / "txt",
        text_table["id"],
        caption,
        stage="encode-texts",
        inputs=[checkpoint],
        **{k: v for k, v in text_table.items() if k != "id"},
    )
    for extra, expected in (([], "order"), (["--similarity", "cosine"], "cosine")):
        out = tmp_path / f"m-{expected}"
        result = runner.invoke(
            app, ["evaluate", "--texts", str(texts), "--images", str(images), "--device", "cpu", "-o", str(out), *extra]
        )
        assert result.exit_code == 0, result.stderr
        assert json.loads((out / "metrics.json").read_text())["settings"]["similarity"] == expected
    by_order = evaluate_retrieval(image_table, image, text_table, caption, similarity="order")
    written = json.loads((tmp_path / "m-order" / "metrics.json").read_text())
    assert written["per_language"]["de"]["t2i"] == pytest.approx(by_order["per_language"]["de"]["t2i"])


def test_the_similarity_comes_from_the_option_the_checkpoint_or_cosine(tmp_path):
    from mltk.evaluate.scorer import evaluation_similarity

    checkpoint = _checkpoint(tmp_path / "ckpt", "order")
    assert evaluation_similarity(None, checkpoint, None) == "order"
    assert evaluation_similarity("cosine", checkpoint, None) == "cosine"
    assert evaluation_similarity(None, _checkpoint(tmp_path / "cos", "cosine"), None) == "cosine"
    assert evaluation_similarity(None, "ViT-B-32", None) == "cosine"


def test_an_unknown_similarity_is_refused(tmp_path):
    image_table, image, text_table, caption = _world()
    images = artifacts.write_embeddings(tmp_path / "img", image_table["id"], image, stage="encode-images")
    texts = artifacts.write_embeddings(
        tmp_path / "txt",
        text_table["id"],
        caption,
        stage="encode-texts",
        **{k: v for k, v in text_table.items() if k != "id"},
    )
    result = runner.invoke(
        app,
        ["evaluate", "--texts", str(texts), "--images", str(images), "--similarity", "dot", "-o", str(tmp_path / "m")],
    )
    assert result.exit_code == 2 and "--similarity must be one of cosine, order" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert np.isfinite(image).all()
