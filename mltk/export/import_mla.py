"""Import the MLA authors' released checkpoints (Zhang et al., "Generalizing Multimodal Pre-training into
Multilingual via Language Acquisition") so published models can be evaluated with mltk.

The authors saved ``clip_model.state_dict()`` of their modified OpenAI CLIP: one flat state dict (a ``.pt``/
``.bin`` pickle, often named ``pytorch_model.bin.N``) that holds

- the whole CLIP under OpenAI key names, which are exactly open_clip's ``CLIP`` keys (``visual.*``,
  ``transformer.resblocks.{i}.*``, ``token_embedding.weight``, ``positional_embedding``, ``ln_final.*``,
  ``text_projection``, ``logit_scale``);
- the acquirers, ``transformer.resblocks.{i}.acquirer.{lang}.mlp.{c_fc,c_proj}.{weight,bias}``, and an
  ``acquirer.{lang}.ln`` LayerNorm that their forward never calls (``h + mlp(h)``), so it is dropped;
- the shared non-native embedding ``multilingual_embedding.weight`` [V, E] (M-BERT's 119,547 x 768) and its
  projection ``multilingual_embedding_linear.{weight [W, E], bias [W]}``.

Their forward for a non-English caption is mltk's (``mltk.models.multilingual``): M-BERT ids -> embedding ->
linear -> + CLIP positions -> block_i -> acquirer_i[lang] ... -> ``ln_final`` at the first ``[SEP]`` -> text
projection, under CLIP's causal mask. So importing is a split by key prefix plus a rename::

    multilingual_embedding.weight                        -> embedding.table.weight
    multilingual_embedding_linear.{weight,bias}          -> embedding.proj.{weight,bias}
    transformer.resblocks.{i}.acquirer.{lang}.mlp.{c}.*  -> acquirers.{lang}.{i}.{c}.*
    everything else (the CLIP)                           -> a whole-CLIP checkpoint artifact (the frozen base)

Two artifacts come out, ``OUT/base`` (``{"format": "open_clip"}``) and ``OUT/mla`` (``{"format": "mla"}``, whose
base names ``OUT/base`` by absolute path); ``OUT/mla`` is what ``mltk evaluate``/``mltk index`` take. Every shape
is checked against the open_clip architecture (built on the meta device, no memory) and the embedding rows against
the tokenizer's vocabulary before anything is written. Only ``torch.load(..., weights_only=True)`` is used.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch

from mltk import artifacts
from mltk.artifacts import schema
from mltk.core.errors import ArtifactError, ConfigError
from mltk.core.runtime import log
from mltk.models.clip import clip_checkpoint_config, quiet_open_clip

DEFAULT_ARCHITECTURE = "ViT-B-32-quickgelu"  # OpenAI ViT-B/32 weights need QuickGELU
DEFAULT_TOKENIZER = "bert-base-multilingual-cased"
STAGE = "import-mla"

EMBEDDING_KEYS = {  # the authors' name -> mltk's MLA checkpoint key
    "multilingual_embedding.weight": "embedding.table.weight",
    "multilingual_embedding_linear.weight": "embedding.proj.weight",
    "multilingual_embedding_linear.bias": "embedding.proj.bias",
}
# transformer.resblocks.{block}.acquirer[.{lang}].{mlp|ln}.{rest}; no lang group = one stack shared by all languages
ACQUIRER_KEY = re.compile(r"^transformer\.resblocks\.(\d+)\.acquirer\.(?:([^.]+)\.)?(mlp|ln)\.(.+)$")
ACQUIRER_TENSORS = ("c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias")  # under ``mlp.``
# Scalars that OpenAI's TorchScript state dicts carry beside the weights (open_clip drops them too).
OPENAI_METADATA_KEYS = ("input_resolution", "context_length", "vocab_size")
WRAPPER_KEYS = ("state_dict", "model")


@dataclass(frozen=True)
class ImportedMLA:
    mla: Path  # the MLA checkpoint artifact to evaluate/index
    base: Path  # the whole-CLIP checkpoint artifact it names
    languages: tuple[str, ...]
    dropped: tuple[str, ...]  # checkpoint keys left out on purpose (unused LayerNorms, metadata)
    tokenizer_checked: bool  # False when the tokenizer could not be loaded (hub name, no network)


@dataclass
class AuthorsState:
    """The authors' state dict split by key prefix."""

    clip: dict[str, torch.Tensor]
    embedding: dict[str, torch.Tensor]  # under the authors' names (EMBEDDING_KEYS)
    acquirers: dict[str | None, dict[int, dict[str, torch.Tensor]]]  # lang (None: shared) -> block -> c_fc.weight..
    dropped: list[str]


