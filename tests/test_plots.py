"""Pictures: the continual heatmap on a fixed 0-100 scale, curves, per-language recall and ranks from a metrics
artifact (evaluate --plot), PNG and SVG; the contact sheet renders every script of the embedded world."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image
from typer.testing import CliRunner

from mltk import artifacts
from mltk.present import plots

runner = CliRunner()
MATRIX = [[50.0, None, None], [40.0, 60.0, None], [30.0, 55.0, 70.0]]


def _pixel(figure, png: bytes, x: float, y: float):
    """The PNG's colour at data coordinates (x, y) of the figure's first axes."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    px, py = figure.axes[0].transData.transform((x, y))
    return image.getpixel((int(px), int(image.height - py)))


def _viridis(fraction: float):
    from matplotlib import colormaps

    return tuple(round(255 * c) for c in colormaps["viridis"](fraction)[:3])


def test_heatmap_colours_follow_a_fixed_0_to_100_scale():
    figure = plots.continual_heatmap(MATRIX, ["en", "de", "ru"], "t2i.R@1", "demo", fmt=None)
    png = plots.render(figure, "png")
    for (j, i), value in {(0, 0): 50.0, (1, 0): 40.0, (2, 2): 70.0}.items():
        got = _pixel(figure, png, i - 0.4, j - 0.4)  # a corner of the cell, away from its printed value
        assert np.abs(np.subtract(got, _viridis(value / 100))).max() <= 3, (j, i, got)
    assert min(_pixel(figure, png, 1 - 0.4, 0 - 0.4)) >= 190  # not evaluated (i > j): light grey, hatched
    stretched = plots.continual_heatmap(MATRIX, ["en", "de", "ru"], "t2i.R@1", scale=None, fmt=None)
    png = plots.render(stretched, "png")
    assert np.abs(np.subtract(_pixel(stretched, png, 2 - 0.4, 2 - 0.4), _viridis(1.0))).max() <= 3


def test_pictures_are_png_and_svg_and_svg_is_reproducible():
    png = plots.continual_curves([50.0, 50.0, 51.7], [None, 10.0, 12.5], ["en", "de", "ru"], "demo", "t2i.R@1")
    assert Image.open(io.BytesIO(png)).format == "PNG"
    assert Image.open(io.BytesIO(png)).size[0] >= 700  # 150 dpi: readable, not a thumbnail
    svg = plots.continual_curves([50.0, 50.0, 51.7], [None, 10.0, 12.5], ["en", "de", "ru"], fmt="svg")
    assert svg.startswith(b"<?xml") and b"<svg" in svg
    assert svg == plots.continual_curves([50.0, 50.0, 51.7], [None, 10.0, 12.5], ["en", "de", "ru"], fmt="svg")
    assert b"after training task" in svg  # the axis label (each text is also written as a comment)


def _metrics(langs=("en", "de", "zh")):
    per_language = {
        lang: {
            "i2t": {"R@1": 40.0 + n, "R@5": 70.0, "R@10": 80.0, "median_rank": 2.0, "mean_rank": 3.5},
            "t2i": {"R@1": 30.0, "R@5": 60.0, "R@10": 75.0, "median_rank": 3.0, "mean_rank": 5.0},
            "AR": 59.0,
        }
        for n, lang in enumerate(langs)
    }
    return {
        "per_language": per_language,
        "summary": {"languages": list(langs), "mean_AR": 59.0},
        "settings": {"ks": [1, 5, 10]},
        "mrv": {"variant": "paper", "K": len(langs), "i2t": 1.5, "t2i": 4.2},
    }


def test_recall_bars_draw_one_bar_per_language_and_k_on_0_to_100():
    figure = plots.recall_bars(_metrics(), fmt=None)
    left, right = figure.axes[:2]
    heights = sorted(round(p.get_height(), 3) for p in left.patches)
    assert heights == sorted([40.0, 41.0, 42.0] + [70.0] * 3 + [80.0] * 3)
    assert left.get_ylim() == (0.0, 100.0) and left.get_ylabel() == "recall (%)"
    assert [t.get_text() for t in left.get_xticklabels()] == ["en\n59.0", "de\n59.0", "zh\n59.0"]
    ranks = plots.rank_spread(_metrics(), fmt=None)
    assert "MRV 4.20" in ranks.axes[1].get_title() and len(ranks.axes[0].patches) == 6


