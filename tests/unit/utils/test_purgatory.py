"""DelayedOperation / DelayedOperationPurgatory (mirrors Kafka's DelayedOperationTest)."""

from __future__ import annotations

import random
import threading
import time as _time

import pytest

from pykbroker.utils.delayed_operation import (
    DelayedOperation,
    DelayedOperationPurgatory,
    TopicPartitionOperationKey,
)
from pykbroker.utils.time import MockTime


def wait_until(cond, timeout_s: float = 5.0, msg: str = "condition not met") -> None:
    deadline = _time.monotonic() + timeout_s
    while not cond():
        if _time.monotonic() > deadline:
            raise AssertionError(msg)
        _time.sleep(0.005)


class MockDelayedOperation(DelayedOperation):
    """Completes once ``completable`` is set; counts callbacks."""

    def __init__(self, delay_ms: int, lock=None):
        super().__init__(delay_ms, lock)
        self.completable = False
        self.on_complete_calls = 0
        self.on_expiration_calls = 0
        self.completed_at: float | None = None
        self._count_lock = threading.Lock()

    def try_complete(self) -> bool:
        if self.completable:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        with self._count_lock:
            self.on_complete_calls += 1
        self.completed_at = _time.monotonic()

    def on_expiration(self) -> None:
        with self._count_lock:
            self.on_expiration_calls += 1


@pytest.fixture
def mock_purgatory():
    time = MockTime()
    p = DelayedOperationPurgatory("mock", broker_id=1, reaper_enabled=False, time=time)
    yield p, time
    p.shutdown()


def test_abstract_methods_are_enforced():
    class Incomplete(DelayedOperation):
        def try_complete(self):
            return False

    with pytest.raises(TypeError):
        Incomplete(10)


def test_request_satisfaction(mock_purgatory):
    p, _ = mock_purgatory
    r1, r2 = MockDelayedOperation(100_000), MockDelayedOperation(100_000)
    assert p.check_and_complete("test1") == 0
    assert not p.try_complete_else_watch(r1, ["test1"])
    assert p.check_and_complete("test1") == 0
    assert not p.try_complete_else_watch(r2, ["test2"])
    assert p.check_and_complete("test2") == 0
    r1.completable = True
    assert p.check_and_complete("test1") == 1
    assert p.check_and_complete("test1") == 0
    r2.completable = True
    assert p.check_and_complete("test2") == 1
    assert r1.on_complete_calls == r2.on_complete_calls == 1
    assert p.num_delayed == 0 and p.purgatory_size == 0


def test_completes_immediately_when_possible(mock_purgatory):
    p, _ = mock_purgatory
    op = MockDelayedOperation(10)
    op.completable = True
    assert p.try_complete_else_watch(op, [TopicPartitionOperationKey("t", 0)])
    assert op.on_complete_calls == 1
    assert p.num_delayed == 0 and p.purgatory_size == 0


def test_empty_keys_rejected(mock_purgatory):
    p, _ = mock_purgatory
    with pytest.raises(ValueError):
        p.try_complete_else_watch(MockDelayedOperation(10), [])


def test_expiry_with_mock_time(mock_purgatory):
    p, time = mock_purgatory
    op = MockDelayedOperation(100)
    assert not p.try_complete_else_watch(op, ["k1", "k2"])
    assert p.num_delayed == 1 and p.purgatory_size == 2
    time.sleep(99)
    p.advance_clock(0)
    assert not op.is_completed
    time.sleep(1)
    p.advance_clock(0)
    assert op.is_completed
    assert (op.on_complete_calls, op.on_expiration_calls) == (1, 1)
    assert p.num_delayed == 0
    # completed but still watched until a check or a purge removes it
    assert p.purgatory_size == 2
    assert p.check_and_complete("k1") == 0
    assert p.purgatory_size == 1


def test_completion_cancels_timeout(mock_purgatory):
    p, time = mock_purgatory
    op = MockDelayedOperation(100)
    p.try_complete_else_watch(op, ["k"])
    op.completable = True
    assert p.check_and_complete("k") == 1
    assert p.num_delayed == 0
    time.sleep(200)
    p.advance_clock(0)
    assert op.on_expiration_calls == 0 and op.on_complete_calls == 1


def test_purge_after_interval():
    time = MockTime()
    p = DelayedOperationPurgatory("mock", purge_interval=5, reaper_enabled=False, time=time)
    ops = [MockDelayedOperation(100_000) for _ in range(10)]
    for op in ops:
        p.try_complete_else_watch(op, ["a", "b"])
    assert p.purgatory_size == 20
    for op in ops[:8]:
        op.completable = True
        op.safe_try_complete()  # completed elsewhere: still watched
    assert p.num_delayed == 2 and p.purgatory_size == 20
    p.advance_clock(0)  # estimated 10 - delayed 2 > 5: purge
    assert p.purgatory_size == 4
    p.shutdown()


def test_cancel_for_key(mock_purgatory):
    p, _ = mock_purgatory
    ops = [MockDelayedOperation(100_000) for _ in range(3)]
    for op in ops:
        p.try_complete_else_watch(op, ["key"])
    assert p.num_delayed == 3
    cancelled = p.cancel_for_key("key")
    assert cancelled == ops
    assert p.num_delayed == 0 and p.purgatory_size == 0
    assert not any(op.is_completed for op in ops)
    assert p.cancel_for_key("key") == []


def test_operation_completed_between_watch_and_timer_is_not_left_in_timer(mock_purgatory):
    p, _ = mock_purgatory

    class CompletesOnSecondTry(MockDelayedOperation):
        tries = 0

        def try_complete(self):
            self.tries += 1
            return self.force_complete() if self.tries == 2 else False

    op = CompletesOnSecondTry(1000)
    assert p.try_complete_else_watch(op, ["k"]) is True
    assert p.num_delayed == 0


