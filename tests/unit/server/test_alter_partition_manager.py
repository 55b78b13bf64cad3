"""AlterPartitionManager: batching, one request in flight, per-partition callbacks, retries after
top-level errors and lost answers, refusal of a second change for a queued partition."""

from __future__ import annotations

import uuid
from concurrent.futures import Future

from pykbroker.protocol import errors
from pykbroker.server.alter_partition_manager import RETRY_BACKOFF_MS, AlterPartitionManager
from pykbroker.utils.scheduler import MockScheduler
from pykbroker.utils.time import MockTime

T1, T2 = uuid.uuid4(), uuid.uuid4()


class FakeController:
    def __init__(self):
        self.requests: list[tuple[dict, Future]] = []

    def alter_partition(self, request):
        f: Future = Future()
        self.requests.append((request, f))
        return f


def partition_ok(index, isr, epoch=1):
    return {
        "partition_index": index,
        "error_code": 0,
        "leader_id": 1,
        "leader_epoch": 0,
        "isr": isr,
        "partition_epoch": epoch,
    }


def isr(*broker_ids):
    """An ISR with each member's broker epoch (100 + id), as a Partition submits it."""
    return tuple((b, 100 + b) for b in broker_ids)


def setup():
    time = MockTime(current_ms=1000)
    scheduler = MockScheduler(time)
    controller = FakeController()
    apm = AlterPartitionManager(1, lambda: controller, lambda: 42, scheduler)
    return time, scheduler, controller, apm


def test_changes_are_batched_with_one_request_in_flight():
    _time, _scheduler, controller, apm = setup()
    results = []
    assert apm.submit(T1, 0, 0, isr(1, 2), 5, lambda c, r: results.append(("t1-0", c, r)))
    assert apm.submit(T1, 1, 0, isr(1, 3), 7, lambda c, r: results.append(("t1-1", c, r)))
    assert apm.submit(T2, 0, 2, isr(1), 1, lambda c, r: results.append(("t2-0", c, r)))
    assert len(controller.requests) == 1  # the first went out alone; the others wait for its answer
    request, future = controller.requests[0]
    assert request["broker_id"] == 1 and request["broker_epoch"] == 42
    part = request["topics"][0]["partitions"][0]
    assert part["new_isr_with_epochs"] == [{"broker_id": 1, "broker_epoch": 101}, {"broker_id": 2, "broker_epoch": 102}]
    assert (part["leader_epoch"], part["partition_epoch"]) == (0, 5)
    future.set_result({"error_code": 0, "topics": [{"topic_id": T1, "partitions": [partition_ok(0, [1, 2], 6)]}]})
    assert results == [("t1-0", 0, {"leader_id": 1, "leader_epoch": 0, "isr": [1, 2], "partition_epoch": 6})]
    assert len(controller.requests) == 2
    second, future2 = controller.requests[1]
    assert sorted((t["topic_id"], p["partition_index"]) for t in second["topics"] for p in t["partitions"]) == sorted(
        [(T1, 1), (T2, 0)]
    )
    future2.set_result(
        {
            "error_code": 0,
            "topics": [
                {"topic_id": T1, "partitions": [partition_ok(1, [1, 3])]},
                {"topic_id": T2, "partitions": [{**partition_ok(0, [1]), "error_code": errors.FENCED_LEADER_EPOCH}]},
            ],
        }
    )
    assert [(n, c) for n, c, _ in results[1:]] == [("t1-1", 0), ("t2-0", errors.FENCED_LEADER_EPOCH)]


def test_second_change_for_a_queued_partition_is_refused():
    _, _, _controller, apm = setup()
    apm.submit(T1, 0, 0, isr(1, 2), 5, lambda c, r: None)
    refused = []
    assert not apm.submit(T1, 0, 0, isr(1), 5, lambda c, r: refused.append(c))
    assert refused == [errors.OPERATION_NOT_ATTEMPTED]


def test_top_level_error_and_failure_are_retried_after_backoff():
    time, scheduler, controller, apm = setup()
    results = []
    apm.submit(T1, 0, 0, isr(1, 2), 5, lambda c, r: results.append(c))
    controller.requests[0][1].set_result({"error_code": errors.NOT_CONTROLLER, "topics": []})
    assert len(controller.requests) == 1 and results == []
    apm.submit(T1, 1, 0, isr(1, 2), 5, lambda c, r: results.append(c))  # queued behind the retry
    assert len(controller.requests) == 1
    time.sleep(RETRY_BACKOFF_MS)
    scheduler.tick()
    assert len(controller.requests) == 2
    assert len(controller.requests[1][0]["topics"][0]["partitions"]) == 2
    controller.requests[1][1].set_exception(TimeoutError("request timed out"))
    time.sleep(RETRY_BACKOFF_MS)
    scheduler.tick()
    assert len(controller.requests) == 3
    controller.requests[2][1].set_result(
        {
            "error_code": 0,
            "topics": [{"topic_id": T1, "partitions": [partition_ok(0, [1, 2]), partition_ok(1, [1, 2])]}],
        }
    )
    assert results == [0, 0]


def test_partition_missing_from_the_answer_is_sent_again():
    time, scheduler, controller, apm = setup()
    results = []
    apm.submit(T1, 0, 0, isr(1, 2), 5, lambda c, r: results.append(c))
    controller.requests[0][1].set_result({"error_code": 0, "topics": []})
    assert results == []
    time.sleep(RETRY_BACKOFF_MS)
    scheduler.tick()
    assert len(controller.requests) == 2


def test_is_pending_while_queued_or_in_flight():
    _, _, controller, apm = setup()
    assert not apm.is_pending(T1, 0)
    apm.submit(T1, 0, 0, isr(1, 2), 5, lambda c, r: None)  # in flight
    apm.submit(T1, 1, 0, isr(1, 2), 5, lambda c, r: None)  # queued behind it
    assert apm.is_pending(T1, 0) and apm.is_pending(T1, 1) and not apm.is_pending(T2, 0)
    controller.requests[0][1].set_result(
        {"error_code": 0, "topics": [{"topic_id": T1, "partitions": [partition_ok(0, [1, 2])]}]}
    )
    assert not apm.is_pending(T1, 0) and apm.is_pending(T1, 1)
