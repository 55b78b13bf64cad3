"""DescribeLogDirs (key 35) answered by its handler over a real LogManager on tmp_path."""

from __future__ import annotations

import os

import pytest

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.error_responses import build_error_response
from pykbroker.server.handlers.log_dirs import DescribeLogDirsHandler
from tests.unit.server.apis_harness import (
    LocalBroker,
    decode_sent,
    make_request,
    only_response,
    recording_helper,
    records,
)


@pytest.fixture
def broker(tmp_path):
    b = LocalBroker(tmp_path / "logs")
    yield b
    b.close()


def _describe(broker, version: int, topics) -> dict:
    helper, channel = recording_helper()
    handler = DescribeLogDirsHandler(helper, broker.log_manager)
    handler.handlers()[ApiKeys.DESCRIBE_LOG_DIRS](make_request(35, version, {"topics": topics}))
    _, body = decode_sent(only_response(channel), 35, version)
    return body


def _produce(broker, topic: str, partition: int, n: int) -> None:
    out: dict = {}
    broker.replica_manager.append_records(1000, 1, False, {(topic, partition): records(n)}, out.update)
    assert out[(topic, partition)].error_code == errors.NONE


def test_all_topics_with_sizes_and_disk_space(broker, tmp_path):
    broker.add_topic("a", partitions=2)
    broker.add_topic("b")
    _produce(broker, "a", 1, 5)
    body = _describe(broker, 4, None)
    assert body["error_code"] == errors.NONE
    [result] = body["results"]
    assert result["error_code"] == errors.NONE
    assert result["log_dir"] == os.path.abspath(tmp_path / "logs")
    parts = {(t["name"], p["partition_index"]): p for t in result["topics"] for p in t["partitions"]}
    assert set(parts) == {("a", 0), ("a", 1), ("b", 0)}
    assert parts[("a", 0)]["partition_size"] == 0
    assert parts[("a", 1)]["partition_size"] == broker.log_manager.get_log("a", 1).size > 0
    assert all(p["offset_lag"] == 0 and p["is_future_key"] is False for p in parts.values())
    st = os.statvfs(tmp_path / "logs")
    assert result["total_bytes"] == st.f_blocks * st.f_frsize
    assert 0 < result["usable_bytes"] <= result["total_bytes"]


def test_only_requested_partitions(broker):
    broker.add_topic("a", partitions=2)
    broker.add_topic("b")
    body = _describe(broker, 1, [{"topic": "a", "partitions": [1]}, {"topic": "missing", "partitions": [0]}])
    [result] = body["results"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in result["topics"]] == [("a", [1])]
    # before v4 total/usable bytes are not on the wire: the decoder fills their default
    assert result["total_bytes"] == -1


def test_offline_dir_answers_storage_error(tmp_path):
    from pykbroker.log.log_manager import LogManager
    from pykbroker.utils.scheduler import MockScheduler
    from pykbroker.utils.time import MockTime

    time = MockTime()
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    lm = LogManager.from_broker_config(dirs, {}, MockScheduler(time), time)
    lm.startup()
    try:
        lm.get_or_create_log("t", 0)
        lm.get_or_create_log("t", 1)
        lm.handle_log_dir_failure(os.path.abspath(dirs[1]))
        helper, channel = recording_helper()
        DescribeLogDirsHandler(helper, lm).handle_describe_log_dirs_request(make_request(35, 4, {"topics": None}))
        _, body = decode_sent(only_response(channel), 35, 4)
    finally:
        lm.shutdown()
    online, offline = body["results"]
    assert online["error_code"] == errors.NONE and online["topics"]
    assert offline == {
        "error_code": errors.KAFKA_STORAGE_ERROR,
        "log_dir": os.path.abspath(dirs[1]),
        "topics": [],
        "total_bytes": -1,
        "usable_bytes": -1,
    }


def test_error_response_is_kafkas():
    body = build_error_response(35, 4, {"topics": None}, errors.CLUSTER_AUTHORIZATION_FAILED, None)
    assert body["error_code"] == errors.CLUSTER_AUTHORIZATION_FAILED
    assert body["results"] == []
