"""Hardening of the broker process and the command-line tools: shutdown with a dead stdout,
kafka-server-stop filters, config-relative data directories, perf-test counts, tool output streams."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.integration.test_data_path import create_topic

pytestmark = pytest.mark.integration


def perf_test(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pykbroker.tools.producer_performance", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_perf_test_counts_every_record(broker):
    """flush() used to return before the last delivery callbacks ran: 917 of 1000 records reported."""
    create_topic(broker.bootstrap, "exact", 3)
    for _ in range(3):
        run = perf_test("--topic", "exact", "--num-records", "1000", "--record-size", "100", "--throughput", "-1",
                        "--producer-props", f"bootstrap.servers={broker.bootstrap}", "acks=1", "linger.ms=0")
        assert run.returncode == 0, run.stderr
        assert re.match(r"^1000 records sent, ", run.stdout.splitlines()[-1]), run.stdout
