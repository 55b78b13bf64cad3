"""One logging style: every logger comes from ``pykbroker.utils.logging.get_logger`` and its lines carry
Kafka's ``[Component k=v, ...]`` prefix, even when the logger was created at import time."""

from __future__ import annotations

import io
import pathlib
import re

from pykbroker.log.unified_log import UnifiedLog
from pykbroker.utils import logging as plog
from pykbroker.utils.time import MockTime

ROOT = pathlib.Path(plog.__file__).resolve().parents[2]


def test_only_the_logging_helper_imports_structlog():
    files = [p for d in ("pykbroker", "tests", "bench") for p in (ROOT / d).rglob("*.py")]
    importers = sorted(
        str(p.relative_to(ROOT))
        for p in files
        if re.search(r"^\s*(import structlog|from structlog)", p.read_text(), re.M)
    )
    assert importers == ["pykbroker/utils/logging.py"]


def test_logger_created_before_configure_renders_with_the_component_prefix():
    log = plog.get_logger("LogManager")  # as a module-level ``_log`` is, at import
    saved = plog.saved_config()
    stream = io.StringIO()
    try:
        plog.configure("info", stream=stream)
        log.info("Loaded logs", partitions=3)
        log.debug("filtered out at info level")
    finally:
        plog.restore(saved)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert re.fullmatch(
        r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] INFO \[LogManager\] Loaded logs \(partitions=3\)", lines[0]
    )


def test_loggers_follow_a_reconfiguration():
    log = plog.get_logger("KafkaScheduler")
    saved = plog.saved_config()
    first, second = io.StringIO(), io.StringIO()
    try:
        plog.configure("info", stream=first)
        log.info("one")
        plog.configure("warn", stream=second)
        log.info("filtered out at warn level")
        log.warning("two")
    finally:
        plog.restore(saved)
    assert first.getvalue().count("[KafkaScheduler] one") == 1 and "two" not in first.getvalue()
    assert second.getvalue().splitlines()[-1].endswith("WARN [KafkaScheduler] two")
    assert "filtered out" not in second.getvalue()


def test_unified_log_lines_carry_partition_and_dir(tmp_path):
    from pykbroker.log.log_config import LogConfig

    saved = plog.saved_config()
    stream = io.StringIO()
    try:
        plog.configure("info", stream=stream)
        log = UnifiedLog.create(str(tmp_path / "t-0"), LogConfig(), None, MockTime())
        log.roll()
        log.close()
    finally:
        plog.restore(saved)
    assert f"INFO [UnifiedLog partition=t-0, dir={tmp_path}] Rolled new log segment" in stream.getvalue()