def import_mla_checkpoint(
    checkpoint: str | Path,
    out_dir: str | Path,
    model: str = DEFAULT_ARCHITECTURE,
    tokenizer: str = DEFAULT_TOKENIZER,
    languages: list[str] | None = None,
) -> ImportedMLA:
    """Convert an authors' MLA checkpoint into ``out_dir/base`` (whole CLIP) and ``out_dir/mla`` (acquirers and
    embedding). ``languages`` keeps only those languages' acquirers; it is required when the checkpoint has a
    single acquirer stack shared by all languages (the authors' code without ``--m_acquirer``), which is then
    copied to each named language."""
    checkpoint = Path(checkpoint)
    state = split_authors_state(read_state_dict(checkpoint), checkpoint)
    width, num_blocks = check_clip_architecture(state.clip, model, checkpoint)
    acquirers, hidden, kept = convert_acquirers(state.acquirers, width, num_blocks, languages, checkpoint)
    embedding, vocab_size, embed_dim = convert_embedding(state.embedding, width, checkpoint)
    kind, source, checked = check_tokenizer(tokenizer, vocab_size, checkpoint)
    _log_dropped(state.dropped)

    out_dir = Path(out_dir)
    run_config = {
        "checkpoint": str(checkpoint.resolve()),
        "model": model,
        "tokenizer": tokenizer,
        "languages": list(kept),
    }
    base = artifacts.write_checkpoint(
        out_dir / "base",
        _unshared(state.clip),
        clip_checkpoint_config(model),
        stage=STAGE,
        run_config=run_config,
        inputs=[checkpoint],
        imported_from=str(checkpoint.resolve()),
    )
    config = {
        "format": schema.FORMAT_MLA,
        "base": {"model": str(base), "pretrained": None},
        "native_lang": schema.NATIVE_LANG,
        "languages": list(kept),
        "non_native": {"kind": kind, "source": source, "vocab_size": vocab_size, "embed_dim": embed_dim},
        "acquirer_hidden": hidden,
    }
    mla = artifacts.write_checkpoint(
        out_dir / "mla",
        _unshared({**embedding, **acquirers}),
        config,
        stage=STAGE,
        run_config=run_config,
        inputs=[checkpoint, base],
        imported_from=str(checkpoint.resolve()),
        tokenizer_checked=checked,
    )
    log(
        f"import-mla: {len(kept)} language(s) ({', '.join(kept)}), acquirer hidden {hidden}, "
        f"embedding {vocab_size} x {embed_dim}, base {model} -> {mla}"
    )
    return ImportedMLA(mla, base, tuple(kept), tuple(state.dropped), checked)


