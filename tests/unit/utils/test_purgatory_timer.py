"""Timer (heap SystemTimer): expiry order, cancellation, compaction, real-clock waiting."""

from __future__ import annotations

import threading
import time as _time

from pykbroker.utils import timer as timer_mod
from pykbroker.utils.time import MockTime, SystemTime
from pykbroker.utils.timer import Timer, TimerTask


def _signal_wait(timer: Timer) -> threading.Event:
    """An event set when the reaper starts waiting on the timer's condition; it is set under the lock,
    so whoever takes the lock next runs once the reaper is inside ``wait``."""
    waiting = threading.Event()
    wait = timer._cond.wait

    def signalling_wait(timeout=None):
        waiting.set()
        return wait(timeout)

    timer._cond.wait = signalling_wait
    return waiting


class Recorder(TimerTask):
    def __init__(self, delay_ms: int, out: list, tag):
        super().__init__(delay_ms)
        self.out, self.tag = out, tag

    def run(self) -> None:
        self.out.append(self.tag)


def test_tasks_expire_in_deadline_order_with_mock_time():
    time = MockTime()
    timer = Timer("t", time)
    out: list = []
    for delay in (30, 10, 20, 10):
        timer.add(Recorder(delay, out, delay))
    assert timer.size == 4
    assert timer.advance_clock(0) is False
    time.sleep(10)
    assert timer.advance_clock(0) is True
    assert out == [10, 10]
    time.sleep(25)
    timer.advance_clock(0)
    assert out == [10, 10, 20, 30]
    assert timer.size == 0


def test_zero_delay_runs_on_next_advance():
    timer = Timer("t", MockTime())
    out: list = []
    timer.add(Recorder(0, out, "now"))
    assert timer.advance_clock(0)
    assert out == ["now"]


def test_cancelled_task_never_runs_and_leaves_size():
    time = MockTime()
    timer = Timer("t", time)
    out: list = []
    tasks = [Recorder(5, out, i) for i in range(3)]
    for t in tasks:
        timer.add(t)
    tasks[1].cancel()
    tasks[1].cancel()  # idempotent
    assert tasks[1].is_cancelled
    assert timer.size == 2
    time.sleep(5)
    timer.advance_clock(0)
    assert out == [0, 2]


def test_cancel_before_add_does_not_prevent_schedule_but_cancel_after_does():
    time = MockTime()
    timer = Timer("t", time)
    out: list = []
    task = Recorder(1, out, "x")
    task.cancel()
    timer.add(task)
    assert timer.size == 1
    task.cancel()
    assert timer.size == 0
    time.sleep(2)
    assert timer.advance_clock(0) is False
    assert out == []


def test_re_adding_a_task_replaces_previous_schedule():
    time = MockTime()
    timer = Timer("t", time)
    out: list = []
    task = Recorder(1, out, "x")
    timer.add(task)
    timer.add(task)
    assert timer.size == 1
    time.sleep(1)
    timer.advance_clock(0)
    assert out == ["x"]


def test_dead_entries_are_compacted(monkeypatch):
    monkeypatch.setattr(timer_mod, "COMPACT_MIN_DEAD", 10)
    timer = Timer("t", MockTime())
    tasks = [Recorder(1000, [], i) for i in range(100)]
    for t in tasks:
        timer.add(t)
    for t in tasks[:90]:
        t.cancel()
    assert timer.size == 10
    assert len(timer._heap) < 100  # compaction ran once dead > live


def test_failing_task_does_not_stop_the_others():
    time = MockTime()
    timer = Timer("t", time)
    out: list = []

    class Boom(TimerTask):
        def run(self):
            raise RuntimeError("boom")

    timer.add(Boom(1))
    timer.add(Recorder(1, out, "ok"))
    time.sleep(1)
    assert timer.advance_clock(0)
    assert out == ["ok"]


def test_real_clock_wait_returns_at_deadline_not_timeout():
    timer = Timer("t", SystemTime())
    out: list = []
    timer.add(Recorder(50, out, "x"))
    start = _time.monotonic()
    while not out and _time.monotonic() - start < 2:
        timer.advance_clock(1000)
    elapsed = _time.monotonic() - start
    assert out == ["x"]
    assert 0.04 <= elapsed < 0.5


def test_add_of_earlier_deadline_wakes_waiter():
    timer = Timer("t", SystemTime())
    out: list = []
    timer.add(Recorder(5000, out, "late"))
    result = {}

    def reaper():
        start = _time.monotonic()
        result["expired"] = timer.advance_clock(3000)
        result["elapsed"] = _time.monotonic() - start

    waiting = _signal_wait(timer)
    th = threading.Thread(target=reaper)
    th.start()
    assert waiting.wait(5)  # the reaper waits (lock released) for the 5 s deadline
    timer.add(Recorder(10, out, "early"))
    th.join(5)
    assert result["expired"] is True
    assert result["elapsed"] < 1.0
    assert out == ["early"]


def test_shutdown_drops_tasks_and_wakes():
    timer = Timer("t", SystemTime())
    timer.add(Recorder(10_000, [], "x"))
    waiting = _signal_wait(timer)
    th = threading.Thread(target=timer.advance_clock, args=(5000,))
    th.start()
    assert waiting.wait(5)
    start = _time.monotonic()
    timer.shutdown()
    th.join(5)
    assert _time.monotonic() - start < 1.0
    assert timer.size == 0
    timer.add(Recorder(0, [], "ignored"))
    assert timer.size == 0
