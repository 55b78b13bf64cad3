"""utils.time: the system clock as Kafka's ``Time`` (SystemTime) and the injectable MockTime."""

from __future__ import annotations

import time

from pykbroker.utils.time import SYSTEM, MockTime, SystemTime


def test_system_nanoseconds_is_the_monotonic_clock_itself():
    # read ~10 times per request by the network and request threads: no Python frame around the C clock
    assert SystemTime.nanoseconds is time.monotonic_ns
    before = time.monotonic_ns()
    now = SYSTEM.nanoseconds()
    assert before <= now <= time.monotonic_ns()
    assert SYSTEM.hi_res_milliseconds() in range(now // 1_000_000, time.monotonic_ns() // 1_000_000 + 1)


def test_mock_time_moves_only_when_told():
    t = MockTime()
    ns = t.nanoseconds()
    assert t.nanoseconds() == ns
    t.sleep(5)
    assert t.nanoseconds() == ns + 5_000_000
