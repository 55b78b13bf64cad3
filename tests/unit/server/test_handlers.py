"""The API handler families in process: requests through the real codec, a real ReplicaManager and
LogManager on tmp_path, responses decoded from what the handler sends (``KafkaApis.handle*Request``)."""

from __future__ import annotations

import random
import uuid
from concurrent.futures import Future
from types import SimpleNamespace
from typing import ClassVar

import pytest

from pykbroker.metadata.cluster_control_manager import ClusterControlManager
from pykbroker.metadata.configuration_control_manager import ConfigurationControlManager
from pykbroker.metadata.replica_placer import StripedReplicaPlacer
from pykbroker.metadata.replication_control_manager import ReplicationControlManager
from pykbroker.network.request_channel import CloseConnectionResponse, NoOpResponse
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.server.fetch_session import FetchManager, FetchSessionCache
from pykbroker.server.handlers.admin import AdminHandler
from pykbroker.server.handlers.fetch import FetchHandler
from pykbroker.server.handlers.groups import GroupHandlers
from pykbroker.server.handlers.list_offsets import ListOffsetsHandler
from pykbroker.server.handlers.metadata import MetadataHandler
from pykbroker.server.handlers.produce import ProduceHandler
from pykbroker.server.kafka_apis import KafkaApis
from tests.unit.server.apis_harness import (
    LocalBroker,
    decode_sent,
    make_request,
    only_response,
    recording_helper,
    records,
    response_bytes,
)

ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture
def broker(tmp_path):
    b = LocalBroker(tmp_path / "logs")
    b.add_topic("t", 2)
    yield b
    b.close()


class Apis:
    """A KafkaApis with the given handler families; ``call`` handles one request and decodes the answer."""

    def __init__(self, broker, *families):
        self.helper, self.channel = recording_helper()
        self.apis = KafkaApis(1, self.helper, broker.time)
        for family in families:
            self.apis.register(family(self.helper).handlers())
        self.apis.after_handle.append(broker.replica_manager.try_complete_actions)

    def send(self, api_key, version, body, **kw):
        self.apis.handle(make_request(api_key, version, body, **kw))

    def call(self, api_key, version, body, **kw) -> dict:
        self.send(api_key, version, body, **kw)
        return decode_sent(only_response(self.channel), api_key, version)[1]


# -- Produce ---------------------------------------------------------------------------------------------


def produce_body(topic_data, acks=1):
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 1000,
        "topic_data": [
            {"name": name, "partition_data": [{"index": i, "records": r} for i, r in parts]}
            for name, parts in topic_data
        ],
    }


def produce_apis(broker):
    return Apis(broker, lambda h: ProduceHandler(h, broker.replica_manager, broker.cache))


def test_produce_appends_and_answers_per_partition(broker):
    apis = produce_apis(broker)
    body = apis.call(ApiKeys.PRODUCE, 9, produce_body([("t", [(0, bytes(records(3))), (1, bytes(records(1)))])]))
    parts = {p["index"]: p for p in body["responses"][0]["partition_responses"]}
    assert (parts[0]["error_code"], parts[0]["base_offset"]) == (errors.NONE, 0)
    assert (parts[1]["error_code"], parts[1]["base_offset"]) == (errors.NONE, 0)
    assert broker.replica_manager.get_partition("t", 0).log.log_end_offset == 3


def test_produce_unknown_topic_and_empty_records(broker):
    apis = produce_apis(broker)
    body = apis.call(ApiKeys.PRODUCE, 9, produce_body([("nope", [(0, bytes(records(1)))]), ("t", [(0, b"")])]))
    codes = {(t["name"], p["index"]): p["error_code"] for t in body["responses"] for p in t["partition_responses"]}
    assert codes == {("nope", 0): errors.UNKNOWN_TOPIC_OR_PARTITION, ("t", 0): errors.INVALID_RECORD}
    assert broker.replica_manager.get_partition("t", 0).log.log_end_offset == 0


def test_produce_acks_0_no_response_on_success_close_on_error(broker):
    apis = produce_apis(broker)
    apis.send(ApiKeys.PRODUCE, 9, produce_body([("t", [(0, bytes(records(2)))])], acks=0))
    assert isinstance(only_response(apis.channel), NoOpResponse)
    assert broker.replica_manager.get_partition("t", 0).log.log_end_offset == 2
    apis.send(ApiKeys.PRODUCE, 9, produce_body([("nope", [(0, bytes(records(1)))])], acks=0))
    assert isinstance(only_response(apis.channel), CloseConnectionResponse)


