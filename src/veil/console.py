"""What reaches the console: Veil's own lines, plus Ray's and MLflow's warnings and errors. Their chatter
(MLflow's database-migration INFO lines and artifact download bars, Ray workers' log lines forwarded to the
driver, the messages in `DROPPED`) shows only with `--verbose`. Standard library only: every layer may ask
`verbose()`.

The setting travels as the environment variable VEIL_VERBOSE, so Ray workers and subprocesses see it too."""

from __future__ import annotations

import logging
import os
import sys

VERBOSE_ENV = "VEIL_VERBOSE"

QUIET_ENV = {
    "MLFLOW_LOGGING_LEVEL": "WARNING",  # read when mlflow is imported (here, in Ray workers, in subprocesses)
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",  # read at each artifact download (`veil report`)
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",  # its "View run ... at" lines on a tracking server
}
"""Environment defaults of quiet mode; a value the user set wins."""

DROPPED = {
    "ray.tune.tune": ("Tuner.restore(", "Trials did not complete"),
    "ray._private.authentication.authentication_token_setup": ("Token authentication is enabled for this Ray",),
}
"""Messages dropped in quiet mode, by logger: Tune's advice on an interrupted sweep (Veil prints its own
`veil resume NAME` hint instead) and Ray's notice, on every local start, that its default is in force."""


def verbose() -> bool:
    """Whether third-party chatter below warnings should reach the console (`--verbose`)."""
    return os.environ.get(VERBOSE_ENV) == "1"


def set_verbose(on: bool) -> None:
    """Quiet (the default) or verbose console for this process and every process it starts."""
    os.environ[VERBOSE_ENV] = "1" if on else "0"
    for name, texts in DROPPED.items():
        log = logging.getLogger(name)
        for f in [f for f in log.filters if isinstance(f, _Drop)]:
            log.removeFilter(f)
        if not on:
            log.addFilter(_Drop(texts))
    if on:
        return
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    if "mlflow" in sys.modules:  # imported already: its loggers were configured from the environment then
        logging.getLogger("mlflow").setLevel(os.environ["MLFLOW_LOGGING_LEVEL"])


class _Drop(logging.Filter):
    def __init__(self, texts: tuple[str, ...]) -> None:
        super().__init__()
        self.texts = texts

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not any(t in text for t in self.texts)


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (a test's capture, a redirected console)."""

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


def logger() -> logging.Logger:
    """Veil's logger: its warnings reach stderr as '[veil] warning: ...' (one handler, set up once), and a user's
    own logging configuration can capture or silence them through the 'veil' logger."""
    log = logging.getLogger("veil")
    if not any(isinstance(h, _Stderr) for h in log.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("[veil] %(levelname_lower)s: %(message)s"))
        handler.addFilter(_lower_level)
        log.addHandler(handler)
        log.propagate = False
        log.setLevel(logging.INFO)
    return log


def _lower_level(record: logging.LogRecord) -> bool:
    record.levelname_lower = record.levelname.lower()
    return True


def warn(text: str) -> None:
    """A warning on the console, in Veil's style: '[veil] warning: TEXT' on stderr."""
    logger().warning(text)
