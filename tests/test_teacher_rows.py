"""The English teacher's disk cache: sentences encoded when first asked for, reused by the next process, and a
long run that does not list the cache folder at every step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mltk.train.teacher as teacher
from mltk.core.runtime import resolve_runtime


@pytest.fixture
def encoded(monkeypatch) -> list[str]:
    """Every sentence the fake encoder encodes (a vector of its length and its first letter's code)."""
    seen: list[str] = []

    def fake_encode(encoder, texts, lang, runtime, batch_size, normalize, description):
        seen.extend(texts)
        return np.array([[len(t), ord(t[0])] for t in texts], dtype=np.float32)  # [n, 2]

    monkeypatch.setattr(teacher, "encode_texts", fake_encode)
    return seen


def _rows(cache: Path) -> teacher.TeacherRows:
    return teacher.TeacherRows(object(), {"model": "fake"}, resolve_runtime("cpu", "fp32"), cache)


def test_a_sentence_is_encoded_once_across_calls_and_processes(tmp_path, encoded):
    first = _rows(tmp_path)
    np.testing.assert_array_equal(first.rows(["ab", "c", "ab"]), [[2, 97], [1, 99], [2, 97]])
    first.rows(["c", "dd"])
    assert encoded == ["ab", "c", "dd"]
    again = _rows(tmp_path)  # a resumed run or a later stage
    np.testing.assert_array_equal(again.rows(["dd", "ab"]), [[2, 100], [2, 97]])
    assert encoded == ["ab", "c", "dd"] and again.encoded == 0


def test_a_long_run_lists_the_cache_folder_only_when_another_run_wrote(tmp_path, encoded, monkeypatch):
    listed = []
    glob = Path.glob
    monkeypatch.setattr(Path, "glob", lambda self, pattern: listed.append(1) or glob(self, pattern))
    run = _rows(tmp_path)
    for step in range(20):  # every step draws sentences never seen
        run.rows([f"s{step}a", f"s{step}b"])
    assert len(listed) <= 2
    other = _rows(tmp_path)
    other.rows(["from another run"])
    assert run.rows(["from another run"]).tolist() == [[16, 102]] and encoded.count("from another run") == 1