def test_produce_acks_all_waits_for_the_isr(broker):
    broker.add_topic("r", 1, replicas=(1, 2), isr=(1, 2))
    apis = produce_apis(broker)
    apis.send(ApiKeys.PRODUCE, 9, produce_body([("r", [(0, bytes(records(1)))])], acks=-1))
    assert apis.channel.responses == []  # parked in the produce purgatory
    broker.set_isr("r", 0, (1,))
    _, body = decode_sent(only_response(apis.channel), ApiKeys.PRODUCE, 9)
    assert body["responses"][0]["partition_responses"][0]["error_code"] == errors.NONE


def test_produce_transactional_batch_without_transactional_id(broker):
    # Kafka: transactional records need a transactional id; the header walk looks at every batch of every partition
    apis = produce_apis(broker)
    plain = bytes(records(2))
    marked = bytearray(records(1))
    marked[22] |= 0x10  # the transactional attribute (the check runs before validation: the CRC is not looked at)
    request = [("t", [(0, plain), (1, plain + bytes(marked))])]
    body = apis.call(ApiKeys.PRODUCE, 9, produce_body(request))
    codes = [p["error_code"] for t in body["responses"] for p in t["partition_responses"]]
    assert codes == [errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED] * 2
    assert broker.replica_manager.get_partition("t", 0).log.log_end_offset == 0
    body = apis.call(ApiKeys.PRODUCE, 9, produce_body([("t", [(0, plain), (1, plain)])]))
    assert [p["error_code"] for t in body["responses"] for p in t["partition_responses"]] == [errors.NONE] * 2


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_produce_frame_from_results_equals_the_body_path(tmp_path, version):
    # issue 31: the common answer is written straight from the append results (RequestHelper.try_send_frame); the
    # same appends on an identical broker answered through the body (try_send_frame off) give the same bytes and
    # the same ErrorsPerSec counts
    request = [("t", [(0, bytes(records(3))), (1, bytes(records(1)))]), ("nope", [(0, bytes(records(1)))])]
    answers = []
    for fast in (True, False):
        broker = LocalBroker(tmp_path / f"logs-{fast}")
        broker.add_topic("t", 2)
        try:
            apis = produce_apis(broker)
            if not fast:
                apis.helper.try_send_frame = lambda *args: False
            for _ in range(2):
                apis.send(ApiKeys.PRODUCE, version, produce_body(request))
            answers.append(([response_bytes(r) for r in apis.channel.responses], apis.channel.errors))
        finally:
            broker.close()
    assert answers[0] == answers[1]
    _, body = decode_sent(apis.channel.responses[1], ApiKeys.PRODUCE, version)
    codes = [(p["error_code"], p["base_offset"]) for t in body["responses"] for p in t["partition_responses"]]
    assert codes == [(errors.NONE, 3), (errors.NONE, 1), (errors.UNKNOWN_TOPIC_OR_PARTITION, -1)]


# -- Fetch -----------------------------------------------------------------------------------------------


def fetch_apis(broker):
    return Apis(
        broker,
        lambda h: FetchHandler(
            h, broker.replica_manager, broker.cache, FetchManager(FetchSessionCache(100), broker.time)
        ),
    )


