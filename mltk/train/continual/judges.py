"""How train-continual scores its tasks: the validation score that picks each task's best step, and the test
metrics after each task that fill the continual matrix a_{j,i}.

- With image embeddings (CLL-CLIP as published): image-text retrieval of each language (``ImageRetrieval``).
- Text-only (a Hugging Face text tower, no image tower): caption-to-caption retrieval of each language against
  English (``CaptionRetrieval``). English is the teacher: its captions are encoded once by the frozen tower, the
  language's captions by the continual encoder; a hit is any English caption of the query's image (AME's
  definition, as ``mltk evaluate --metric c2c``; on Multi30K, the query's translation). ``per_language[lang]``
  holds ``x2en`` (the language's captions retrieving English), ``en2x`` and their ``AR``; a_{j,i} is
  ``x2en.R@1`` by default.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
import torch.nn.functional as F

from mltk.artifacts.schema import NATIVE_LANG
from mltk.core.errors import ConfigError
from mltk.core.runtime import Runtime
from mltk.encode.texts import encode_captions
from mltk.metrics.retrieval import evaluate_retrieval
from mltk.train.stage import RetrievalSplit, retrieval_split, retrieval_validator


def evaluate_languages(encoder, test: RetrievalSplit, languages: list[str], runtime: Runtime) -> dict:
    """Image-text retrieval metrics of ``languages`` on the test split (``mltk.evaluate.evaluate_retrieval``)."""
    was_training = encoder.training
    encoder.eval()
    table, vectors = encode_captions(encoder, test.captions, runtime, languages=languages)
    encoder.train(was_training)
    return evaluate_retrieval(test.image_table, test.image_vectors, table, vectors)


class ImageRetrieval:
    """Image-text retrieval on the validation split (at most ``val_images`` images) and the test split."""

    def __init__(
        self,
        captions: pa.Table,
        image_table: pa.Table,
        image_vectors: np.ndarray,
        languages: list[str],
        val_split: str,
        test_split: str,
        runtime: Runtime,
        val_images: int | None,
        source,
    ):
        self.val, self.test = (
            split_data(captions, image_table, image_vectors, split, languages, source)
            for split in (val_split, test_split)
        )
        self.runtime, self.val_images = runtime, val_images

    def validator(self, encoder, languages: list[str]):
        from mltk.train.continual.task import RecallSumValidator

        return RecallSumValidator(
            retrieval_validator(encoder, self.val, languages, self.runtime, self.val_images), languages
        )

    def evaluate(self, encoder, languages: list[str]) -> dict:
        return evaluate_languages(encoder, self.test, languages, self.runtime)


def split_data(
    captions: pa.Table, image_table: pa.Table, image_vectors: np.ndarray, split: str, languages: list[str], source
) -> RetrievalSplit:
    data = retrieval_split(captions, image_table, image_vectors, split, languages)
    if data is None:
        raise ConfigError(f"no image of the {split!r} captions is in the image embeddings", source)
    return data


class CaptionRetrieval:
    """Caption-to-caption retrieval of each language against the frozen tower's English, on the validation split
    (at most ``val_images`` images) and the test split (see the module docstring)."""

    def __init__(
        self,
        captions: pa.Table,
        languages: list[str],
        teacher_of,
        val_split: str,
        test_split: str,
        runtime: Runtime,
        val_images: int | None,
        source,
    ):
        self.runtime = runtime
        self.val = _TextSplit(captions, val_split, languages, teacher_of, val_images, source)
        self.test = _TextSplit(captions, test_split, languages, teacher_of, None, source)

    def validator(self, encoder, languages: list[str]):
        def validate() -> dict[str, float]:
            metrics = self.val.evaluate(encoder, languages, self.runtime)["per_language"]
            averages = {f"AR_{lang}": metrics[lang]["AR"] for lang in languages}
            # the recall sum (R@1 + R@5 + R@10 of both directions, = 6 x AR), as with images
            return {"score": 6 * float(np.mean(list(averages.values()))), **averages}

        return validate

    def evaluate(self, encoder, languages: list[str]) -> dict:
        return self.test.evaluate(encoder, languages, self.runtime)


class _TextSplit:
    """One split's captions of the task languages, and its English captions encoded once by the teacher
    (``teacher_of(caption_ids, texts) -> [N, D]`` unnormalised, the run's cached teacher embeddings)."""

    def __init__(
        self, captions: pa.Table, split: str, languages: list[str], teacher_of, max_images: int | None, source
    ):
        rows = captions.filter(pc.equal(captions.column("split"), split))
        if max_images is not None:
            images = list(
                dict.fromkeys(
                    rows.filter(pc.is_in(rows.column("lang"), pa.array(languages, pa.string())))
                    .column("image_id")
                    .to_pylist()
                )
            )[:max_images]
            rows = rows.filter(pc.is_in(rows.column("image_id"), pa.array(images, pa.string())))
        english = rows.filter(pc.equal(rows.column("lang"), NATIVE_LANG))
        english_images = set(english.column("image_id").to_pylist())
        for lang in languages:
            part = rows.filter(pc.equal(rows.column("lang"), lang))
            if not english_images & set(part.column("image_id").to_pylist()):
                raise ConfigError(
                    f"no {split!r} captions in {lang} share an image with English ones: a text-only run "
                    f"scores each language by retrieving English captions",
                    source,
                )
        self.captions = rows.filter(pc.is_in(rows.column("lang"), pa.array(languages, pa.string())))
        caption_ids = english.column("caption_id").to_pylist()
        self.english_table = pa.table(
            {
                "id": [f"{NATIVE_LANG}:{cid}" for cid in caption_ids],
                **{name: english.column(name) for name in ("image_id", "lang", "caption_id", "split")},
            }
        )
        vectors = np.array(teacher_of(caption_ids, english.column("caption").to_pylist()), dtype=np.float32)
        self.english_vectors = F.normalize(torch.from_numpy(vectors), dim=-1).numpy()  # as encode_texts does

    def evaluate(self, encoder, languages: list[str], runtime: Runtime) -> dict:
        was_training = encoder.training
        encoder.eval()
        table, vectors = encode_captions(encoder, self.captions, runtime, languages=languages)
        encoder.train(was_training)
        result = evaluate_retrieval(
            None,
            None,
            pa.concat_tables([self.english_table, table]),
            np.concatenate([self.english_vectors, vectors]),
            metrics=("c2c",),
            languages=[NATIVE_LANG, *languages],
            c2c_pairs=[(lang, NATIVE_LANG) for lang in languages],
        )
        per_language = {}
        for lang in languages:
            pair = result["c2c"][f"{lang}-{NATIVE_LANG}"]
            per_language[lang] = {
                "x2en": pair[f"{lang}->{NATIVE_LANG}"],
                "en2x": pair[f"{NATIVE_LANG}->{lang}"],
                "AR": pair["AR"],
                "queries": pair["queries"],
            }
        settings = {
            **result["settings"],
            "english": "the frozen tower (the teacher), encoded once",
            "x2en": "the language's captions (continual encoder) retrieve English captions",
            "en2x": "English captions retrieve the language's captions",
        }
        return {"per_language": per_language, "settings": settings}
