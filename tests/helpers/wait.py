"""Bounded waiting on a condition instead of sleeping (Kafka's TestUtils.waitUntilTrue)."""

from __future__ import annotations

import time


def wait_until(condition, timeout: float = 10.0, interval: float = 0.05, message: str = "condition not met"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} within {timeout}s")
        time.sleep(interval)