def fetch_body(version, topic, partition=0, offset=0, topic_id=ZERO_UUID, max_wait_ms=0):
    return {
        "replica_id": -1,
        "replica_state": {"replica_id": -1, "replica_epoch": -1},
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "topic_id": topic_id,
                "partitions": [{"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def fetched(partition: dict) -> list[int]:
    return [r.offset for _, b in iter_batches(memoryview(partition["records"])) for r in b.records()]


@pytest.mark.parametrize("version", [4, 12, 13, 17])
def test_fetch_returns_records_by_name_or_id(broker, version):
    broker.replica_manager.append_records(1000, 1, False, {("t", 0): records(3)}, lambda r: None)
    apis = fetch_apis(broker)
    body = apis.call(ApiKeys.FETCH, version, fetch_body(version, "t", topic_id=broker.topic_ids["t"]))
    p = body["responses"][0]["partitions"][0]
    assert (p["error_code"], p["high_watermark"]) == (errors.NONE, 3)
    assert fetched(p) == [0, 1, 2]


def test_fetch_unknown_topic_id_and_offset_out_of_range(broker):
    apis = fetch_apis(broker)
    body = apis.call(ApiKeys.FETCH, 13, fetch_body(13, None, topic_id=uuid.uuid4()))
    assert body["responses"][0]["partitions"][0]["error_code"] == errors.UNKNOWN_TOPIC_ID
    body = apis.call(ApiKeys.FETCH, 12, fetch_body(12, "t", offset=5))
    assert body["responses"][0]["partitions"][0]["error_code"] == errors.OFFSET_OUT_OF_RANGE


def test_fetch_long_poll_answers_when_records_arrive(broker):
    apis = fetch_apis(broker)
    apis.send(ApiKeys.FETCH, 12, fetch_body(12, "t", max_wait_ms=30_000))
    assert apis.channel.responses == []
    produce_apis(broker).call(ApiKeys.PRODUCE, 9, produce_body([("t", [(0, bytes(records(2)))])]))
    _, body = decode_sent(only_response(apis.channel), ApiKeys.FETCH, 12)
    assert fetched(body["responses"][0]["partitions"][0]) == [0, 1]


# -- Metadata --------------------------------------------------------------------------------------------


def metadata_apis(broker, auto_create=None):
    return Apis(broker, lambda h: MetadataHandler(h, broker.cache, auto_create))


def test_metadata_all_topics_and_brokers_of_the_listener(broker):
    body = metadata_apis(broker).call(ApiKeys.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
    assert [(b["node_id"], b["host"], b["port"]) for b in body["brokers"]] == [(1, "127.0.0.1", 9092)]
    assert body["cluster_id"] == "test-cluster" and body["controller_id"] == 1
    (t,) = body["topics"]
    assert (t["name"], t["topic_id"], t["error_code"]) == ("t", broker.topic_ids["t"], errors.NONE)
    assert [(p["partition_index"], p["leader_id"], p["isr_nodes"]) for p in t["partitions"]] == [
        (0, 1, [1]),
        (1, 1, [1]),
    ]
    other = metadata_apis(broker).call(ApiKeys.METADATA, 12, {"topics": None}, listener="OTHER")
    assert other["brokers"] == []


def test_metadata_unknown_topic_name_and_id(broker):
    body = metadata_apis(broker).call(
        ApiKeys.METADATA,
        12,
        {
            "topics": [{"name": "nope", "topic_id": ZERO_UUID}, {"name": None, "topic_id": uuid.uuid4()}],
            "allow_auto_topic_creation": True,
        },
    )  # no auto-creation configured
    assert sorted(t["error_code"] for t in body["topics"]) == [
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        errors.UNKNOWN_TOPIC_ID,
    ]


def test_metadata_auto_creates_when_allowed(broker):
    asked = []

    def auto_create(names):
        asked.extend(names)
        return {n: errors.LEADER_NOT_AVAILABLE for n in names}

    apis = metadata_apis(broker, auto_create)
    body = apis.call(ApiKeys.METADATA, 12, {"topics": [{"name": "new"}], "allow_auto_topic_creation": True})
    assert asked == ["new"] and body["topics"][0]["error_code"] == errors.LEADER_NOT_AVAILABLE
    body = apis.call(ApiKeys.METADATA, 12, {"topics": [{"name": "new2"}], "allow_auto_topic_creation": False})
    assert asked == ["new"] and body["topics"][0]["error_code"] == errors.UNKNOWN_TOPIC_OR_PARTITION


# -- ListOffsets -----------------------------------------------------------------------------------------


def list_offsets(apis, partition_requests, version=7, isolation=0):
    body = apis.call(
        ApiKeys.LIST_OFFSETS,
        version,
        {
            "replica_id": -1,
            "isolation_level": isolation,
            "topics": [
                {
                    "name": t,
                    "partitions": [
                        {"partition_index": p, "current_leader_epoch": e, "timestamp": ts}
                        for t2, p, e, ts in partition_requests
                        if t2 == t
                    ],
                }
                for t in dict.fromkeys(r[0] for r in partition_requests)
            ],
        },
    )
    return [(p["error_code"], p["offset"], p["timestamp"]) for t in body["topics"] for p in t["partitions"]]


def test_list_offsets_earliest_latest_and_by_timestamp(broker):
    rm = broker.replica_manager
    rm.append_records(1000, 1, False, {("t", 0): records(5, timestamp=1_000)}, lambda r: None)  # ts 1000..1004
    apis = Apis(broker, lambda h: ListOffsetsHandler(h, rm))
    assert list_offsets(apis, [("t", 0, -1, -2), ("t", 0, -1, -1), ("t", 0, -1, 1_002), ("t", 0, -1, 9_999)]) == [
        (errors.NONE, 0, -1),
        (errors.NONE, 5, -1),
        (errors.NONE, 2, 1_002),
        (errors.NONE, -1, -1),
    ]
    rm.delete_records_on_local_log("t", 0, 2)
    assert list_offsets(apis, [("t", 0, -1, -2)]) == [(errors.NONE, 2, -1)]


def test_list_offsets_errors(broker):
    apis = Apis(broker, lambda h: ListOffsetsHandler(h, broker.replica_manager))
    got = list_offsets(apis, [("t", 0, 3, -1), ("t", 7, -1, -1), ("nope", 0, -1, -1)])
    assert [c for c, _, _ in got] == [
        errors.UNKNOWN_LEADER_EPOCH,
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        errors.UNKNOWN_TOPIC_OR_PARTITION,
    ]


# -- CreateTopics / DeleteTopics through a controller running the real ReplicationControlManager ---------


class SyncController:
    """The controller half the admin handler uses, answering at once from a ReplicationControlManager."""

    def __init__(self, brokers=(1,)):
        self.cluster = ClusterControlManager("test-cluster")
        self.configs = ConfigurationControlManager(None)
        self.repl = ReplicationControlManager(self.cluster, self.configs, StripedReplicaPlacer(random.Random(0)), 1, 1)
        self.configs.topic_exists = self.repl.topic_exists
        self.failure: Exception | None = None
        for b in brokers:
            self._replay(
                self.cluster.register_broker(
                    {"broker_id": b, "listeners": [{"name": "PLAINTEXT", "host": "h", "port": 9092}]}, b
                ).records
            )
            self.cluster.brokers[b].fenced = False

    def _replay(self, records):
        for r in records:
            for m in (self.cluster, self.configs, self.repl):
                m.replay(r)

    def _answer(self, result) -> Future:
        f = Future()
        if self.failure is not None:
            f.set_exception(self.failure)
        else:
            self._replay(result.records)
            f.set_result(result.response)
        return f

    def create_topics(self, request):
        return self._answer(self.repl.create_topics(request))

    def delete_topics(self, request):
        return self._answer(self.repl.delete_topics(request))


def admin_apis(broker, controller):
    return Apis(
        broker,
        lambda h: AdminHandler(
            h, controller, broker.cache, SimpleNamespace(node_id=1), broker.log_manager.default_config
        ),
    )


def create(apis, *topics, validate_only=False, version=7):
    body = apis.call(
        ApiKeys.CREATE_TOPICS,
        version,
        {
            "topics": [
                {
                    "name": n,
                    "num_partitions": p,
                    "replication_factor": rf,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (cfg or {}).items()],
                }
                for n, p, rf, cfg in topics
            ],
            "timeout_ms": 1000,
            "validate_only": validate_only,
        },
    )
    return {t["name"]: t["error_code"] for t in body["topics"]}


def test_create_topics_validation(broker):
    controller = SyncController()
    apis = admin_apis(broker, controller)
    assert create(apis, ("ok", 3, 1, None)) == {"ok": errors.NONE}
    assert create(
        apis,
        ("ok", 1, 1, None),
        ("bad/name", 1, 1, None),
        ("zero", 0, 1, None),
        ("rf", 1, 3, None),
        ("cfg", 1, 1, {"cleanup.policy": None}),
        ("dup", 1, 1, None),
        ("dup", 1, 1, None),
    ) == {
        "ok": errors.TOPIC_ALREADY_EXISTS,
        "bad/name": errors.INVALID_TOPIC_EXCEPTION,
        "zero": errors.INVALID_PARTITIONS,
        "rf": errors.INVALID_REPLICATION_FACTOR,
        "cfg": errors.INVALID_CONFIG,
        "dup": errors.INVALID_REQUEST,
    }
    assert create(apis, ("dry", 1, 1, None), validate_only=True) == {"dry": errors.NONE}
    assert not controller.repl.topic_exists("dry")  # validate_only creates nothing


def test_delete_topics_by_name_and_id(broker):
    controller = SyncController()
    apis = admin_apis(broker, controller)
    create(apis, ("a", 1, 1, None), ("b", 1, 1, None))
    body = apis.call(ApiKeys.DELETE_TOPICS, 5, {"topic_names": ["a", "nope"], "timeout_ms": 1000})
    assert {r["name"]: r["error_code"] for r in body["responses"]} == {
        "a": errors.NONE,
        "nope": errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    b_id = controller.repl.topics_by_name["b"]
    body = apis.call(
        ApiKeys.DELETE_TOPICS,
        6,
        {"topics": [{"name": None, "topic_id": b_id}, {"name": None, "topic_id": uuid.uuid4()}], "timeout_ms": 1000},
    )
    assert [r["error_code"] for r in body["responses"]] == [errors.NONE, errors.UNKNOWN_TOPIC_ID]


def test_controller_failure_becomes_the_error_of_every_topic(broker):
    controller = SyncController()
    controller.failure = errors.NotControllerError("moved")
    apis = admin_apis(broker, controller)
    assert create(apis, ("a", 1, 1, None), ("b", 1, 1, None)) == {
        "a": errors.NOT_CONTROLLER,
        "b": errors.NOT_CONTROLLER,
    }
    body = apis.call(ApiKeys.DELETE_TOPICS, 6, {"topics": [{"name": "a", "topic_id": ZERO_UUID}], "timeout_ms": 1})
    assert [(r["name"], r["error_code"]) for r in body["responses"]] == [("a", errors.NOT_CONTROLLER)]


# -- group APIs: the coordinator not (yet) available -------------------------------------------------------


class GroupConfig(dict):
    listeners: ClassVar[list] = [SimpleNamespace(listener_name="PLAINTEXT")]


def group_apis(broker, coordinator, controller=None):
    config = GroupConfig(
        {
            "offsets.topic.replication.factor": 3,
            "offsets.topic.num.partitions": 5,
            "offsets.topic.segment.bytes": 1 << 20,
        }
    )
    return Apis(broker, lambda h: GroupHandlers(h, coordinator, broker.cache, controller, config, broker.time))


class CreateTopicsRecorder:
    def __init__(self):
        self.requests = []

    def create_topics(self, request):
        self.requests.append(request)
        return Future()  # never completes here: creation is in progress


def find_coordinator(apis, key="g", key_type=0, version=3):
    return apis.call(ApiKeys.FIND_COORDINATOR, version, {"key": key, "key_type": key_type, "coordinator_keys": [key]})


def test_find_coordinator_creates_the_offsets_topic_once_and_answers_not_available_meanwhile(broker):
    controller = CreateTopicsRecorder()
    apis = group_apis(broker, SimpleNamespace(node_id=1), controller)
    first = find_coordinator(apis)
    assert (first["error_code"], first["node_id"], first["port"]) == (errors.COORDINATOR_NOT_AVAILABLE, -1, -1)
    batched = find_coordinator(apis, version=4)
    assert [(c["key"], c["error_code"]) for c in batched["coordinators"]] == [("g", errors.COORDINATOR_NOT_AVAILABLE)]
    (request,) = controller.requests  # asked once, not once per FindCoordinator
    (topic,) = request["topics"]
    assert (topic["name"], topic["num_partitions"], topic["replication_factor"]) == ("__consumer_offsets", 5, 1)
    assert {"name": "cleanup.policy", "value": "compact"} in topic["configs"]
    broker.add_topic("__consumer_offsets", 1)  # created: this broker coordinates
    ready = find_coordinator(apis)
    assert (ready["error_code"], ready["node_id"], ready["host"], ready["port"]) == (errors.NONE, 1, "127.0.0.1", 9092)


def test_find_coordinator_transaction_key_and_empty_key(broker):
    apis = group_apis(broker, SimpleNamespace(node_id=1), CreateTopicsRecorder())
    assert find_coordinator(apis, key_type=1)["error_code"] == errors.COORDINATOR_NOT_AVAILABLE
    assert find_coordinator(apis, key="")["error_code"] == errors.INVALID_REQUEST


def test_coordinator_errors_reach_every_group_api(broker):
    """The coordinator raising COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS (its partition not
    loaded yet) is answered in each API's shape, never as a closed connection or UNKNOWN_SERVER_ERROR."""

    def unavailable(*args, **kwargs):
        raise errors.CoordinatorNotAvailableError("not loaded")

    def loading(*args, **kwargs):
        raise errors.CoordinatorLoadInProgressError("loading")

    coordinator = SimpleNamespace(
        node_id=1,
        handle_heartbeat=unavailable,
        handle_join_group=unavailable,
        handle_sync_group=unavailable,
        handle_leave_group=unavailable,
        handle_commit_offsets=loading,
        handle_fetch_offsets=loading,
        handle_delete_offsets=unavailable,
        describe_group=unavailable,
        delete_group=unavailable,
    )
    apis = group_apis(broker, coordinator)
    na, lip = errors.COORDINATOR_NOT_AVAILABLE, errors.COORDINATOR_LOAD_IN_PROGRESS
    assert apis.call(ApiKeys.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"})["error_code"] == na
    join = apis.call(
        ApiKeys.JOIN_GROUP,
        9,
        {
            "group_id": "g",
            "session_timeout_ms": 10_000,
            "rebalance_timeout_ms": 10_000,
            "member_id": "m",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )
    assert (join["error_code"], join["member_id"], join["generation_id"]) == (na, "m", -1)
    sync = apis.call(ApiKeys.SYNC_GROUP, 5, {"group_id": "g", "generation_id": 1, "member_id": "m", "assignments": []})
    assert sync["error_code"] == na
    leave = apis.call(ApiKeys.LEAVE_GROUP, 5, {"group_id": "g", "members": [{"member_id": "m"}]})
    assert (leave["error_code"], [m["error_code"] for m in leave["members"]]) == (na, [na])
    commit = apis.call(
        ApiKeys.OFFSET_COMMIT,
        9,
        {
            "group_id": "g",
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]},
                {"name": "gone", "partitions": [{"partition_index": 0, "committed_offset": 1}]},
            ],
        },
    )
    assert {(t["name"], p["error_code"]) for t in commit["topics"] for p in t["partitions"]} == {
        ("t", lip),
        ("gone", errors.UNKNOWN_TOPIC_OR_PARTITION),
    }
    fetch8 = apis.call(
        ApiKeys.OFFSET_FETCH, 8, {"groups": [{"group_id": "a", "topics": None}, {"group_id": "b", "topics": None}]}
    )
    assert [(g["group_id"], g["error_code"]) for g in fetch8["groups"]] == [("a", lip), ("b", lip)]
    fetch1 = apis.call(ApiKeys.OFFSET_FETCH, 1, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]})
    assert [p["error_code"] for p in fetch1["topics"][0]["partitions"]] == [lip]
    delete = apis.call(
        ApiKeys.OFFSET_DELETE, 0, {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}
    )
    assert (delete["error_code"], delete["topics"]) == (na, [])
    described = apis.call(ApiKeys.DESCRIBE_GROUPS, 5, {"groups": ["g"]})
    assert [(g["group_id"], g["error_code"]) for g in described["groups"]] == [("g", na)]
    deleted = apis.call(ApiKeys.DELETE_GROUPS, 2, {"groups_names": ["g", "h"]})
    assert [(r["group_id"], r["error_code"]) for r in deleted["results"]] == [("g", na), ("h", na)]


def test_group_handlers_turn_coordinator_results_into_responses_of_each_version(broker):
    """A real GroupCoordinator's JoinGroup/SyncGroup/LeaveGroup results, encoded at the request's version: a
    null protocol name is "" before JoinGroup v7; the leader gets the members' metadata."""
    from tests.unit.coordinator.harness import Harness, subscription

    harness = Harness()
    try:
        apis = group_apis(broker, harness.coordinator)
        join_body = {
            "group_id": "g",
            "session_timeout_ms": 10_000,
            "rebalance_timeout_ms": 10_000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription("t")}],
        }
        required = apis.call(ApiKeys.JOIN_GROUP, 6, join_body)
        assert (required["error_code"], required["protocol_name"], required["generation_id"]) == (
            errors.MEMBER_ID_REQUIRED,
            "",
            -1,
        )
        mid = required["member_id"]
        joined = apis.call(ApiKeys.JOIN_GROUP, 9, dict(join_body, member_id=mid))
        assert (joined["error_code"], joined["generation_id"], joined["leader"], joined["member_id"]) == (
            0,
            1,
            mid,
            mid,
        )
        assert (joined["protocol_type"], joined["protocol_name"], joined["skip_assignment"]) == (
            "consumer",
            "range",
            False,
        )
        assert [(m["member_id"], m["metadata"]) for m in joined["members"]] == [(mid, subscription("t"))]
        sync_body = {"group_id": "g", "generation_id": 1, "member_id": mid, "assignments": []}
        synced = apis.call(ApiKeys.SYNC_GROUP, 5, dict(sync_body, assignments=[{"member_id": mid, "assignment": b"a"}]))
        assert (synced["error_code"], synced["protocol_name"], synced["assignment"]) == (0, "range", b"a")
        stale = apis.call(ApiKeys.SYNC_GROUP, 3, dict(sync_body, generation_id=9))
        assert (stale["error_code"], stale["assignment"]) == (errors.ILLEGAL_GENERATION, b"")
        left = apis.call(ApiKeys.LEAVE_GROUP, 0, {"group_id": "g", "member_id": "nobody"})
        assert left["error_code"] == errors.UNKNOWN_MEMBER_ID
        left = apis.call(ApiKeys.LEAVE_GROUP, 3, {"group_id": "g", "members": [{"member_id": mid}]})
        assert (left["error_code"], [m["error_code"] for m in left["members"]]) == (0, [0])
    finally:
        harness.close()