def test_shared_lock_is_used_by_safe_try_complete():
    lock = threading.RLock()
    op = MockDelayedOperation(10, lock=lock)
    assert op.lock is lock
    seen = []

    class Probe(MockDelayedOperation):
        def try_complete(self):
            seen.append(lock._is_owned())  # type: ignore[attr-defined]
            return False

    Probe(10, lock=lock).safe_try_complete()
    assert seen == [True]


# ---- real clock: the reaper thread -------------------------------------------------------------


def test_reaper_thread_name_and_expiry_within_delay_plus_poll():
    p = DelayedOperationPurgatory("Produce", broker_id=7)
    try:
        names = {t.name for t in threading.enumerate()}
        assert "ExpirationReaper-7-Produce" in names
        ops = [MockDelayedOperation(d) for d in (50, 100, 150)]
        start = _time.monotonic()
        for op in ops:
            assert not p.try_complete_else_watch(op, [TopicPartitionOperationKey("t", 0)])
        wait_until(lambda: all(op.is_completed for op in ops), 3.0)
        for op in ops:
            assert op.on_expiration_calls == 1
            took_ms = (op.completed_at - start) * 1000
            assert op.delay_ms <= took_ms + 5 < op.delay_ms + 250, took_ms
    finally:
        p.shutdown()
    assert "ExpirationReaper-7-Produce" not in {t.name for t in threading.enumerate()}


def test_shutdown_is_prompt():
    p = DelayedOperationPurgatory("Fetch")
    p.try_complete_else_watch(MockDelayedOperation(60_000), ["k"])
    start = _time.monotonic()
    p.shutdown()
    assert _time.monotonic() - start < 0.5
    p.shutdown()  # idempotent


def test_race_complete_vs_expire_on_complete_exactly_once():
    """Many threads complete via check_and_complete while the reaper expires the same ops."""
    p = DelayedOperationPurgatory("race", purge_interval=10)
    rnd = random.Random(42)
    ops = [MockDelayedOperation(rnd.randint(0, 30)) for _ in range(400)]
    keys = [f"key-{i}" for i in range(8)]
    try:
        for op in ops:
            p.try_complete_else_watch(op, rnd.sample(keys, 3))
        stop = threading.Event()

        def completer(seed: int) -> None:
            r = random.Random(seed)
            while not stop.is_set():
                op = r.choice(ops)
                op.completable = True
                p.check_and_complete(r.choice(keys))

        threads = [threading.Thread(target=completer, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        wait_until(lambda: all(op.is_completed for op in ops), 5.0)
        stop.set()
        for t in threads:
            t.join()
        for op in ops:
            assert op.on_complete_calls == 1
            assert op.on_expiration_calls in (0, 1)
        assert p.num_delayed == 0
    finally:
        p.shutdown()


def test_concurrent_force_complete_exactly_once():
    ops = [MockDelayedOperation(1000) for _ in range(200)]
    barrier = threading.Barrier(8)
    wins = [0] * 8

    def worker(i: int) -> None:
        barrier.wait()
        for op in ops:
            if op.force_complete():
                wins[i] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(wins) == len(ops)
    assert all(op.on_complete_calls == 1 for op in ops)


def test_many_threads_watch_and_complete_concurrently():
    p = DelayedOperationPurgatory("concurrent", reaper_enabled=False)
    done = []
    per_thread = 200

    def worker(i: int) -> None:
        for j in range(per_thread):
            op = MockDelayedOperation(60_000)
            key = TopicPartitionOperationKey("t", (i + j) % 5)
            p.try_complete_else_watch(op, [key])
            op.completable = True
            p.check_and_complete(key)
            done.append(op)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(done) == 8 * per_thread
    assert all(op.on_complete_calls == 1 for op in done)
    assert p.num_delayed == 0 and p.purgatory_size == 0
    p.shutdown()


class _CountingLock:
    """A shard lock that counts its acquisitions."""

    def __init__(self):
        self._lock = threading.Lock()
        self.acquired = 0

    def __enter__(self):
        self.acquired += 1
        return self._lock.__enter__()

    def __exit__(self, *exc):
        return self._lock.__exit__(*exc)


def test_check_and_complete_of_an_unwatched_key_takes_no_lock(mock_purgatory):
    # issue 31 (lone produce): every append pokes the produce and fetch purgatories, nearly always for a key
    # nobody watches; that answer needs no shard lock
    purgatory, _ = mock_purgatory
    key = TopicPartitionOperationKey("t", 0)
    shard = purgatory._shards[hash(key) % len(purgatory._shards)]
    shard.lock = _CountingLock()
    assert purgatory.check_and_complete(key) == 0
    assert shard.lock.acquired == 0
    op = MockDelayedOperation(100_000)
    assert not purgatory.try_complete_else_watch(op, [key])
    before = shard.lock.acquired
    op.completable = True
    assert purgatory.check_and_complete(key) == 1  # a watched key still completes its operations
    assert shard.lock.acquired > before
    assert op.on_complete_calls == 1
    assert purgatory.check_and_complete(key) == 0  # ... and is then dropped


def test_a_plain_topic_partition_tuple_is_the_same_watch_key(mock_purgatory):
    # ReplicaManager pokes with the (topic, partition) tuple of the append: it must find the operations watching
    # the TopicPartitionOperationKey
    purgatory, _ = mock_purgatory
    op = MockDelayedOperation(100_000)
    assert not purgatory.try_complete_else_watch(op, [TopicPartitionOperationKey("t", 3)])
    op.completable = True
    assert purgatory.check_and_complete(("t", 4)) == 0
    assert purgatory.check_and_complete(("t", 3)) == 1
    assert op.on_complete_calls == 1