def _unshared(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """safetensors refuses tensors that share memory (a shared acquirer stack copied to several languages, tied
    weights in a pickle): give every repeated storage its own copy."""
    seen, result = set(), {}
    for key, tensor in tensors.items():
        storage = tensor.untyped_storage().data_ptr()
        result[key] = tensor.clone() if storage in seen else tensor
        seen.add(storage)
    return result


def _log_dropped(dropped: list[str]) -> None:
    norms = [k for k in dropped if ".acquirer." in k]
    if norms:
        log(
            f"import-mla: dropped {len(norms)} acquirer LayerNorm tensor(s) (acquirer.{{lang}}.ln.*): the authors' "
            f"forward h + mlp(h) never calls them"
        )
    for key in (k for k in dropped if ".acquirer." not in k):
        log(f"import-mla: dropped {key} (OpenAI metadata, not a weight)")


# --- reading -----------------------------------------------------------------------------------------------------


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """A flat ``{name: tensor}`` from a safetensors file or a PyTorch pickle (weights only, never arbitrary
    objects), unwrapped from ``{"state_dict": ...}``/``{"model": ...}`` and stripped of DDP's ``module.``."""
    if not path.is_file():
        raise ArtifactError("no such checkpoint file", path)
    if path.suffix == ".safetensors":
        state = artifacts.load_tensors(path)
    else:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # pickle, zip and torch errors all mean "cannot read this"
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ArtifactError(
                f"cannot read as a PyTorch state dict with weights_only=True ({first_line[:200]})", path
            )
    for _ in range(2):  # {"model": {"state_dict": ...}} exists in the wild too
        if isinstance(state, dict):
            inner = [state[k] for k in WRAPPER_KEYS if isinstance(state.get(k), dict)]
            if inner and not any(isinstance(v, torch.Tensor) for v in state.values()):
                state = inner[0]
    if not isinstance(state, dict) or not state:
        raise ArtifactError(f"unknown layout: expected a state dict of tensors, found {type(state).__name__}", path)
    not_tensors = [str(k) for k, v in state.items() if not isinstance(v, torch.Tensor)]
    if not_tensors:
        raise ArtifactError(
            f"unknown layout: {len(not_tensors)} entries are not tensors ({', '.join(not_tensors[:3])})", path
        )
    if all(str(k).startswith("module.") for k in state):
        state = {k[len("module.") :]: v for k, v in state.items()}
    return state


def split_authors_state(state: dict[str, torch.Tensor], path: Path) -> AuthorsState:
    """Split by prefix: embedding, acquirers (``ln`` dropped), OpenAI metadata (dropped), the rest is CLIP."""
    clip, embedding, dropped = {}, {}, []
    acquirers: dict[str | None, dict[int, dict[str, torch.Tensor]]] = defaultdict(lambda: defaultdict(dict))
    unknown = []
    for key, tensor in state.items():
        match = ACQUIRER_KEY.match(key)
        if key in EMBEDDING_KEYS:
            embedding[key] = tensor
        elif key.startswith(("multilingual_embedding.", "multilingual_embedding_linear.")):
            unknown.append(key)
        elif match:
            block, lang, part, rest = int(match[1]), match[2], match[3], match[4]
            if part == "ln":
                dropped.append(key)
            elif rest in ACQUIRER_TENSORS:
                acquirers[lang][block][rest] = tensor
            else:
                unknown.append(key)
        elif ".acquirer." in key:
            unknown.append(key)
        elif key in OPENAI_METADATA_KEYS:
            dropped.append(key)
        else:
            clip[key] = tensor
    if unknown:
        raise ArtifactError(
            f"unknown layout: {len(unknown)} unexpected acquirer/embedding key(s) ({', '.join(unknown[:3])})", path
        )
    if not acquirers:
        raise ArtifactError(
            "missing keys: no transformer.resblocks.{i}.acquirer.{lang}.mlp.* tensors (a plain CLIP, "
            "not an MLA checkpoint?)",
            path,
        )
    missing = [k for k in EMBEDDING_KEYS if k not in embedding]
    if missing:
        raise ArtifactError(f"missing keys: {', '.join(missing)}", path)
    return AuthorsState(clip, embedding, {k: dict(v) for k, v in acquirers.items()}, dropped)


# --- checking and converting -------------------------------------------------------------------------------------


def architecture_shapes(model: str) -> dict[str, torch.Size]:
    """The state-dict shapes of an open_clip architecture, built on the meta device (no weights allocated)."""
    import open_clip

    if model not in open_clip.list_models():
        raise ConfigError(f"unknown model {model!r}: not an open_clip architecture (see open_clip.list_models())")
    with torch.device("meta"), quiet_open_clip():
        clip = open_clip.create_model(model, pretrained=None, device="meta")
    return {k: v.shape for k, v in clip.state_dict().items()}


def check_clip_architecture(clip: dict[str, torch.Tensor], model: str, path: Path) -> tuple[int, int]:
    """The CLIP keys must be exactly ``model``'s state dict; returns the text (width, number of blocks)."""
    expected = architecture_shapes(model)
    if not clip:
        raise ArtifactError("missing keys: the checkpoint holds no CLIP weights, only acquirers and embeddings", path)
    wrong = [
        f"{k} {tuple(clip[k].shape)} (expected {tuple(s)})"
        for k, s in expected.items()
        if k in clip and clip[k].shape != s
    ]
    missing = [k for k in expected if k not in clip]
    unexpected = [k for k in clip if k not in expected]
    if wrong or (missing and unexpected):
        detail = (
            "; ".join(wrong[:2])
            if wrong
            else f"missing {', '.join(missing[:2])}, unexpected {', '.join(unexpected[:2])}"
        )
        raise ConfigError(
            f"wrong architecture: the CLIP weights do not fit --model {model} ({detail}); pass the "
            f"open_clip architecture the authors used",
            path,
        )
    if missing:
        raise ArtifactError(f"missing keys: {len(missing)} CLIP tensor(s) of {model} ({', '.join(missing[:3])})", path)
    if unexpected:
        raise ArtifactError(f"unknown layout: {len(unexpected)} unexpected key(s) ({', '.join(unexpected[:3])})", path)
    width = expected["positional_embedding"][1]
    num_blocks = len({k.split(".")[2] for k in expected if k.startswith("transformer.resblocks.")})
    return int(width), num_blocks


def convert_acquirers(
    acquirers: dict[str | None, dict[int, dict[str, torch.Tensor]]],
    width: int,
    num_blocks: int,
    languages: list[str] | None,
    path: Path,
) -> tuple[dict[str, torch.Tensor], int, list[str]]:
    """Authors' acquirers -> ``acquirers.{lang}.{i}.{c_fc,c_proj}.{weight,bias}``; returns (tensors, hidden, langs)."""
    shared = None in acquirers
    if shared and len(acquirers) > 1:
        raise ArtifactError("unknown layout: both per-language and shared acquirer keys", path)
    if shared and not languages:
        raise ConfigError(
            "the checkpoint has one acquirer stack shared by all languages (trained without "
            "--m_acquirer): name the languages it serves with --lang",
            path,
        )
    available = list(acquirers) if not shared else list(languages)
    chosen = list(languages) if languages else available
    absent = [lang for lang in chosen if lang not in available]
    if absent:
        raise ConfigError(f"no acquirers for {', '.join(absent)} in the checkpoint (has {', '.join(available)})", path)
    if schema.NATIVE_LANG in chosen:
        raise ConfigError(
            f"acquirers for the native language {schema.NATIVE_LANG!r}: mltk's English path bypasses "
            f"acquirers (leave it out with --lang)",
            path,
        )
    hidden = None
    tensors = {}
    for lang in chosen:
        blocks = acquirers[None if shared else lang]
        extra = sorted(b for b in blocks if b >= num_blocks)
        if extra:
            raise ConfigError(
                f"wrong architecture: acquirer for block {extra[0]} of {lang!r}, the text tower has "
                f"{num_blocks} blocks",
                path,
            )
        for block in range(num_blocks):
            parts = blocks.get(block, {})
            absent = [name for name in ACQUIRER_TENSORS if name not in parts]
            if absent:
                label = lang if not shared else "shared"
                raise ArtifactError(
                    f"missing keys: transformer.resblocks.{block}.acquirer."
                    f"{'' if shared else label + '.'}mlp.{absent[0]} (and {len(absent) - 1} more "
                    f"in that block)",
                    path,
                )
            hidden = hidden or int(parts["c_fc.weight"].shape[0])
            _check_acquirer_shapes(parts, width, hidden, f"block {block} of {lang!r}", path)
            tensors.update({f"acquirers.{lang}.{block}.{name}": parts[name] for name in ACQUIRER_TENSORS})
    return tensors, hidden, chosen


def _check_acquirer_shapes(parts: dict[str, torch.Tensor], width: int, hidden: int, where: str, path: Path) -> None:
    expected = {
        "c_fc.weight": (hidden, width),
        "c_fc.bias": (hidden,),  # W_down, as nn.Linear stores it
        "c_proj.weight": (width, hidden),
        "c_proj.bias": (width,),
    }  # W_up
    for name, shape in expected.items():
        if tuple(parts[name].shape) != shape:
            raise ConfigError(
                f"wrong architecture: acquirer {name} of {where} has shape {tuple(parts[name].shape)}, "
                f"expected {shape} for text width {width}, hidden {hidden}",
                path,
            )


def convert_embedding(
    authors: dict[str, torch.Tensor], width: int, path: Path
) -> tuple[dict[str, torch.Tensor], int, int]:
    """The non-native table [V, E] and its projection [W, E] + [W] -> mltk keys; returns (tensors, V, E)."""
    table = authors["multilingual_embedding.weight"]
    if table.dim() != 2:
        raise ArtifactError(
            f"multilingual_embedding.weight has shape {tuple(table.shape)}, expected [vocab, dim]", path
        )
    vocab_size, embed_dim = (int(n) for n in table.shape)
    expected = {
        "multilingual_embedding_linear.weight": (width, embed_dim),
        "multilingual_embedding_linear.bias": (width,),
    }
    for key, shape in expected.items():
        if tuple(authors[key].shape) != shape:
            raise ConfigError(
                f"wrong architecture: {key} has shape {tuple(authors[key].shape)}, expected {shape} "
                f"(text width {width}, embedding dim {embed_dim})",
                path,
            )
    return {EMBEDDING_KEYS[k]: v for k, v in authors.items()}, vocab_size, embed_dim


def check_tokenizer(source: str, vocab_size: int, path: Path) -> tuple[str, str, bool]:
    """Load the non-native tokenizer and insist that it has one id per embedding row.

    A local folder (or mltk vocabulary artifact) must load, and is recorded by absolute path. A hub name that
    cannot be loaded (no network) is recorded as given and the check is skipped with a warning: loading the
    imported model fails later with the tokenizer's own message. Returns (kind, source to record, checked).
    """
    from mltk.models.nonnative import load_non_native_tokenizer

    local = Path(source).expanduser()
    if local.exists():
        tokenizer = load_non_native_tokenizer(str(local.resolve()))
    elif source.startswith(("/", "./", "../", "~")) or "\\" in source:
        raise ConfigError("tokenizer folder not found", source)
    else:
        log(
            f"import-mla: loading tokenizer {source!r} to check its vocabulary (offline? HF_HUB_OFFLINE=1 skips "
            f"the hub's retries)"
        )
        try:
            tokenizer = load_non_native_tokenizer(source)
        except ConfigError as exc:
            log(
                f"warning: could not load tokenizer {source!r} to check its vocabulary against the "
                f"{vocab_size} embedding rows ({exc}); recorded the name, check skipped"
            )
            return "hf", source, False
    if tokenizer.vocab_size != vocab_size:
        raise ConfigError(
            f"multilingual_embedding.weight has {vocab_size} rows but tokenizer {tokenizer.source} has "
            f"{tokenizer.vocab_size} tokens: wrong --tokenizer?",
            path,
        )
    return tokenizer.kind, tokenizer.source, True
