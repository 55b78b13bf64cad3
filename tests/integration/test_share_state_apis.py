"""The share coordinator's APIs as raw requests to a real broker (KIP-932): ApiVersions advertises
InitializeShareGroupState 83 .. ReadShareGroupStateSummary 87 at v0; FindCoordinator key type SHARE creates
``__share_group_state`` on first use (``share.coordinator.state.topic.num.partitions``, RF capped at the live
brokers, ``cleanup.policy=delete``) and answers INVALID_REQUEST for a malformed ``group:topicId:partition`` key; the
state RPCs initialize, write, read, summarize and delete a share partition's state with Kafka's error codes."""

from __future__ import annotations

import uuid

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.coordinator.share.share_coordinator_records import coordinator_key
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.types import ZERO_UUID
from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("share-state"), **{"share.coordinator.state.topic.num.partitions": "4"}
    ).start()
    create_topic(b.bootstrap, "t", partitions=2)
    yield b
    b.stop()
    assert "Traceback" not in b.output(), b.output()[-5000:]


@pytest.fixture
def conn(broker):
    with BrokerConnection.to(broker.bootstrap, timeout=15) as c:
        yield c


def _find(conn, key: str) -> dict:
    return conn.request(ApiKeys.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [key]})["coordinators"][0]


def _partition(resp: dict) -> dict:
    [result] = resp["results"]
    [p] = result["partitions"]
    return p


def _req(group: str, tid: uuid.UUID, partition: dict) -> dict:
    return {"group_id": group, "topics": [{"topic_id": tid, "partitions": [partition]}]}


def _write_partition(partition: int, state_epoch: int, leader_epoch: int, start: int, batches: list) -> dict:
    return {
        "partition": partition,
        "state_epoch": state_epoch,
        "leader_epoch": leader_epoch,
        "start_offset": start,
        "state_batches": batches,
    }


def test_api_versions_advertises_the_share_state_apis(conn):
    r = conn.request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    ranges = {a["api_key"]: (a["min_version"], a["max_version"]) for a in r["api_keys"]}
    for key in range(83, 88):  # WriteShareGroupState 85 and ReadShareGroupStateSummary 87: Kafka 4.2's v1 (KIP-1226)
        assert ranges[key] == ((0, 1) if key in (85, 87) else (0, 0))


def test_find_coordinator_share_key_creates_the_state_topic_and_refuses_malformed_keys(conn):
    for bad in ("g", "g:notauuid:0", "g:AAAAAAAAAAAAAAAAAAAAAQ:x"):
        assert _find(conn, bad)["error_code"] == errors.INVALID_REQUEST
    key = coordinator_key("g", uuid.uuid4(), 0)
    wait_until(lambda: _find(conn, key)["error_code"] == errors.NONE, 20, message="share coordinator found")
    md = conn.request(ApiKeys.METADATA, 12, {"topics": [{"name": "__share_group_state", "topic_id": ZERO_UUID}]})
    [topic] = md["topics"]
    assert topic["error_code"] == errors.NONE and topic["is_internal"] and len(topic["partitions"]) == 4
    configs = conn.request(
        ApiKeys.DESCRIBE_CONFIGS,
        4,
        {
            "resources": [
                {"resource_type": 2, "resource_name": "__share_group_state", "configuration_keys": ["cleanup.policy"]}
            ],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    assert configs["results"][0]["configs"][0]["value"] == "delete"


def test_state_rpcs_round_trip_with_kafkas_error_codes(conn):
    md = conn.request(ApiKeys.METADATA, 12, {"topics": [{"name": "t", "topic_id": ZERO_UUID}]})
    tid = md["topics"][0]["topic_id"]
    wait_until(lambda: _find(conn, coordinator_key("g2", tid, 1))["error_code"] == errors.NONE, 20)
    read = _req("g2", tid, {"partition": 1, "leader_epoch": 0})

    def loaded() -> dict | None:
        # FindCoordinator answers from the metadata, before the share coordinator has loaded its new partition (as in
        # Kafka, whose persister retries NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS)
        p = _partition(conn.request(ApiKeys.READ_SHARE_GROUP_STATE, 0, read))
        return None if p["error_code"] in (errors.NOT_COORDINATOR, errors.COORDINATOR_LOAD_IN_PROGRESS) else p

    p = wait_until(loaded, 20, message="the state partition loaded")
    assert p["error_code"] == errors.UNKNOWN_TOPIC_OR_PARTITION and p["partition"] == 1
    init = _req("g2", tid, {"partition": 1, "state_epoch": 1, "start_offset": 5})
    assert _partition(conn.request(ApiKeys.INITIALIZE_SHARE_GROUP_STATE, 0, init))["error_code"] == errors.NONE
    batch = {"first_offset": 5, "last_offset": 8, "delivery_state": 2, "delivery_count": 1}
    write = _req("g2", tid, _write_partition(1, 1, 0, -1, [batch]))
    assert _partition(conn.request(ApiKeys.WRITE_SHARE_GROUP_STATE, 0, write))["error_code"] == errors.NONE
    p = _partition(conn.request(ApiKeys.READ_SHARE_GROUP_STATE, 0, read))
    assert (p["error_code"], p["state_epoch"], p["start_offset"], p["state_batches"]) == (errors.NONE, 1, 5, [batch])
    old = _req("g2", tid, _write_partition(1, 0, 0, -1, []))
    assert _partition(conn.request(ApiKeys.WRITE_SHARE_GROUP_STATE, 0, old))["error_code"] == errors.FENCED_STATE_EPOCH
    summary = _partition(conn.request(ApiKeys.READ_SHARE_GROUP_STATE_SUMMARY, 0, read))
    assert (summary["error_code"], summary["state_epoch"], summary["start_offset"]) == (errors.NONE, 1, 5)
    # Kafka 4.2's v1 (KIP-1226): the writer's delivery complete count comes back in the summary, with the leader epoch
    write_v1 = _req("g2", tid, dict(_write_partition(1, 1, 3, -1, []), delivery_complete_count=4))
    assert _partition(conn.request(ApiKeys.WRITE_SHARE_GROUP_STATE, 1, write_v1))["error_code"] == errors.NONE
    summary = _partition(conn.request(ApiKeys.READ_SHARE_GROUP_STATE_SUMMARY, 1, read))
    assert (summary["start_offset"], summary["leader_epoch"], summary["delivery_complete_count"]) == (5, 3, 4)
    unknown = _req("g2", uuid.uuid4(), _write_partition(0, 1, 0, 0, []))  # this broker leads every state partition
    p = _partition(conn.request(ApiKeys.WRITE_SHARE_GROUP_STATE, 0, unknown))
    assert p["error_code"] == errors.UNKNOWN_TOPIC_OR_PARTITION
    delete = _req("g2", tid, {"partition": 1})
    assert _partition(conn.request(ApiKeys.DELETE_SHARE_GROUP_STATE, 0, delete))["error_code"] == errors.NONE
    p = _partition(conn.request(ApiKeys.READ_SHARE_GROUP_STATE, 0, read))
    assert p["error_code"] == errors.UNKNOWN_TOPIC_OR_PARTITION
