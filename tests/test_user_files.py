"""The bounded, typed reader of user JSON files."""

import json

import pytest

from mltk.core.errors import ConfigError
from mltk.core.user_files import expect, json_nesting_depth, read_user_json


def test_reads_a_plain_file(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"a": [1, {"b": "]"}]}), encoding="utf-8")
    assert read_user_json(path) == {"a": [1, {"b": "]"}]}


def test_refuses_deep_nesting_naming_the_file(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 5000 + "]" * 5000, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"deep\.json: .*nests 5000 levels"):
        read_user_json(path)


def test_refuses_oversized_and_invalid_files(tmp_path):
    big = tmp_path / "big.json"
    big.write_text(json.dumps(["x" * 100]), encoding="utf-8")
    with pytest.raises(ConfigError, match="over the limit"):
        read_user_json(big, max_bytes=50)
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.json: .*not valid JSON"):
        read_user_json(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        read_user_json(tmp_path / "missing.json")


def test_depth_ignores_brackets_inside_strings():
    assert json_nesting_depth('{"a": "[[[[\\"[["}') == 1


def test_expect_names_key_and_type():
    assert expect(3, int, "steps", "r.json") == 3
    assert expect(3, float, "lr", "r.json") == 3
    with pytest.raises(ConfigError, match=r"r\.json: recipe key 'steps' must be an integer, not \"3\""):
        expect("3", int, "steps", "r.json", what="recipe")
    with pytest.raises(ConfigError, match="must be an integer"):
        expect(True, int, "steps", "r.json")
    with pytest.raises(ConfigError, match="must be a number"):
        expect(False, float, "lr", "r.json")
