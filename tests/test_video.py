"""Video-text retrieval: uniform frame sampling, mean pooling, the embedded clips, encode-videos end to
end, and the MSR-VTT importer on a fixture in the real layout."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from mltk import artifacts
from mltk.cli import app
from mltk.encode.videos import mean_pool, read_frames, uniform_frame_indices

pytest.importorskip("av")
runner = CliRunner()


@pytest.mark.parametrize(
    "total, count, expected",
    [(24, 12, [0, 2, 4, 6, 8, 10, 13, 15, 17, 19, 21, 23]), (5, 3, [0, 2, 4]), (3, 5, [0, 0, 1, 2, 2]), (9, 1, [4])],
)
def test_frames_are_sampled_uniformly_with_both_ends(total, count, expected):
    assert uniform_frame_indices(total, count) == expected
    by_linspace = [int(round(x)) for x in np.linspace(0, total - 1, count)] if count > 1 else [(total - 1) // 2]
    assert uniform_frame_indices(total, count) == by_linspace


def test_mean_pooling_normalises_frames_before_and_after_averaging():
    frames = torch.tensor([[[3.0, 0.0], [0.0, 0.5]], [[1.0, 1.0], [2.0, 2.0]]])  # [B=2, N=2, D=2]
    pooled = mean_pool(frames)
    assert torch.allclose(pooled[0], torch.tensor([1.0, 1.0]) / 2**0.5)  # (1,0) and (0,1) weigh the same
    assert torch.allclose(pooled[1], torch.tensor([1.0, 1.0]) / 2**0.5)
    by_hand = np.mean([f / np.linalg.norm(f) for f in frames[0].numpy()], axis=0)
    assert np.allclose(pooled[0].numpy(), by_hand / np.linalg.norm(by_hand))


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    from mltk.data.synth_video import VideoWorldConfig, synth_videos
    from mltk.models.clip import clip_checkpoint_config, load_clip

    root = tmp_path_factory.mktemp("clips")
    videos = synth_videos(VideoWorldConfig(train=2, val=2, test=6, frames=10, out=root / "clips")) / "videos"
    torch.manual_seed(0)
    native = artifacts.write_checkpoint(
        root / "native",
        load_clip("mltk-tiny").model.state_dict(),
        clip_checkpoint_config("mltk-tiny"),
        stage="pretrain",
    )
    return {"root": root, "videos": videos, "captions": root / "clips" / "captions", "native": native}


def test_the_embedded_clips_move_the_way_their_captions_say(clips):
    table = artifacts.load_images(clips["videos"])
    captions = artifacts.load_captions(clips["captions"])
    assert artifacts.read_manifest(clips["videos"])["media"] == "video"
    for row in range(table.num_rows):
        scene = json.loads(table.column("scene")[row].as_py())
        frames = [np.asarray(f, dtype=np.float32) for f in read_frames(table.column("image")[row].as_py(), 10)]
        first, last = (_object_centre(frames[0], frames), _object_centre(frames[-1], frames))
        dx, dy = last[0] - first[0], last[1] - first[1]
        moved = {"left": -dx, "right": dx, "up": -dy, "down": dy}[scene["direction"]]
        assert moved > 8 and moved > 3 * abs(dy if scene["direction"] in ("left", "right") else dx)
        english = [
            c
            for c, lang, vid in zip(
                captions.column("caption").to_pylist(),
                captions.column("lang").to_pylist(),
                captions.column("image_id").to_pylist(),
            )
            if lang == "en" and vid == table.column("image_id")[row].as_py()
        ]
        motion = {"left": "moves to the left", "right": "moves to the right", "up": "moves up", "down": "moves down"}
        assert english == [
            f"{'An' if scene['colour'][0] in 'aeiou' else 'A'} {scene['colour']} {scene['shape']} "
            f"{motion[scene['direction']]}."
        ]


def _object_centre(frame, frames):
    """Centre of the pixels that differ most from the clip's median frame (the background)."""
    background = np.median(np.stack(frames), axis=0)
    difference = np.abs(frame - background).sum(axis=2)
    ys, xs = np.nonzero(difference > 0.5 * difference.max())
    return float(xs.mean()), float(ys.mean())


