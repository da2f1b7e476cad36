"""Native (English) pretraining of a CLIP from scratch, for the embedded default.

No pretrained weights can be downloaded on a laptop without network, so ``mltk pretrain`` trains a tiny open_clip
CLIP (``mltk-tiny``) on the English half of the synthetic world with the standard CLIP loss (symmetric InfoNCE with
open_clip's learnable logit scale, Radford et al. 2021). The result is a checkpoint artifact holding the whole
model under open_clip key names, which every other stage loads exactly like OpenAI's weights
(``--model runs/native``).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
import torch.nn.functional as F
from PIL import Image, UnidentifiedImageError

from mltk import artifacts
from mltk.artifacts.schema import NATIVE_LANG
from mltk.core.distributed import gather_with_grad, shard
from mltk.core.errors import ArtifactError, ConfigError
from mltk.core.runtime import Runtime, log, track
from mltk.encode.text_encoders import ClipTextEncoder
from mltk.encode.texts import encode_texts
from mltk.losses import InfoNCELoss
from mltk.models.clip import clip_checkpoint_config, load_clip
from mltk.models.towers import clip_text_tower
from mltk.settings.pretrain import PretrainConfig
from mltk.settings.resolve import resolve
from mltk.train.batches import LanguageBatches, draw_captions, group_by_image
from mltk.train.stage import load_inputs, run_stage

# CLIP's recipe (10% warm-up then cosine, global gradient clipping): mltk/recipes/clip-pretrain.json


def decode_images(table: pa.Table, preprocess, origin="<images>") -> torch.Tensor:
    """Decode and preprocess every image once: [N, 3, H, W] float32 (the world is small). An image that cannot
    be decoded is bad input naming ``origin`` and the image, found before the output directory exists."""
    column = "image" if "image" in table.column_names else "path"
    out = []
    ids = table.column("image_id").to_pylist()
    for image_id, value in zip(ids, track(table.column(column).to_pylist(), "decoding images", total=table.num_rows)):
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

    def __init__(
        self,
        clip,
        tower,
        pixels: torch.Tensor,
        tokens: tuple[torch.Tensor, torch.Tensor],
        offsets: np.ndarray,
        counts: np.ndarray,
        batch_size: int,
        steps: int,
        seed: int,
        runtime: Runtime,
        validate_fn,
    ):
        self.clip, self.pixels = clip, pixels  # [N, 3, H, W]
        self.tokens, self.lengths = tokens  # [M, L], [M]: captions grouped by image
        self.offsets, self.counts, self.seed, self.runtime = offsets, counts, seed, runtime
        self.batches = LanguageBatches({NATIVE_LANG: len(pixels)}, batch_size, steps, seed)
        self.tower = tower  # the CLIP's own text tower (TextTower), trained with it
        self.validate_fn = validate_fn

    def parameters_to_train(self) -> dict[str, torch.nn.Parameter]:
        return dict(self.clip.named_parameters())

    def buffers_to_keep(self) -> dict[str, torch.Tensor]:
        """The buffers a checkpoint holds (BatchNorm running statistics of mltk-tiny's ResNet image tower); the
        loop saves, resumes and keeps them with the best step."""
        saved = self.clip.state_dict(keep_vars=True)
        return {name: buffer for name, buffer in self.clip.named_buffers() if name in saved}

    def loss(self, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        _, images = self.batches.batch(step)
        captions = draw_captions(self.seed, step, 0xC11, images, self.offsets, self.counts)
        images, captions = shard(images), shard(captions)
        device = self.runtime.device
        image = F.normalize(self.clip.encode_image(self.pixels[images].to(device)).float(), dim=-1)
        text = self.tower.encode(self.tokens[captions].to(device), self.lengths[captions].to(device))
        text = F.normalize(text.float(), dim=-1)
        logit_scale = self.clip.logit_scale.exp().clamp(max=100)
        loss, terms = InfoNCELoss()(gather_with_grad(image), gather_with_grad(text), logit_scale).prefixed("clip_")
        return loss, {**terms, "logit_scale": logit_scale}

    def validate(self) -> dict[str, float]:
        return self.validate_fn()


def _english(captions: pa.Table, split: str, image_ids: list[str]):
    rows = captions.filter(
        pc.and_(pc.equal(captions.column("lang"), NATIVE_LANG), pc.equal(captions.column("split"), split))
    )
    row_of = {image_id: i for i, image_id in enumerate(image_ids)}
    pairs = sorted(
        (row_of[i], t)
        for i, t in zip(rows.column("image_id").to_pylist(), rows.column("caption").to_pylist())
        if i in row_of
    )
    return pairs


def paired_captions(images: Path) -> Path:
    """The captions artifact written beside an images artifact (``WORLD/images`` -> ``WORLD/captions``, as
    synth-data and import-data lay them out), so that ``mltk synth-data ... | mltk pretrain ...`` needs no
    --captions."""
    sibling = Path(images).parent / "captions"
    if artifacts.is_artifact(sibling) and artifacts.read_manifest(sibling).get("kind") == "captions":
        return sibling
    raise ConfigError("no --captions given and no captions artifact beside the images; pass --captions", images)


def pretrain(config: PretrainConfig) -> Path:
    """``mltk pretrain``: train a CLIP from scratch on English captions; returns the checkpoint artifact path."""
    config = resolve(config, "pretrain")
    inputs = load_inputs(config.device, config.precision, config.loop.seed, config.captions)
    runtime, captions = inputs.runtime, inputs.captions
    image_table = artifacts.load_images(config.images)
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
    image_rows, counts, offsets = group_by_image([r for r, _ in train_pairs])  # images with captions
    pixels = decode_images(train_table.take(pa.array(image_rows)), bundle.preprocess, config.images)
    tower = clip_text_tower(bundle)
    tokens = tower.tokenize([t for _, t in train_pairs])
    log(f"pretrain: {len(pixels)} train images, {len(train_pairs)} English captions")

    val_table, val_pairs = split_data("val")
    val_pixels = decode_images(val_table, bundle.preprocess, config.images) if val_pairs else None
    validate_fn = _make_validator(clip, bundle, val_table, val_pixels, val_pairs, runtime)

    task = ClipPretrainTask(
        clip,
        tower,
        pixels,
        tokens,
        offsets,
        counts,
        config.batch_size,
        config.loop.steps,
        config.loop.seed,
        runtime,
        validate_fn,
    )
    clip.train()
    return run_stage(
        task,
        config.loop,
        runtime,
        config.out,
        stage="pretrain",
        checkpoint_config=lambda: clip_checkpoint_config(config.model),
        checkpoint_tensors=lambda best: {**{k: v.detach().cpu() for k, v in clip.state_dict().items()}, **best},
        run_config=config,
        inputs=[config.images, config.captions],
    )


def _make_validator(clip, bundle, val_table, val_pixels, val_pairs, runtime: Runtime):
    """English retrieval on the validation split: the score is the mean AR of both directions. The text side goes
    through the shared text encoder (``mltk.encode.texts``), the image side through the CLIP being trained."""
    from mltk.metrics.retrieval import evaluate_retrieval

    text_encoder = ClipTextEncoder(bundle)

    @torch.no_grad()
    def validate() -> dict[str, float]:
        if val_pixels is None:
            return {"score": 0.0}
        was_training = clip.training
        clip.eval()
        image = (
            torch.cat(
                [
                    F.normalize(clip.encode_image(val_pixels[i : i + 256].to(runtime.device)).float(), dim=-1)
                    for i in range(0, len(val_pixels), 256)
                ]
            )
            .cpu()
            .numpy()
        )
        text = encode_texts(
            text_encoder, [t for _, t in val_pairs], NATIVE_LANG, runtime, description="validation captions"
        )
        clip.train(was_training)
        ids = val_table.column("image_id").to_pylist()
        text_table = {
            "id": [str(i) for i in range(len(val_pairs))],
            "image_id": [ids[r] for r, _ in val_pairs],
            "lang": [NATIVE_LANG] * len(val_pairs),
            "caption_id": [str(i) for i in range(len(val_pairs))],
        }
        result = evaluate_retrieval({"id": ids}, image, text_table, text)
        english = result["per_language"][NATIVE_LANG]
        return {"score": english["AR"], "i2t_R@1": english["i2t"]["R@1"], "t2i_R@1": english["t2i"]["R@1"]}

    return validate
