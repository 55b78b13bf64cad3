"""In-process harness for KafkaApis and its handler families: requests built and decoded through the
real codec, responses captured from a recording RequestChannel and decoded back."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import ClassVar

from pykbroker.config.kafka_config_def import BROKER_CONFIG_DEF
from pykbroker.network.request_channel import (
    CloseConnectionResponse,
    NoOpResponse,
    Request,
    RequestContext,
    SendResponse,
)
from pykbroker.protocol import (
    codec,
    decode_request,
    decode_response,
    parse_response_header,
    request_schema,
    response_schema,
)
from pykbroker.protocol.header import RequestHeader, request_header_version, response_header_version
from pykbroker.security.delegation_token_cache import DelegationTokenCache
from pykbroker.server.request_helper import RequestHelper
from pykbroker.utils.time import MockTime


class RecordingChannel:
    """The RequestChannel side KafkaApis talks to: records every response instead of queueing it."""

    def __init__(self):
        self.responses: list = []
        self.errors: list[tuple[str, dict[int, int]]] = []  # (api name, error counts) per response sent

    def update_error_metrics(self, api: str, error_counts: dict[int, int]) -> None:
        self.errors.append((api, error_counts))

    def send_response(self, response) -> None:
        self.responses.append(response)

    def send_no_op_response(self, request) -> None:
        self.responses.append(NoOpResponse(request))

    def close_connection(self, request) -> None:
        self.responses.append(CloseConnectionResponse(request))


def recording_helper() -> tuple[RequestHelper, RecordingChannel]:
    channel = RecordingChannel()
    return RequestHelper(lambda request: channel), channel


def make_request(
    api_key: int,
    version: int,
    body: dict | None,
    correlation_id: int = 7,
    client_id: str = "test",
    listener: str = "PLAINTEXT",
    unsupported_version: bool = False,
) -> Request:
    """A Request as the Processor builds it: ``body`` is encoded then decoded with the real codec (so it
    holds every field of ``version`` with the codec's types: memoryviews for records...)."""
    if body is not None and not unsupported_version:
        schema = request_schema(api_key)
        body = decode_request(api_key, version, codec.encode(schema, version, body))
    header = RequestHeader(
        api_key=api_key,
        api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
        header_version=request_header_version(api_key, version),
    )
    context = RequestContext(header, "127.0.0.1:9092-127.0.0.1:50000-0", "127.0.0.1", 50000, listener, "PLAINTEXT")
    return Request(0, context, body, None, 0, f"api{api_key}", 0, unsupported_version)


def response_bytes(response: SendResponse) -> bytes:
    """The frame a SendResponse would write (deferred record regions read back)."""
    return b"".join(
        bytes(p) if isinstance(p, (bytes, bytearray, memoryview)) else p.read_bytes() for p in response.send.parts
    )


def decode_sent(response: SendResponse, api_key: int, version: int) -> tuple[int, dict]:
    """``(correlation_id, body)`` of a SendResponse, checking the size prefix."""
    frame = response_bytes(response)
    size = int.from_bytes(frame[:4], "big", signed=True)
    assert size == len(frame) - 4
    correlation_id, offset = parse_response_header(frame[4:], response_header_version(api_key, version))
    return correlation_id, decode_response(api_key, version, frame[4 + offset :])


def only_response(channel: RecordingChannel):
    assert len(channel.responses) == 1, channel.responses
    return channel.responses.pop()


# -- minimal requests built from the schema ----------------------------------------------------------------

_SAMPLES = {
    "int8": 1,
    "int16": 1,
    "int32": 1,
    "int64": 1,
    "uint16": 1,
    "uint32": 1,
    "float64": 0.0,
    "bool": False,
    "string": "x",
    "bytes": b"x",
    "records": b"",
    "uuid": uuid.UUID(int=1),
}


def minimal_body(api_key: int, version: int) -> dict:
    """A valid request of ``api_key`` at ``version`` with one entry in every array (so per-topic,
    per-partition and per-group answers have something to mirror) and non-null values."""
    return _fields(request_schema(api_key).fields, version)


def _fields(fields, version: int) -> dict:
    out = {}
    for f in fields:
        if version not in f.versions:
            continue
        if f.type == "array":
            out[f.name] = [_fields(f.fields, version) if f.element == "struct" else _SAMPLES[f.element]]
        elif f.type == "struct":
            out[f.name] = _fields(f.fields, version)
        else:
            out[f.name] = _SAMPLES[f.type]
    return out


def error_codes(api_key: int, version: int, body: dict) -> list[int]:
    """Every ``error_code`` a decoded response of ``version`` carries on the wire (the decoder also fills
    fields the version lacks with their defaults: those are skipped)."""
    return _codes(response_schema(api_key).fields, version, body)


def _codes(fields, version: int, value: dict) -> list[int]:
    found = []
    for f in fields:
        if version not in f.versions or value.get(f.name) is None:
            continue
        if f.name in ("error_code", "partition_error_code"):
            found.append(value[f.name])
        elif f.type == "array" and f.element == "struct":
            for entry in value[f.name]:
                found.extend(_codes(f.fields, version, entry))
        elif f.type == "struct":
            found.extend(_codes(f.fields, version, value[f.name]))
    return found


# -- the broker's KafkaApis with every handler family, on stand-in components ------------------------------


def broker_apis(
    helper,
    replica_manager=None,
    metadata_cache=None,
    controller=None,
    group_coordinator=None,
    config=None,
    time=None,
    node_id: int = 1,
):
    """``(KafkaApis, ApiVersionManager)`` as ``BrokerServer`` builds them for the data plane (its own
    ``_broker_families`` and ``build_apis``), on the given (or stand-in) components."""
    from pykbroker.metadata.features_publisher import UNKNOWN_FEATURES
    from pykbroker.server.broker_server import BrokerServer
    from pykbroker.server.server_common import build_apis

    time = time or MockTime()
    server = SimpleNamespace(
        node_id=node_id,
        time=time,
        data_helper=helper,
        metadata_cache=metadata_cache or SimpleNamespace(),
        replica_manager=replica_manager or SimpleNamespace(),
        controller_handle=controller or SimpleNamespace(),
        log_manager=SimpleNamespace(default_config=None),
        producer_id_manager=SimpleNamespace(),
        group_coordinator=group_coordinator or SimpleNamespace(node_id=node_id),
        txn_coordinator=None,
        share_coordinator=None,
        share_partition_manager=SimpleNamespace(),
        config=config
        or {
            "auto.create.topics.enable": False,
            "max.incremental.fetch.session.cache.slots": 1000,
            "max.request.partition.size.limit": 2000,
        },
        metrics=None,
        dynamic_config=None,
        shared=SimpleNamespace(raft=None, controller_channel=None, time=time, cluster_id=None),
        is_controller=True,
        _voter_endpoints=lambda: {},
        delegation_tokens=DelegationTokenCache(None),
    )
    families = BrokerServer._broker_families(server)
    return build_apis(node_id, helper, time, families, lambda: UNKNOWN_FEATURES)


# -- a broker's data path in process: LogManager on tmp_path, ReplicaManager, MetadataCache ----------------


class LocalBroker:
    """Node 1 (listener PLAINTEXT at 127.0.0.1:9092) hosting the topics given to :meth:`add_topic` as
    leader, with its logs under ``log_dir``; MockTime and MockScheduler, so nothing runs behind the
    test's back except the purgatories' reapers (which only expire operations when MockTime moves)."""

    CONFIG: ClassVar[dict] = {
        **BROKER_CONFIG_DEF.parse({}),
        "producer.purgatory.purge.interval.requests": 1000,
        "fetch.purgatory.purge.interval.requests": 1000,
        "fetch.max.bytes": 1 << 20,
    }

    def __init__(self, log_dir, node_id: int = 1, **log_props):
        import time as _time

        from pykbroker.log.log_manager import LogManager
        from pykbroker.metadata.image import BrokerRegistration, Endpoint, MetadataImage
        from pykbroker.server.metadata_cache import MetadataCache
        from pykbroker.server.replica_manager import ReplicaManager
        from pykbroker.utils.scheduler import MockScheduler

        self.node_id = node_id
        self.time = MockTime(current_ms=int(_time.time() * 1000))
        self.log_manager = LogManager.from_broker_config(
            [str(log_dir)], dict(log_props), MockScheduler(self.time), self.time
        )
        self.log_manager.startup()
        broker = BrokerRegistration(
            id=node_id,
            epoch=1,
            incarnation_id=uuid.UUID(int=7),
            listeners={"PLAINTEXT": Endpoint("PLAINTEXT", "127.0.0.1", 9092, 0)},
            fenced=False,
        )
        self.cache = MetadataCache(node_id, MetadataImage(cluster_id="test-cluster", brokers={node_id: broker}))
        self.replica_manager = ReplicaManager(node_id, self.CONFIG, self.log_manager, self.cache, self.time)
        self.topic_ids: dict[str, uuid.UUID] = {}

    def add_topic(
        self,
        name: str,
        partitions: int = 1,
        replicas: tuple[int, ...] | None = None,
        isr: tuple[int, ...] | None = None,
        leader_epoch: int = 0,
        configs: dict | None = None,
    ) -> uuid.UUID:
        """Publish ``name`` in the metadata image and make this broker its leader (``apply_delta``)."""
        import dataclasses

        from pykbroker.metadata.image import TopicImage, TopicsImage
        from pykbroker.metadata.partition_registration import PartitionRegistration

        topic_id = self.topic_ids.get(name) or uuid.uuid4()
        self.topic_ids[name] = topic_id
        replicas = replicas or (self.node_id,)
        reg = PartitionRegistration(
            replicas=replicas, isr=isr or replicas, leader=self.node_id, leader_epoch=leader_epoch
        )
        topic = TopicImage(name, topic_id, {i: reg for i in range(partitions)})
        image = self.cache.image
        topics = TopicsImage({**image.topics.by_id, topic_id: topic}, {**image.topics.by_name, name: topic})
        all_configs = dict(image.configs)
        if configs:
            all_configs[(2, name)] = dict(configs)
            self.log_manager.update_topic_config(name, dict(configs))
        self.cache.set_image(dataclasses.replace(image, topics=topics, configs=all_configs))
        self.replica_manager.apply_delta(
            SimpleNamespace(
                deletes=set(), followers={}, leaders={(name, i): (topic_id, reg) for i in range(partitions)}
            ),
            None,
        )
        return topic_id

    def set_isr(self, name: str, partition: int, isr: tuple[int, ...], leader_epoch: int = 0) -> None:
        from pykbroker.metadata.partition_registration import PartitionRegistration

        reg = PartitionRegistration(
            replicas=tuple(sorted(set(isr) | {self.node_id})), isr=isr, leader=self.node_id, leader_epoch=leader_epoch
        )
        self.replica_manager.apply_delta(
            SimpleNamespace(deletes=set(), followers={}, leaders={(name, partition): (self.topic_ids[name], reg)}), None
        )

    def close(self) -> None:
        self.replica_manager.shutdown()
        self.log_manager.shutdown()


def records(n: int = 3, timestamp: int | None = None, start: int = 0) -> memoryview:
    """A record batch of ``n`` records ``k<i>``/``v<i>`` (timestamps ``timestamp + i``)."""
    import time as _time

    from pykbroker.record.memory_records_builder import MemoryRecordsBuilder

    ts = int(_time.time() * 1000) if timestamp is None else timestamp
    b = MemoryRecordsBuilder()
    for i in range(start, start + n):
        b.append(ts + i - start, b"k%d" % i, b"v%d" % i)
    return memoryview(bytearray(b.build()))
