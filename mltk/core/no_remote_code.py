"""Loading transformers models and tokenizers without ever running code that comes with them.

A transformers folder or hub repository can ship its own Python (``auto_map`` in ``config.json`` or
``tokenizer_config.json``, with ``modeling_*.py`` beside it). Left to itself transformers asks on stdin whether to
run it (printing the question on stdout, where mltk's pipes carry artifact paths). mltk reads model folders as
data: every load passes ``trust_remote_code=False``, the interactive question is switched off, and a local folder
that needs its own code is refused before transformers looks at it (``ConfigError``, exit 2, one line).
"""

from __future__ import annotations

import json
from pathlib import Path

from mltk.core.errors import ConfigError

CODE_CONFIGS = ("config.json", "tokenizer_config.json", "processor_config.json", "preprocessor_config.json")
REFUSAL = "needs its own Python code ({where}); mltk never runs code that comes with a model"


def forbid_prompt() -> None:
    """transformers' "Do you wish to run the custom code? [y/N]" reads stdin; with its timeout at 0 it raises
    instead (this also covers loads mltk does not make itself, such as open_clip's Hugging Face towers)."""
    from transformers import dynamic_module_utils

    dynamic_module_utils.TIME_OUT_REMOTE_CODE = 0


def refuse_custom_code(source: str | Path) -> None:
    """Refuse a local folder whose configuration maps a class to code shipped in the folder (``auto_map``)."""
    folder = Path(str(source)).expanduser()
    if not folder.is_dir():
        return
    for name in CODE_CONFIGS:
        path = folder / name
        if not path.is_file():
            continue
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise ConfigError(f"cannot read {name} ({type(exc).__name__})", path) from None
        if isinstance(config, dict) and "auto_map" in config:
            raise ConfigError(REFUSAL.format(where=f"auto_map in {name}"), path)


def refusal_of(exc: BaseException, source: str | Path) -> ConfigError | None:
    """transformers' refusal to load a repository's own code (a ``ValueError`` naming ``trust_remote_code``) as
    one line naming ``source``; None for any other exception."""
    if isinstance(exc, ValueError) and ("trust_remote_code" in str(exc) or "contains custom code" in str(exc)):
        return ConfigError(REFUSAL.format(where="custom code in the repository"), str(source))
    return None
