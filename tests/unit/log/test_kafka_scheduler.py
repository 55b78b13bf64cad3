"""KafkaScheduler (utils/scheduler.py): one-shot and periodic tasks, failures, shutdown."""

import threading
import time as _time

import pytest

from pykbroker.utils.scheduler import KafkaScheduler, MockScheduler
from pykbroker.utils.time import MockTime
from tests.helpers.wait import wait_until


def test_once_and_periodic_with_failing_task():
    s = KafkaScheduler(2, "test-scheduler-")
    once = threading.Event()
    ticks = []
    failures = []

    def boom():
        failures.append(1)
        raise RuntimeError("task failure must not kill the scheduler")

    try:
        s.schedule_once("once", once.set, 10)
        s.schedule("periodic", lambda: ticks.append(threading.current_thread().name), 0, 10)
        s.schedule("failing", boom, 0, 10)
        assert once.wait(5)
        wait_until(lambda: len(ticks) >= 5 and len(failures) >= 3, 5, interval=0.005)
        assert all(name.startswith("test-scheduler-") for name in ticks)
        workers = list(s._workers)
    finally:
        s.shutdown()
    count = len(ticks)
    # shutdown joined the worker threads: nothing can run a task any more
    assert workers and not any(w.is_alive() for w in workers)
    assert len(ticks) == count
    with pytest.raises(RuntimeError):
        s.schedule_once("late", lambda: None)


def test_cancel():
    s = KafkaScheduler(1)
    ran = []
    try:
        task = s.schedule_once("cancelled", lambda: ran.append(1), 50)
        later = threading.Event()
        s.schedule_once("later", later.set, 60)
        task.cancel()
        # the one worker runs tasks in deadline order: once "later" ran, "cancelled" was due before it
        assert later.wait(5)
        assert ran == []
    finally:
        s.shutdown()


def test_periodic_task_never_overlaps_itself():
    s = KafkaScheduler(4)
    active, overlaps, runs = [0], [0], [0]
    lock = threading.Lock()

    def slow():
        with lock:
            active[0] += 1
            overlaps[0] = max(overlaps[0], active[0])
        _time.sleep(0.01)
        with lock:
            active[0] -= 1
            runs[0] += 1

    try:
        s.schedule("slow", slow, 0, 1)
        wait_until(lambda: runs[0] >= 5, 5, interval=0.005)
    finally:
        s.shutdown()
    assert overlaps[0] == 1


def test_mock_scheduler():
    t = MockTime(current_ms=0)
    s = MockScheduler(t)
    runs = []
    s.schedule("p", lambda: runs.append(t.milliseconds()), 100, 100)
    s.tick()
    assert runs == []
    t.sleep(350)
    s.tick()
    assert len(runs) == 3