def test_evaluate_plot_writes_the_pictures(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.standard_normal((6, 8)).astype(np.float32)
    images /= np.linalg.norm(images, axis=1, keepdims=True)  # the manifest says normalized: evaluate checks it
    image_path = artifacts.write_embeddings(tmp_path / "img", [f"i{n}" for n in range(6)], images)
    rows = [(f"{lang}/{n}", f"i{n}", lang, f"s{n}") for lang in ("en", "de") for n in range(6)]
    texts = np.concatenate([images + 0.3 * rng.standard_normal((6, 8)) for _ in range(2)]).astype(np.float32)
    texts /= np.linalg.norm(texts, axis=1, keepdims=True)
    ids, image_of, langs, caption_ids = map(list, zip(*rows))
    text_path = artifacts.write_embeddings(
        tmp_path / "txt", ids, texts, image_id=image_of, lang=langs, caption_id=caption_ids
    )
    from mltk.cli import app

    result = runner.invoke(
        app,
        [
            "evaluate",
            "--images",
            str(image_path),
            "--texts",
            str(text_path),
            "--metric",
            "mrv",
            "--out",
            str(tmp_path / "m"),
            "--plot",
            str(tmp_path / "plots"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{(tmp_path / 'm').resolve()}\n"
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "ranks.png",
        "ranks.svg",
        "recall.png",
        "recall.svg",
    ]
    continual = {
        "continual": {
            "tasks": ["en", "de"],
            "metric": "t2i.R@1",
            "matrix": [[50.0, None], [45.0, 60.0]],
            "AR": [50.0, 52.5],
            "F": [None, 5.0],
        }
    }
    written = plots.write_evaluation_plots(continual, tmp_path / "c")
    assert sorted(p.name for p in written) == [
        "continual_curve.png",
        "continual_curve.svg",
        "continual_matrix.png",
        "continual_matrix.svg",
    ]


# ------------------------------------------------------------------------------------------------ contact sheet


def test_sheet_fonts_cover_every_character_of_every_language_of_the_embedded_world(tmp_path):
    from fontTools.ttLib import TTFont

    from mltk.data.synth import SynthConfig, synthesize
    from mltk.index.faiss_index import SheetFonts

    fonts = SheetFonts(14)
    assert set(fonts.faces) == {"sans", "sc", "jp", "arabic"}, "the font packages are dependencies"
    world = synthesize(tmp_path / "w", SynthConfig(train=4, val=2, test=2))
    captions = artifacts.read_table(next((world.captions_path).glob("*.parquet")))
    langs = sorted(set(captions.column("lang").to_pylist()))
    assert {"ar", "zh", "ja", "el", "ru"} <= set(langs)
    cmaps = {}
    for lang, text in zip(captions.column("lang").to_pylist(), captions.column("caption").to_pylist()):
        font = fonts.font(text)
        path, index = font.path, font.index if hasattr(font, "index") else 0
        key = (path, index)
        if key not in cmaps:
            cmaps[key] = set(TTFont(path, fontNumber=index).getBestCmap())
        missing = {ch for ch in text if ord(ch) not in cmaps[key] and not ch.isspace()}
        assert not missing, (lang, text, missing)


def test_contact_sheet_text_card_scaled_images_and_ids(tmp_path):
    from mltk.data.synth import SynthConfig, synthesize
    from mltk.index.faiss_index import CARD_BACKGROUND, SHEET_MARGIN, TILE_GAP, write_contact_sheet

    world = synthesize(tmp_path / "w", SynthConfig(train=2, val=1, test=1, langs=("en",)))
    table = artifacts.load_images(world.images_path)
    ids = table.column("image_id").to_pylist()
    first = Image.open(io.BytesIO(table.column("image").to_pylist()[0])).convert("RGB")
    query = "هناك دائرة صفراء صغيرة وقلب أسود كبير، وكلمات أخرى كثيرة تجعل هذا الاستعلام أطول من سطر واحد"
    sheet = write_contact_sheet(
        tmp_path / "sheet.png",
        [query, ids[1]],
        [([ids[0], "gone"], [0.9, 0.5]), ([ids[0]], [0.8])],
        world.images_path,
        thumb=128,
    )
    with Image.open(sheet) as picture:
        picture = picture.convert("RGB")
        assert picture.getpixel((SHEET_MARGIN + 2, SHEET_MARGIN + 2)) == CARD_BACKGROUND  # a text query's card
        card = np.asarray(picture.crop((SHEET_MARGIN, SHEET_MARGIN, SHEET_MARGIN + 256, SHEET_MARGIN + 128)))
        inked_rows = np.flatnonzero((card.min(axis=2) < 100).any(axis=1))
        assert len(inked_rows) and inked_rows.max() - inked_rows.min() > 30  # the query wraps onto several lines
        left = SHEET_MARGIN + 256 + TILE_GAP
        # the 64 px image fills the 128 px tile: its corners land at the tile's corners
        for x, y in ((2, 2), (125, 125), (2, 125)):
            got = picture.getpixel((left + x, SHEET_MARGIN + y))
            want = first.getpixel((x // 2, y // 2))
            assert np.abs(np.subtract(got, want)).max() <= 40, (x, y, got, want)
