"""Importing the MLA authors' released checkpoints (``mltk import-mla``).

A fake authors' checkpoint is built from a tiny CLIP (open_clip key names = OpenAI's) plus acquirer and embedding
tensors under the authors' names; the imported encoder must give, for German, French and English captions, the
features of a reference forward written here directly from the raw tensors (not through mltk's encoder code).
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import open_clip
import pytest
import torch
import torch.nn.functional as F
from helpers_tiny import tiny_wordpiece_tokenizer
from safetensors.torch import save_file
from transformers import AutoTokenizer
from typer.testing import CliRunner

from mltk import artifacts
from mltk.artifacts import dependencies, schema
from mltk.cli import app
from mltk.core.errors import MltkError
from mltk.export.import_mla import import_mla_checkpoint
from mltk.models.clip import load_clip
from mltk.models.multilingual import load_encoder
from mltk.models.text import OpenClipTextTower

runner = CliRunner()
ARCH = "mltk-tiny"
LANGS = ("de", "fr")
EMBED_DIM = 24  # the non-native table's width (768 for M-BERT)
HIDDEN = 16  # acquirer hidden size (256 in the paper)
GERMAN = "ein roter kreis links von einem blauer quadrat"
FRENCH = "un cercle rouge à gauche d' un carré bleu"
ENGLISH = "a red circle left of a blue square"


# --- the fake authors' checkpoint ----------------------------------------------------------------------------------


def authors_state(clip_state: dict, vocab_size: int, width: int, num_blocks: int, seed: int = 0) -> dict:
    """The CLIP state dict plus acquirers (with their unused LayerNorm) and the embedding, as the authors name them."""
    g = torch.Generator().manual_seed(seed)
    state = {k: v.clone() for k, v in clip_state.items()}
    state["multilingual_embedding.weight"] = torch.randn(vocab_size, EMBED_DIM, generator=g) * 0.5
    state["multilingual_embedding_linear.weight"] = torch.randn(width, EMBED_DIM, generator=g) * 0.2
    state["multilingual_embedding_linear.bias"] = torch.randn(width, generator=g) * 0.1
    for block in range(num_blocks):
        for lang in LANGS:
            prefix = f"transformer.resblocks.{block}.acquirer.{lang}."
            state[prefix + "mlp.c_fc.weight"] = torch.randn(HIDDEN, width, generator=g) * 0.1
            state[prefix + "mlp.c_fc.bias"] = torch.randn(HIDDEN, generator=g) * 0.1
            state[prefix + "mlp.c_proj.weight"] = torch.randn(width, HIDDEN, generator=g) * 0.3  # not zero: matters
            state[prefix + "mlp.c_proj.bias"] = torch.randn(width, generator=g) * 0.1
            state[prefix + "ln.weight"] = torch.randn(width, generator=g)  # unused by the authors' forward
            state[prefix + "ln.bias"] = torch.randn(width, generator=g)
    return state


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    root = tmp_path_factory.mktemp("authors")
    torch.manual_seed(0)
    clip = load_clip(ARCH).model
    tokenizer_dir = tiny_wordpiece_tokenizer(root / "tok")
    vocab_size = len(AutoTokenizer.from_pretrained(str(tokenizer_dir)))
    width, num_blocks = clip.transformer.width, len(clip.transformer.resblocks)
    state = authors_state(clip.state_dict(), vocab_size, width, num_blocks)
    path = root / "mla_authors.pt"
    torch.save(state, path)
    return {
        "root": root,
        "clip": clip,
        "tokenizer": tokenizer_dir,
        "state": state,
        "path": path,
        "width": width,
        "blocks": num_blocks,
    }


@pytest.fixture(scope="module")
def imported(fake):
    out = fake["root"] / "imported"
    result = runner.invoke(
        app,
        ["import-mla", str(fake["path"]), "--out", str(out), "--model", ARCH, "--tokenizer", str(fake["tokenizer"])],
    )
    assert result.exit_code == 0, result.stderr
    return out, result


# --- a reference forward written from the raw tensors ------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _wordpiece(directory: str):
    return AutoTokenizer.from_pretrained(directory)


def reference_features(
    state: dict, tokenizer_dir: Path, caption: str, lang: str | None, acquirers: bool = True
) -> torch.Tensor:
    """The authors' forward in float64: M-BERT ids padded to 77 -> embedding -> linear -> + positions -> (block ->
    acquirer) x n -> first [SEP] -> ln_final -> projection. ``lang=None``: the English CLIP path instead."""
    s = {k: v.double() for k, v in state.items()}
    heads = open_clip.get_model_config(ARCH)["text_cfg"]["heads"]
    if lang is None:
        ids = open_clip.get_tokenizer(ARCH)([caption])[0]
        x = s["token_embedding.weight"][ids]
        pool = int(ids.argmax())  # CLIP's end token is its largest id
    else:
        tok = _wordpiece(str(tokenizer_dir))
        ids = torch.tensor(tok(caption, padding="max_length", max_length=77)["input_ids"])
        x = (
            s["multilingual_embedding.weight"][ids] @ s["multilingual_embedding_linear.weight"].T
            + s["multilingual_embedding_linear.bias"]
        )
        pool = int((ids == tok.sep_token_id).nonzero()[0])
    x = x + s["positional_embedding"]  # [77, W]
    length, width = x.shape
    mask = torch.full((length, length), float("-inf"), dtype=torch.float64).triu(1)
    blocks = len({k.split(".")[2] for k in s if k.startswith("transformer.resblocks.")})
    for i in range(blocks):
        b = lambda name: s[f"transformer.resblocks.{i}.{name}"]  # noqa: E731
        h = F.layer_norm(x, (width,), b("ln_1.weight"), b("ln_1.bias"), eps=1e-5)
        q, k, v = (h @ b("attn.in_proj_weight").T + b("attn.in_proj_bias")).chunk(3, dim=-1)
        q, k, v = (t.reshape(length, heads, width // heads).transpose(0, 1) for t in (q, k, v))  # [H, L, d]
        attention = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(width // heads) + mask, dim=-1) @ v
        x = x + attention.transpose(0, 1).reshape(length, width) @ b("attn.out_proj.weight").T + b("attn.out_proj.bias")
        h = F.layer_norm(x, (width,), b("ln_2.weight"), b("ln_2.bias"), eps=1e-5)
        h = h @ b("mlp.c_fc.weight").T + b("mlp.c_fc.bias")
        h = h * torch.sigmoid(1.702 * h)  # QuickGELU
        x = x + h @ b("mlp.c_proj.weight").T + b("mlp.c_proj.bias")
        if lang is not None and acquirers:
            a = lambda name: b(f"acquirer.{lang}.mlp.{name}")  # noqa: E731
            x = x + torch.relu(x @ a("c_fc.weight").T + a("c_fc.bias")) @ a("c_proj.weight").T + a("c_proj.bias")
    pooled = F.layer_norm(x[pool], (width,), s["ln_final.weight"], s["ln_final.bias"], eps=1e-5)
    return pooled @ s["text_projection"]  # [D]


# --- the import reproduces the authors' model --------------------------------------------------------------------


def test_imported_model_reproduces_the_reference_forward(fake, imported):
    out, result = imported
    assert result.stdout == f"{(out / 'mla').resolve()}\n"  # stdout: only the artifact to evaluate
    assert "dropped 16 acquirer LayerNorm" in result.stderr  # 4 blocks x 2 languages x (weight, bias)
    encoder = load_encoder(out / "mla")
    assert encoder.languages == list(LANGS)
    with torch.no_grad():
        for caption, lang in ((GERMAN, "de"), (FRENCH, "fr")):
            ours = encoder.encode([caption], lang)[0].double()
            reference = reference_features(fake["state"], fake["tokenizer"], caption, lang)
            assert (ours - reference).abs().max() < 1e-5, lang
            # the check has teeth: the features depend on the acquirers and on which language's acquirers
            assert (
                reference_features(fake["state"], fake["tokenizer"], caption, lang, acquirers=False) - reference
            ).abs().max() > 1e-2
            other = "fr" if lang == "de" else "de"
            assert (encoder.encode([caption], other)[0].double() - reference).abs().max() > 1e-2
        english = encoder.encode([ENGLISH], "en")[0]
        english_reference = reference_features(fake["state"], fake["tokenizer"], ENGLISH, None)
        assert (english.double() - english_reference).abs().max() < 1e-5


def test_english_equals_the_tiny_clip(fake, imported):
    out, _ = imported
    encoder = load_encoder(out / "mla")
    tokens = open_clip.get_tokenizer(ARCH)([ENGLISH, "two red circles"])
    with torch.no_grad():
        ours = encoder.encode([ENGLISH, "two red circles"], "en")
        assert torch.equal(ours, OpenClipTextTower(fake["clip"]).encode(tokens))  # same weights, same computation
        assert (ours - fake["clip"].encode_text(tokens)).abs().max() < 1e-5  # open_clip's own forward


def test_artifacts_hold_the_split_and_renamed_tensors(fake, imported):
    out, _ = imported
    config = json.loads((out / "mla" / "config.json").read_text())
    assert config["format"] == "mla" and config["base"]["model"] == str((out / "base").resolve())
    assert config["non_native"] == {
        "kind": "hf",
        "source": str(fake["tokenizer"].resolve()),
        "vocab_size": fake["state"]["multilingual_embedding.weight"].shape[0],
        "embed_dim": EMBED_DIM,
    }
    assert config["acquirer_hidden"] == HIDDEN and config["native_lang"] == "en"
    pinned = config["depends_on"]  # base and tokenizer by content, and relative to the checkpoint
    assert pinned["base.model"]["relative"] == "../base"
    assert pinned["base.model"]["fingerprint"] == dependencies.content_fingerprint(out / "base")
    assert pinned["non_native.source"]["fingerprint"] == dependencies.content_fingerprint(fake["tokenizer"])
    assert json.loads((out / "base" / "config.json").read_text()) == {"format": "open_clip", "model": ARCH}
    base = load_clip(str(out / "base")).model.state_dict()
    assert set(base) == set(fake["clip"].state_dict())
    assert all(torch.equal(base[k], v) for k, v in fake["clip"].state_dict().items())
    from mltk.artifacts import load_checkpoint

    tensors, _ = load_checkpoint(out / "mla")
    assert torch.equal(
        tensors["acquirers.fr.3.c_proj.weight"], fake["state"]["transformer.resblocks.3.acquirer.fr.mlp.c_proj.weight"]
    )
    assert torch.equal(tensors["embedding.proj.bias"], fake["state"]["multilingual_embedding_linear.bias"])
    assert len(tensors) == 3 + 4 * 4 * len(LANGS)  # no ln, no CLIP


def test_an_imported_pair_moved_together_still_loads(fake, tmp_path):
    """The MLA checkpoint names its base as ../base as well as by absolute path: moving out_dir keeps it whole."""
    import shutil

    result = import_mla_checkpoint(fake["path"], tmp_path / "a", model=ARCH, tokenizer=str(fake["tokenizer"]))
    before = load_encoder(result.mla).encode(["ein roter kreis"], LANGS[0])
    moved = Path(shutil.move(tmp_path / "a", tmp_path / "b"))
    with torch.no_grad():
        after = load_encoder(moved / "mla").encode(["ein roter kreis"], LANGS[0])
    assert torch.equal(before.detach(), after)


@pytest.mark.parametrize("layout", ["wrapped_module_bin", "authors_epoch_name", "safetensors"])
def test_wrapped_prefixed_and_safetensors_files_import_the_same(fake, imported, layout, tmp_path):
    state = fake["state"]
    if layout == "wrapped_module_bin":
        path = tmp_path / "model.bin"
        torch.save({"epoch": 3, "state_dict": {f"module.{k}": v for k, v in state.items()}}, path)
    elif layout == "authors_epoch_name":  # how the authors' training script names its checkpoints
        path = tmp_path / "pytorch_model.bin.7"
        torch.save({"model": state}, path)
    else:
        path = tmp_path / "model.safetensors"
        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    result = import_mla_checkpoint(path, tmp_path / "out", model=ARCH, tokenizer=str(fake["tokenizer"]))
    from mltk.artifacts import load_checkpoint

    ours, _ = load_checkpoint(result.mla)
    reference, _ = load_checkpoint(imported[0] / "mla")
    assert set(ours) == set(reference) and all(torch.equal(ours[k], reference[k]) for k in reference)


def test_json_output_and_language_subset(fake, tmp_path):
    result = runner.invoke(
        app,
        [
            "import-mla",
            str(fake["path"]),
            "--out",
            str(tmp_path / "o"),
            "--model",
            ARCH,
            "--tokenizer",
            str(fake["tokenizer"]),
            "--lang",
            "fr",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["path"] == str((tmp_path / "o" / "mla").resolve()) and payload["languages"] == ["fr"]
    assert payload["base"] == str((tmp_path / "o" / "base").resolve()) and payload["tokenizer_checked"] is True
    assert load_encoder(payload["path"]).languages == ["fr"]


def test_a_shared_acquirer_stack_needs_and_serves_the_named_languages(fake, tmp_path):
    state = {k.replace(".acquirer.de.", ".acquirer."): v for k, v in fake["state"].items() if ".acquirer.fr." not in k}
    path = tmp_path / "shared.pt"
    torch.save(state, path)
    with pytest.raises(MltkError, match="shared by all languages"):
        import_mla_checkpoint(path, tmp_path / "x", model=ARCH, tokenizer=str(fake["tokenizer"]))
    result = import_mla_checkpoint(
        path, tmp_path / "o", model=ARCH, tokenizer=str(fake["tokenizer"]), languages=["de", "it"]
    )
    encoder = load_encoder(result.mla)
    with torch.no_grad():
        de, it = encoder.encode([GERMAN], "de"), encoder.encode([GERMAN], "it")
    reference = reference_features(fake["state"], fake["tokenizer"], GERMAN, "de")
    assert torch.equal(de, it) and (de[0].double() - reference).abs().max() < 1e-5


# --- a hub tokenizer without network -----------------------------------------------------------------------------


def test_hub_tokenizer_without_network_is_recorded_with_a_warning(fake, tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # no network, and no waiting for it
    result = runner.invoke(
        app,
        [
            "import-mla",
            str(fake["path"]),
            "--out",
            str(tmp_path / "o"),
            "--model",
            ARCH,
            "--tokenizer",
            "bert-base-multilingual-cased",
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert "warning: could not load tokenizer 'bert-base-multilingual-cased'" in result.stderr
    config = json.loads((tmp_path / "o" / "mla" / "config.json").read_text())
    assert config["non_native"]["source"] == "bert-base-multilingual-cased"
    with pytest.raises(MltkError, match="not in the local Hugging Face cache"):  # the later load fails clearly
        load_encoder(tmp_path / "o" / "mla")


# --- bad input: exit 2, one line that names the file ---------------------------------------------------------------


def _import_fails(path: Path, out: Path, *extra: str) -> str:
    result = runner.invoke(app, ["import-mla", str(path), "--out", str(out), *extra])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mltk import-mla: error: ")
    assert not out.exists()  # nothing written
    return lines[0]


def _save_variant(fake, tmp_path, drop=(), add=None, name="bad.pt") -> Path:
    state = {k: v for k, v in fake["state"].items() if k not in drop}
    state.update(add or {})
    torch.save(state, tmp_path / name)
    return tmp_path / name


@pytest.mark.parametrize(
    "drop, message",
    [
        (["multilingual_embedding_linear.bias"], "missing keys: multilingual_embedding_linear.bias"),
        (
            ["transformer.resblocks.2.acquirer.de.mlp.c_proj.weight"],
            "missing keys: transformer.resblocks.2.acquirer.de.mlp.c_proj.weight",
        ),
        (["ln_final.weight"], "missing keys: 1 CLIP tensor"),
    ],
)
def test_missing_keys(fake, tmp_path, drop, message):
    path = _save_variant(fake, tmp_path, drop=drop)
    line = _import_fails(path, tmp_path / "o", "--model", ARCH, "--tokenizer", str(fake["tokenizer"]))
    assert str(path) in line and message in line


def test_no_acquirers_is_not_an_mla_checkpoint(fake, tmp_path):
    path = tmp_path / "clip.pt"
    torch.save(fake["clip"].state_dict(), path)
    line = _import_fails(path, tmp_path / "o", "--model", ARCH, "--tokenizer", str(fake["tokenizer"]))
    assert str(path) in line and "not an MLA checkpoint" in line


def test_wrong_architecture(fake, tmp_path):
    line = _import_fails(
        fake["path"], tmp_path / "o", "--model", "ViT-B-32-quickgelu", "--tokenizer", str(fake["tokenizer"])
    )
    assert str(fake["path"]) in line and "wrong architecture" in line and "ViT-B-32-quickgelu" in line


def test_wrong_acquirer_width_is_a_wrong_architecture(fake, tmp_path):
    key = "transformer.resblocks.1.acquirer.fr.mlp.c_proj.weight"
    path = _save_variant(fake, tmp_path, add={key: torch.zeros(fake["width"] + 1, HIDDEN)})
    line = _import_fails(path, tmp_path / "o", "--model", ARCH, "--tokenizer", str(fake["tokenizer"]))
    assert "wrong architecture" in line and "block 1 of 'fr'" in line


@pytest.mark.parametrize(
    "add, message",
    [
        ({"text_adapter.weight": torch.zeros(2)}, "unknown layout: 1 unexpected key(s) (text_adapter.weight)"),
        ({"transformer.resblocks.0.acquirer.de.mlp_sr.c_fc.weight": torch.zeros(2)}, "unknown layout"),
    ],
)
def test_unknown_keys_are_an_unknown_layout(fake, tmp_path, add, message):
    path = _save_variant(fake, tmp_path, add=add)
    line = _import_fails(path, tmp_path / "o", "--model", ARCH, "--tokenizer", str(fake["tokenizer"]))
    assert str(path) in line and message in line


class NotATensor:  # a pickled object of a class: weights_only=True must refuse to build it
    pass


@pytest.mark.parametrize(
    "content, message",
    [
        ([torch.zeros(2)], "unknown layout: expected a state dict"),
        ({"a.weight": torch.zeros(2), "step": 3}, "unknown layout: 1 entries are not tensors"),
        ({"a.weight": NotATensor()}, "cannot read as a PyTorch state dict with weights_only=True"),
        (b"not a checkpoint at all", "cannot read as a PyTorch state dict"),
    ],
)
def test_unreadable_or_unknown_files(tmp_path, content, message):
    path = tmp_path / "weird.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    line = _import_fails(path, tmp_path / "o", "--model", ARCH)
    assert str(path) in line and message in line


def test_missing_file(tmp_path):
    line = _import_fails(tmp_path / "nope.pt", tmp_path / "o", "--model", ARCH)
    assert "nope.pt" in line and "no such checkpoint file" in line


def test_tokenizer_vocabulary_must_match_the_embedding_rows(fake, tmp_path):
    table = fake["state"]["multilingual_embedding.weight"]
    path = _save_variant(fake, tmp_path, add={"multilingual_embedding.weight": torch.cat([table, table[:3]])})
    line = _import_fails(path, tmp_path / "o", "--model", ARCH, "--tokenizer", str(fake["tokenizer"]))
    assert f"has {table.shape[0] + 3} rows but tokenizer" in line and "wrong --tokenizer" in line


def test_missing_local_tokenizer_and_native_acquirers(fake, tmp_path):
    line = _import_fails(fake["path"], tmp_path / "o", "--model", ARCH, "--tokenizer", "./no/such/tokenizer")
    assert "tokenizer folder not found" in line
    native = {k.replace(".acquirer.fr.", ".acquirer.en."): v for k, v in fake["state"].items()}
    torch.save(native, tmp_path / "en.pt")
    line = _import_fails(tmp_path / "en.pt", tmp_path / "o", "--model", ARCH, "--tokenizer", str(fake["tokenizer"]))
    assert "native language 'en'" in line


def test_evaluate_and_index_read_the_import_through_the_text_encoder_registry(fake, imported):
    import pyarrow as pa

    from mltk.core.runtime import resolve_runtime
    from mltk.encode.text_encoders import load_text_encoder
    from mltk.encode.texts import encode_captions

    encoder = load_text_encoder(imported[0] / "mla")
    captions = pa.table(
        {
            "image_id": ["1", "1", "1"],
            "lang": ["en", "de", "fr"],
            "caption": [ENGLISH, GERMAN, FRENCH],
            "caption_id": ["c", "c", "c"],
            "split": ["test"] * 3,
        }
    )
    table, vectors = encode_captions(encoder, captions, resolve_runtime("cpu"))
    assert sorted(table.column("lang").to_pylist()) == ["de", "en", "fr"]
    by_lang = dict(zip(table.column("lang").to_pylist(), vectors))
    reference = reference_features(fake["state"], fake["tokenizer"], GERMAN, "de")
    assert abs(by_lang["de"] - (reference / reference.norm()).numpy()).max() < 1e-5  # L2-normalised features


def test_imported_checkpoints_hold_the_files_their_schema_format_lists(imported):
    out, _ = imported
    for name, expected in (("base", schema.FORMAT_OPEN_CLIP), ("mla", schema.FORMAT_MLA)):
        fmt = artifacts.checkpoint_format(out / name)
        spec = schema.CHECKPOINT_FORMATS[fmt]
        assert fmt == expected and "import-mla" in spec.written_by
        assert set(artifacts.read_manifest(out / name, "checkpoint")["files"]) == set(spec.files)