def test_encode_videos_writes_one_pooled_vector_per_video_and_the_frames(clips, tmp_path):
    out = tmp_path / "emb"
    result = runner.invoke(
        app,
        [
            "encode-videos",
            str(clips["videos"]),
            "-m",
            str(clips["native"]),
            "--frames",
            "4",
            "--keep-frames",
            "--dtype",
            "float32",
            "--device",
            "cpu",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.stderr
    table, vectors = artifacts.load_embeddings(out)
    assert table.num_rows == 10 and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    frames = np.load(out / "frames.npy")
    assert frames.shape == (40, vectors.shape[1])
    expected = mean_pool(torch.from_numpy(frames.reshape(10, 4, -1))).numpy()
    assert np.allclose(vectors, expected, atol=1e-6)
    evaluated = runner.invoke(
        app,
        [
            "evaluate",
            str(out),
            "--captions",
            str(clips["captions"]),
            "--model",
            str(clips["native"]),
            "--split",
            "test",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "metrics"),
        ],
    )
    assert evaluated.exit_code == 0, evaluated.stderr


def test_a_video_that_cannot_be_decoded_is_skipped_and_listed(clips, tmp_path):
    folder = tmp_path / "videos"
    folder.mkdir()
    table = artifacts.load_images(clips["videos"])
    (folder / "good.mp4").write_bytes(table.column("image")[0].as_py())
    (folder / "broken.mp4").write_bytes(b"not a video")
    result = runner.invoke(
        app,
        [
            "encode-videos",
            str(folder),
            "-m",
            str(clips["native"]),
            "--frames",
            "3",
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "emb"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    manifest = artifacts.read_manifest(tmp_path / "emb")
    assert manifest["count"] == 1 and [s["video_id"] for s in manifest["skipped"]] == ["broken"]


def test_msrvtt_importer_reads_the_release_layout_with_translations(tmp_path):
    root = tmp_path / "MSRVTT"
    (root / "translations").mkdir(parents=True)
    data = {
        "videos": [
            {"video_id": "video0", "split": "train"},
            {"video_id": "video7010", "split": "test"},
            {"video_id": "video9", "split": "validate"},
        ],
        "sentences": [
            {"sen_id": 0, "video_id": "video0", "caption": "a man cooks"},
            {"sen_id": 1, "video_id": "video7010", "caption": "a dog runs"},
            {"sen_id": 2, "video_id": "video7010", "caption": "a dog is running"},
            {"sen_id": 3, "video_id": "video9", "caption": "  "},
        ],
    }
    (root / "MSRVTT_data.json").write_text(json.dumps(data))
    (root / "translations" / "de.json").write_text(
        json.dumps(
            {"sentences": [{"sen_id": 1, "caption": "ein Hund rennt"}, {"sen_id": 2, "caption": "ein Hund läuft"}]}
        )
    )
    result = runner.invoke(
        app,
        [
            "import-data",
            "msrvtt",
            str(root),
            "--images-root",
            str(root / "videos" / "all"),
            "-o",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    captions = artifacts.load_captions(tmp_path / "out" / "captions")
    rows = sorted(
        zip(
            captions.column("image_id").to_pylist(),
            captions.column("lang").to_pylist(),
            captions.column("caption_id").to_pylist(),
            captions.column("split").to_pylist(),
        )
    )
    assert rows == [
        ("video0", "en", "msrvtt:0", "train"),
        ("video7010", "de", "msrvtt:1", "test"),
        ("video7010", "de", "msrvtt:2", "test"),
        ("video7010", "en", "msrvtt:1", "test"),
        ("video7010", "en", "msrvtt:2", "test"),
    ]  # the blank caption of video9 is dropped
    images = artifacts.load_images(tmp_path / "out" / "images")
    paths = dict(zip(images.column("image_id").to_pylist(), images.column("path").to_pylist()))
    assert paths["video7010"].endswith("videos/all/video7010.mp4")


def test_msrvtt_translation_of_an_unknown_sentence_is_refused(tmp_path):
    root = tmp_path / "MSRVTT"
    (root / "translations").mkdir(parents=True)
    (root / "MSRVTT_data.json").write_text(
        json.dumps(
            {
                "videos": [{"video_id": "v", "split": "test"}],
                "sentences": [{"sen_id": 0, "video_id": "v", "caption": "x"}],
            }
        )
    )
    (root / "translations" / "fr.json").write_text(json.dumps({"sentences": [{"sen_id": 5, "caption": "y"}]}))
    result = runner.invoke(app, ["import-data", "msrvtt", str(root), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "translates sen_id 5" in result.stderr