def test_produce_answers_record_errors_of_the_append_result(broker):
    """The append's per-record errors reach Produce v8+ as ``record_errors`` with the error message (a keyless
    record on a compacted topic: INVALID_RECORD); a good partition of the same request keeps its offsets."""
    from pykbroker.record.memory_records_builder import MemoryRecordsBuilder

    broker.add_topic("c", 1, configs={"cleanup.policy": "compact"})
    keyless = MemoryRecordsBuilder()
    keyless.append(broker.time.milliseconds(), None, b"v")
    apis = produce_apis(broker)
    body = apis.call(ApiKeys.PRODUCE, 8, produce_body([("c", [(0, keyless.build())]), ("t", [(0, bytes(records(2)))])]))
    bad, good = (t["partition_responses"][0] for t in body["responses"])
    assert (bad["error_code"], bad["base_offset"], bad["log_start_offset"]) == (errors.INVALID_RECORD, -1, -1)
    assert [e["batch_index"] for e in bad["record_errors"]] == [0] and bad["error_message"]
    assert [e["batch_index_error_message"] for e in bad["record_errors"]] != [None]
    assert (good["error_code"], good["base_offset"], good["record_errors"], good["error_message"]) == (0, 0, [], None)


@pytest.mark.parametrize(
    ("topic_data", "walked"),
    [
        ([("t", [(0, "3")])], False),
        ([("t", [(0, "1"), (1, "2")]), ("nope", [(0, "1")])], False),
        ([("t", [(0, ""), (1, "1")])], False),  # INVALID_RECORD answered before the append
        ([("t", [(0, "1"), (0, "1")])], True),  # a partition named twice: one result, two answers
    ],
)
def test_produce_error_counts_equal_the_response_walk(broker, monkeypatch, topic_data, walked):
    """ErrorsPerSec of a Produce answer: the handler counts its results instead of walking the response, with the
    walk's counts; a request whose partitions and results differ in number is walked (both paths tested)."""
    import pykbroker.server.request_helper as request_helper

    walks = []

    def counting_walk(body):
        walks.append(body)
        return request_helper_walk(body)

    request_helper_walk = request_helper.error_counts
    monkeypatch.setattr(request_helper, "error_counts", counting_walk)
    apis = produce_apis(broker)
    sized = [(name, [(i, bytes(records(int(n))) if n else b"") for i, n in parts]) for name, parts in topic_data]
    for version in (9, 10):
        walks.clear()
        body = apis.call(ApiKeys.PRODUCE, version, produce_body(sized))
        assert apis.channel.errors[-1] == ("api0", request_helper_walk(body))
        assert bool(walks) is walked
