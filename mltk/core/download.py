"""One place that turns a failed model download into a one-line, exit-2 error.

open_clip, transformers and huggingface_hub each report a missing or unreachable model differently (a
``RuntimeError`` wrapping the hub's ``LocalEntryNotFoundError``, an ``OSError`` naming the repository, an
``OfflineModeIsEnabled`` connection error...). A user who typed a model name should read which model could not be
fetched and whether the machine is offline, not a traceback reported as an internal error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from typing import Iterator

from mltk.core.errors import ModelDownloadError

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")

# exception classes (by module prefix) that only ever mean "could not reach or find the remote files"
_NETWORK_MODULES = ("huggingface_hub", "requests", "urllib3", "httpx", "httpcore", "urllib")


def offline_by_setting() -> bool:
    """Whether the user switched the Hugging Face libraries to offline mode."""
    return any(os.environ.get(name, "").strip().lower() in {"1", "on", "yes", "true"} for name in OFFLINE_VARIABLES)


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and everything it was raised from or during (``__cause__`` / ``__context__``)."""
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _is_download_failure(exc: BaseException) -> bool:
    return (
        isinstance(exc, (OSError, ConnectionError, TimeoutError))
        or type(exc).__module__.split(".")[0] in _NETWORK_MODULES
    )


def _is_connection_failure(exc: BaseException) -> bool:
    name = type(exc).__name__
    return isinstance(exc, (ConnectionError, TimeoutError)) or name in {
        "OfflineModeIsEnabled",
        "ConnectError",
        "ConnectTimeout",
        "NameResolutionError",
    }


@contextlib.contextmanager
def model_download(model: str) -> Iterator[None]:
    """Run a model (or tokenizer) load; a download failure inside becomes ``ModelDownloadError`` naming ``model``.

    Anything that is not a download failure (a bug, a wrong config) propagates unchanged.
    """
    from mltk.core.no_remote_code import forbid_prompt, refusal_of

    forbid_prompt()  # open_clip's Hugging Face towers load without trust_remote_code: never ask on stdin
    try:
        with quiet_hub():
            yield
    except ModelDownloadError:
        raise
    except Exception as exc:  # filtered below, re-raised when not a download failure
        refused = refusal_of(exc, model)
        if refused is not None:
            raise refused from None
        chain = _chain(exc)
        if not any(_is_download_failure(e) for e in chain):
            raise
        raise ModelDownloadError(download_message(model, chain)) from exc


class NoHubConnection(ConnectionError):
    """The hub could not be reached at all (refused, no name resolution): raised at the first try instead of the
    hub client's five retries with back-off (about 25 s a file, with two warnings a try)."""


_CONNECTION_WORDS = (
    "connection refused",
    "name or service not known",
    "name resolution",
    "nodename nor servname",
    "network is unreachable",
    "no route to host",
    "connecterror",
    "[errno 111]",
    "[errno -2]",
    "[errno -3]",
    "[errno 101]",
)


HUB_HTTP_LOGGERS = ("huggingface_hub.utils._http", "huggingface_hub.file_download")  # the retries' warnings


class _HubNoise(logging.Filter):
    """Holds the hub client's and open_clip's download log lines back while a model loads; stops the first retry
    of a request that could not connect at all."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if (
            record.name.startswith("huggingface_hub")
            and "thrown while requesting" in message
            and any(word in message.lower() for word in _CONNECTION_WORDS)
        ):
            raise NoHubConnection(message.split(" thrown while")[0].strip("'\""))
        self.held.append(record)
        return False


@contextlib.contextmanager
def quiet_hub() -> Iterator[None]:
    """While a model loads: the hub client's warnings and open_clip's "Failed to download" line are held back (a
    failed load says it all in one line, ``download_message``; a load that succeeds replays them), and a request
    that cannot connect fails at once rather than after a minute of retries."""
    noise = _HubNoise()
    # a logger's filters see only the records made on it, not its children's: every hub logger gets one
    hub = [
        logging.getLogger(name)
        for name in (
            "huggingface_hub",
            *HUB_HTTP_LOGGERS,
            *[name for name in list(logging.root.manager.loggerDict) if name.startswith("huggingface_hub.")],
        )
    ]
    root = logging.getLogger()
    open_clip_noise = _OpenClipNoise(noise)
    for logger in hub:
        logger.addFilter(noise)
    root.addFilter(open_clip_noise)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        try:
            yield
        finally:
            for logger in hub:
                logger.removeFilter(noise)
            root.removeFilter(open_clip_noise)
    for warning in caught:  # reached only on success
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    for record in noise.held:
        logging.getLogger(record.name).handle(record)


class _OpenClipNoise(logging.Filter):
    """open_clip logs a failed download on the root logger before raising it: held back with the hub's lines."""

    def __init__(self, held: _HubNoise) -> None:
        super().__init__()
        self.held = held

    def filter(self, record: logging.LogRecord) -> bool:
        if f"{os.sep}open_clip{os.sep}" in record.pathname:
            self.held.held.append(record)
            return False
        return True


def download_message(model: str, chain: list[BaseException]) -> str:
    first_line = (str(chain[-1]).strip().splitlines() or [type(chain[-1]).__name__])[0][:200]
    if offline_by_setting():
        variables = ", ".join(v for v in OFFLINE_VARIABLES if os.environ.get(v))
        return (
            f"could not load model {model!r}: this machine is offline ({variables} is set) and the model is not "
            f"in the local cache; download it once online, or pass a local folder"
        )
    if any(_is_connection_failure(e) for e in chain):
        reason = next((str(e) for e in chain if isinstance(e, NoHubConnection)), first_line)
        return (
            f"could not load model {model!r}: this machine is offline (no connection to the model hub: "
            f"{reason}); download it once online, or pass a local folder (HF_HUB_OFFLINE=1 uses only the "
            f"local Hugging Face cache, without trying the network)"
        )
    return f"could not load model {model!r}: {first_line}"


def looks_local(name: str | os.PathLike) -> bool:
    """Whether a model or tokenizer name is spelled as a local path rather than a hub id (``org/name``).

    A hub id has at most one ``/`` and no schema; a name that starts like a path (``/``, ``./``, ``../``, ``~``),
    has two or more ``/``, ends with ``/``, or whose first part is a local folder (``runs/vocab`` beside ``runs/``)
    is a path. Such a name that does not exist fails at once instead of costing a minute of hub retries.
    """
    text = os.fspath(name)
    if ":" in text.split("/")[0]:  # hf-hub:org/repo, local-dir:/folder: the schema decides
        return False
    if text.startswith(("/", "./", "../", "~")) or text.endswith("/") or text.count("/") >= 2:
        return True
    head, _, rest = text.partition("/")
    return bool(rest) and os.path.isdir(os.path.expanduser(head))


def require_existing_if_local(name: str | os.PathLike, what: str) -> None:
    """A ``ConfigError`` naming ``name`` when it is spelled as a local path that does not exist."""
    if looks_local(name) and not os.path.exists(os.path.expanduser(os.fspath(name))):
        from mltk.core.errors import ConfigError

        raise ConfigError(
            f"{what} not found: no such file or directory (a local path, so it is not looked up on the model hub)",
            os.fspath(name),
        )
