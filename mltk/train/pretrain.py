"""Native (English) pretraining of a CLIP from scratch, for the embedded default.

No pretrained weights can be downloaded on a laptop without network, so ``mltk pretrain`` trains a tiny open_clip
CLIP (``mltk-tiny``) on the English half of the synthetic world with the standard CLIP loss (symmetric InfoNCE with
open_clip's learnable logit scale, Radford et al. 2021). The result is a checkpoint artifact holding the whole
model under open_clip key names, which every other stage loads exactly like OpenAI's weights
(``--model runs/native``).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
import torch.nn.functional as F
from PIL import Image, UnidentifiedImageError

from mltk import artifacts
from mltk.errors import ArtifactError, ConfigError
from mltk.losses import info_nce
from mltk.models.clip import clip_checkpoint_config, load_clip
from mltk.models.text import OpenClipTextTower
from mltk.runtime import Runtime, log, resolve_runtime, seed_everything, track
from mltk.train.batches import LanguageBatches
from mltk.train.distributed import gather_with_grad, init_from_env, shard
from mltk.train.loop import LoopConfig
from mltk.train.stage import train_to_checkpoint

NATIVE_LANG = "en"


@dataclass(frozen=True)
class PretrainConfig:
    images: Path  # images artifact (the synthetic world's images)
    captions: Path  # captions artifact; only ``lang == "en"`` rows are used
    out: Path
    model: str = "mltk-tiny"
    steps: int = 1500
    batch_size: int = 128
    lr: float = 1e-3
    warmup_fraction: float = 0.1
    weight_decay: float = 0.1
    eval_every: int = 0
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"


def decode_images(table: pa.Table, preprocess, origin="<images>") -> torch.Tensor:
    """Decode and preprocess every image once: [N, 3, H, W] float32 (the world is small). An image that cannot
    be decoded is bad input naming ``origin`` and the image, found before the output directory exists."""
    column = "image" if "image" in table.column_names else "path"
    out = []
    ids = table.column("image_id").to_pylist()
    for image_id, value in zip(ids, track(table.column(column).to_pylist(), "decoding images",
                                          total=table.num_rows)):
        source = io.BytesIO(value) if column == "image" else value
        try:
            with Image.open(source) as image:
                out.append(preprocess(image.convert("RGB")))
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            reason = "not a recognised image format" if isinstance(exc, UnidentifiedImageError) else exc
            raise ArtifactError(f"image {image_id} cannot be decoded ({reason})", origin) from None
    return torch.stack(out)


class ClipPretrainTask:
    """Standard CLIP loss on (image, English caption) batches of distinct images."""

    def __init__(self, clip, pixels: torch.Tensor, tokens: torch.Tensor, offsets: np.ndarray, counts: np.ndarray,
                 batch_size: int, steps: int, seed: int, runtime: Runtime, validate_fn, end_token_id: int):
        self.clip, self.pixels, self.tokens = clip, pixels, tokens  # [N, 3, H, W], [M, 77] captions grouped by image
        self.offsets, self.counts, self.seed, self.runtime = offsets, counts, seed, runtime
        self.batches = LanguageBatches({NATIVE_LANG: len(pixels)}, batch_size, steps, seed)
        self.tower = OpenClipTextTower(clip, end_token_id)
        self.validate_fn = validate_fn

    def parameters_to_train(self) -> dict[str, torch.nn.Parameter]:
        return dict(self.clip.named_parameters())

    def loss(self, step: int) -> torch.Tensor:
        _, images = self.batches.batch(step)
        draw = np.random.default_rng([self.seed, step, 0xC11]).random(len(images))
        captions = self.offsets[images] + (draw * self.counts[images]).astype(np.int64)
        images, captions = shard(images), shard(captions)
        device = self.runtime.device
        image = F.normalize(self.clip.encode_image(self.pixels[images].to(device)).float(), dim=-1)
        text = F.normalize(self.tower.encode(self.tokens[captions].to(device)).float(), dim=-1)
        logit_scale = self.clip.logit_scale.exp().clamp(max=100)
        return info_nce(gather_with_grad(image), gather_with_grad(text), logit_scale=logit_scale)

    def validate(self) -> dict[str, float]:
        return self.validate_fn()


def _english(captions: pa.Table, split: str, image_ids: list[str]):
    rows = captions.filter(pc.and_(pc.equal(captions.column("lang"), NATIVE_LANG),
                                   pc.equal(captions.column("split"), split)))
    row_of = {image_id: i for i, image_id in enumerate(image_ids)}
    pairs = sorted((row_of[i], t) for i, t in zip(rows.column("image_id").to_pylist(),
                                                  rows.column("caption").to_pylist()) if i in row_of)
    return pairs


def pretrain(config: PretrainConfig) -> Path:
    """``mltk pretrain``: train a CLIP from scratch on English captions; returns the checkpoint artifact path."""
    runtime = resolve_runtime(config.device, config.precision)
    init_from_env(runtime)
    seed_everything(config.seed)
    image_table = artifacts.load_images(config.images)
    captions = artifacts.load_captions(config.captions)
    bundle = load_clip(config.model, None, device=runtime.device, freeze=False)
    clip = bundle.model
    splits = np.array(image_table.column("split").to_pylist())

    def split_data(split: str):
        keep = np.flatnonzero(splits == split)
        table = image_table.take(pa.array(keep))
        pairs = _english(captions, split, table.column("image_id").to_pylist())
        return table, pairs

    train_table, train_pairs = split_data("train")
    if not train_pairs:
        raise ConfigError("no English train captions describe the images", config.captions)
    image_rows, counts = np.unique([r for r, _ in train_pairs], return_counts=True)  # images with captions
    pixels = decode_images(train_table.take(pa.array(image_rows)), bundle.preprocess, config.images)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    tokens = bundle.tokenizer([t for _, t in train_pairs])
    log(f"pretrain: {len(pixels)} train images, {len(tokens)} English captions")

    val_table, val_pairs = split_data("val")
    val_pixels = decode_images(val_table, bundle.preprocess, config.images) if val_pairs else None
    validate_fn = _make_validator(clip, bundle, val_table, val_pixels, val_pairs, runtime)

    task = ClipPretrainTask(clip, pixels, tokens, offsets, counts, config.batch_size, config.steps, config.seed,
                            runtime, validate_fn, bundle.end_token_id)
    loop = LoopConfig(steps=config.steps, lr=config.lr, warmup_fraction=config.warmup_fraction,
                      schedule="cosine", weight_decay=config.weight_decay, eval_every=config.eval_every,
                      clip_mode="global", seed=config.seed)
    clip.train()
    return train_to_checkpoint(
        task, loop, runtime, config.out, stage="pretrain",
        checkpoint_config=lambda: clip_checkpoint_config(config.model),
        checkpoint_tensors=lambda best: {**{k: v.detach().cpu() for k, v in clip.state_dict().items()}, **best},
        run_config=config, inputs=[config.images, config.captions])


def _make_validator(clip, bundle, val_table, val_pixels, val_pairs, runtime: Runtime):
    """English retrieval on the validation split: the score is the mean AR of both directions."""
    from mltk.evaluate import evaluate_retrieval

    tower = OpenClipTextTower(clip, bundle.end_token_id)

    @torch.no_grad()
    def validate() -> dict[str, float]:
        if val_pixels is None:
            return {"score": 0.0}
        was_training = clip.training
        clip.eval()
        image = torch.cat([F.normalize(clip.encode_image(val_pixels[i:i + 256].to(runtime.device)).float(), dim=-1)
                           for i in range(0, len(val_pixels), 256)]).cpu().numpy()
        tokens = bundle.tokenizer([t for _, t in val_pairs])
        text = torch.cat([F.normalize(tower.encode(tokens[i:i + 256].to(runtime.device)).float(), dim=-1)
                          for i in range(0, len(tokens), 256)]).cpu().numpy()
        clip.train(was_training)
        ids = val_table.column("image_id").to_pylist()
        text_table = {"id": [str(i) for i in range(len(val_pairs))], "image_id": [ids[r] for r, _ in val_pairs],
                      "lang": [NATIVE_LANG] * len(val_pairs), "caption_id": [str(i) for i in range(len(val_pairs))]}
        result = evaluate_retrieval({"id": ids}, image, text_table, text)
        english = result["per_language"][NATIVE_LANG]
        return {"score": english["AR"], "i2t_R@1": english["i2t"]["R@1"], "t2i_R@1": english["t2i"]["R@1"]}

    return validate
