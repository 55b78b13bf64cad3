"""One logging style: every logger comes from ``pykbroker.utils.logging.get_logger`` and its lines carry
Kafka's ``[Component k=v, ...]`` prefix, even when the logger was created at import time."""
from __future__ import annotations

import io
import pathlib
import re

import structlog

from pykbroker.log.unified_log import UnifiedLog
from pykbroker.utils import logging as plog
from pykbroker.utils.time import MockTime

PACKAGE = pathlib.Path(plog.__file__).resolve().parents[1]


def test_only_the_logging_helper_imports_structlog():
    importers = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                       if re.search(r"^\s*(import structlog|from structlog)", p.read_text(), re.M))
    assert importers == ["utils/logging.py"]


def test_logger_created_before_configure_renders_with_the_component_prefix():
    log = plog.get_logger("LogManager")  # as a module-level ``_log`` is, at import
    saved = structlog.get_config()
    stream = io.StringIO()
    try:
        plog.configure("info", stream=stream)
        log.info("Loaded logs", partitions=3)
        log.debug("filtered out at info level")
    finally:
        structlog.configure(**saved)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] INFO \[LogManager\] Loaded logs \(partitions=3\)",
                        lines[0])


def test_unified_log_lines_carry_partition_and_dir(tmp_path):
    from pykbroker.log.log_config import LogConfig

    saved = structlog.get_config()
    stream = io.StringIO()
    try:
        plog.configure("info", stream=stream)
        log = UnifiedLog.create(str(tmp_path / "t-0"), LogConfig(), None, MockTime())
        log.roll()
        log.close()
    finally:
        structlog.configure(**saved)
    assert f"INFO [UnifiedLog partition=t-0, dir={tmp_path}] Rolled new log segment" in stream.getvalue()
