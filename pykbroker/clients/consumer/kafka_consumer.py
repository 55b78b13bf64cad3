"""KafkaConsumer: a minimal consumer (``org.apache.kafka.clients.consumer.KafkaConsumer``, assign mode).

    consumer = KafkaConsumer({"bootstrap.servers": "127.0.0.1:9092", "auto.offset.reset": "earliest"})
    consumer.assign([("topic", 0), ("topic", 1)])     # or consumer.assign_topic("topic")
    for record in consumer.poll(timeout_ms=1000): ...

What it does, as the console consumer and the tools need it: ``assign`` partitions, ``seek`` /
``seek_to_beginning`` / ``seek_to_end``, ``position``, and ``poll`` returning :class:`ConsumerRecord`
lists from Fetch requests (v12, full fetches: no KIP-227 session) sent to each partition's leader,
``fetch.min.bytes``, ``fetch.max.wait.ms``, ``fetch.max.bytes``, ``max.partition.fetch.bytes``,
``isolation.level``. A partition without a position starts from ``auto.offset.reset`` (earliest,
latest, none -> NoOffsetForPartitionError), resolved with ListOffsets; OFFSET_OUT_OF_RANGE resets the
same way; NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION refresh metadata. Control batches and
records below the fetch position are skipped. ``seek_to_beginning`` / ``seek_to_end`` are lazy, as in
Java: the offset is looked up by the next ``poll`` (or ``position``). A topic or partition without a
leader (missing topic, election in progress) is not an error: the consumer logs Kafka's WARN
``The metadata response from the cluster reported a recoverable issue with correlation id N :
{topic=ERROR}``, retries its metadata with a back-off (0.1 s doubling to 1 s) and keeps polling; Metadata
requests ask the broker to create missing topics when ``allow.auto.create.topics`` (default true, as in
Kafka) and the broker's ``auto.create.topics.enable`` allow it. ``subscribe`` joins ``group.id`` through the
:class:`~pykbroker.clients.consumer.consumer_coordinator.ConsumerCoordinator` (range assignment,
heartbeats from ``poll``, positions from the committed offsets; a subscribed topic that is missing gets
no partitions, and the consumer rejoins once a metadata refresh shows the subscribed topics' partition
counts changed -- every second while one is missing, else every ``metadata.max.age.ms``);
``enable.auto.commit`` commits the positions every ``auto.commit.interval.ms`` from ``poll`` and on
``close``; ``commit`` commits them now.

Threading: like Java's consumer, not thread-safe; one thread polls.
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.clients.consumer.consumer_coordinator import ConsumerCoordinator
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.record.control_record import ControlRecordType
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

FETCH_VERSION = 12
LIST_OFFSETS_VERSION = 7
METADATA_VERSION = 12
EARLIEST, LATEST = -2, -1


class NoOffsetForPartitionError(errors.KafkaError):
    """No position and ``auto.offset.reset=none`` (Kafka's NoOffsetForPartitionException)."""


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: list


_DEFAULTS: dict[str, Any] = {  # values of any type, as a user's configs
    "bootstrap.servers": None,
    "client.id": "",
    "group.id": None,
    "auto.offset.reset": "latest",
    "fetch.min.bytes": 1,
    "fetch.max.wait.ms": 500,
    "fetch.max.bytes": 52428800,
    "max.partition.fetch.bytes": 1048576,
    "isolation.level": "read_uncommitted",
    "request.timeout.ms": 30000,
    "check.crcs": True,
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5000,
    "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000,
    "max.poll.interval.ms": 300000,
    "allow.auto.create.topics": True,
    "metadata.max.age.ms": 300000,
}
_LEADER_BACKOFF_MS, _LEADER_BACKOFF_MAX_MS = 100, 1000
_BOOTSTRAP_NODE = -1  # key of the bootstrap connection in ``_conns`` (brokers have ids >= 0)


class KafkaConsumer:
    def __init__(self, configs: dict | None = None, time: Time = SYSTEM, **kwargs):
        self.time = time
        conf = dict(_DEFAULTS)
        conf.update(configs or {})
        conf.update({k.replace("_", "."): v for k, v in kwargs.items()})
        if not conf["bootstrap.servers"]:
            raise ValueError('Missing required configuration "bootstrap.servers" which has no default value.')
        self.config = conf
        self.bootstrap = [b.strip() for b in str(conf["bootstrap.servers"]).split(",") if b.strip()]
        self.client_id = conf["client.id"] or "consumer"
        self.reset = str(conf["auto.offset.reset"]).lower()
        if self.reset not in ("earliest", "latest", "none"):
            raise ValueError(f"Invalid value {self.reset} for configuration auto.offset.reset")
        self.isolation = 1 if conf["isolation.level"] == "read_committed" else 0
        self.timeout = int(conf["request.timeout.ms"]) / 1000.0
        self.assignment: list[tuple[str, int]] = []
        self.positions: dict[tuple[str, int], int] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.partition_counts: dict[str, int] = {}
        self._conns: dict[int, BrokerConnection] = {}
        self._closed = False
        self.subscription: list[str] = []
        self.coordinator: ConsumerCoordinator | None = None
        self.auto_commit = str(conf["enable.auto.commit"]).lower() == "true"
        self.auto_commit_interval_ms = int(conf["auto.commit.interval.ms"])
        self._next_auto_commit_ms = 0  # deadlines: ms on self.time (hi_res_milliseconds)
        self.allow_auto_create = str(conf["allow.auto.create.topics"]).lower() == "true"
        self.metadata_max_age_ms = int(conf["metadata.max.age.ms"])
        self._pending_reset: dict[tuple[str, int], int] = {}  # lazy seek_to_beginning / seek_to_end
        self._leader_backoff_ms = _LEADER_BACKOFF_MS
        self._next_leader_refresh_ms = 0
        self._subscribed_counts: dict[str, int] | None = None
        self._next_subscription_check_ms = 0
        context = {"clientId": self.client_id}
        if conf["group.id"]:
            context["groupId"] = conf["group.id"]
        self.log = get_logger("Consumer", **context)

    # -- groups ------------------------------------------------------------------------------------------
    def subscribe(self, topics: list[str]) -> None:
        """Join ``group.id`` for ``topics`` (the assignment arrives with the next ``poll``).
        Raises InvalidGroupIdError without a ``group.id``."""
        if not self.config["group.id"]:
            raise errors.InvalidGroupIdError(
                "To use the group management or offset commit APIs, you must "
                "provide a valid group.id in the consumer configuration."
            )
        self.subscription = list(topics)
        if self.coordinator is None:
            self.coordinator = ConsumerCoordinator(
                self,
                self.config["group.id"],
                int(self.config["session.timeout.ms"]),
                int(self.config["max.poll.interval.ms"]),
                int(self.config["heartbeat.interval.ms"]),
            )
        self.coordinator.needs_join = True

    def _maybe_rebalance(self) -> None:
        coordinator = self.coordinator
        if coordinator is None or not self.subscription:
            return
        coordinator.maybe_heartbeat()
        if coordinator.needs_join and self.auto_commit and self.assignment:
            try:
                self.commit()
            except errors.KafkaError:
                pass
        assignment = coordinator.ensure_active_group(self.subscription)
        if assignment is None:
            self._maybe_check_subscription(coordinator)
            return
        self.assignment = assignment
        self.positions = {}
        self._pending_reset = {}
        if assignment:
            self.positions.update(coordinator.fetch_committed(assignment))
        self._subscribed_counts = self._subscription_counts()
        self._schedule_subscription_check()
        self._next_auto_commit_ms = self.time.hi_res_milliseconds() + self.auto_commit_interval_ms

    def _subscription_counts(self) -> dict[str, int]:
        """Partition count of every subscribed topic (0 when missing), from fresh metadata."""
        self._refresh_metadata(sorted(self.subscription))
        return {t: self.partition_counts.get(t, 0) for t in self.subscription}

    def _schedule_subscription_check(self) -> None:
        missing = any(not n for n in (self._subscribed_counts or {}).values())
        self._next_subscription_check_ms = self.time.hi_res_milliseconds() + (
            1000 if missing else self.metadata_max_age_ms
        )

    def _maybe_check_subscription(self, coordinator) -> None:
        """Java's metadata listener: rejoin when a subscribed topic appears or changes its partition count."""
        if self.time.hi_res_milliseconds() < self._next_subscription_check_ms:
            return
        counts = self._subscription_counts()
        if counts != self._subscribed_counts:
            coordinator.needs_join = True
        self._subscribed_counts = counts
        self._schedule_subscription_check()

    def partition_counts_of(self, topics: list[str]) -> dict[str, int]:
        """``{topic: partition count}`` of the ``topics`` that exist (fresh metadata); missing ones are left out."""
        self._refresh_metadata(sorted(topics))
        return {t: self.partition_counts[t] for t in topics if self.partition_counts.get(t)}

    def commit(self, offsets: dict | None = None) -> None:
        """Commit ``{(topic, partition): offset}`` (default: the current positions) to the group."""
        if self.coordinator is None:
            raise errors.InvalidGroupIdError("commit needs subscribe() with a group.id")
        self.coordinator.commit(
            dict(offsets)
            if offsets is not None
            else {tp: off for tp, off in self.positions.items() if tp in self.assignment}
        )

    # -- metadata and connections ----------------------------------------------------------------------
    def _bootstrap_connection(self) -> BrokerConnection:
        for conn in self._conns.values():
            return conn
        last: Exception | None = None
        for address in self.bootstrap:  # every bootstrap.servers entry in turn, as Kafka's clients do
            try:
                conn = BrokerConnection.to(address, client_id=self.client_id, timeout=self.timeout)
            except OSError as e:
                last = e
                continue
            self._conns[_BOOTSTRAP_NODE] = conn  # kept (correlation ids go on) until it fails or close()
            return conn
        raise ConnectionError(f"could not connect to any of {self.bootstrap}: {last}")

    def _refresh_metadata(self, topics: list[str]) -> None:
        conn = self._bootstrap_connection()
        try:
            correlation_id = conn.send(
                ApiKeys.METADATA,
                METADATA_VERSION,
                {
                    "topics": [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
                    "allow_auto_topic_creation": self.allow_auto_create,
                    "include_topic_authorized_operations": False,
                },
            )
            response = conn.receive()[1]
        except OSError:
            if conn in self._conns.values():
                self._drop_connection(next(n for n, c in self._conns.items() if c is conn))
            raise
        finally:
            if conn not in self._conns.values():
                conn.close()
        self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}
        problems = {}
        for t in response["topics"]:
            name = t["name"]
            if t["error_code"] != errors.NONE:
                problems[name] = errors.name_of(t["error_code"])
                self.partition_counts.pop(name, None)
                for tp in [tp for tp in self.leaders if tp[0] == name]:
                    del self.leaders[tp]
                continue
            self.partition_counts[name] = len(t["partitions"])
            for p in t["partitions"]:
                self.leaders[(name, p["partition_index"])] = p["leader_id"]
                if p["error_code"] != errors.NONE:
                    problems[f"{name}-{p['partition_index']}"] = errors.name_of(p["error_code"])
        if problems:
            self.log.warning(
                "The metadata response from the cluster reported a recoverable issue with correlation id "
                f"{correlation_id} : {{{', '.join(f'{k}={v}' for k, v in problems.items())}}}"
            )

    def _leader(self, tp: tuple[str, int]) -> int:
        """The partition's leader, -1 if unknown; refreshes metadata for it with a back-off (0.1 s .. 1 s)."""
        leader = self.leaders.get(tp, -1)
        if leader >= 0:
            return leader
        now = self.time.hi_res_milliseconds()
        if now < self._next_leader_refresh_ms:
            return -1
        self._refresh_metadata([tp[0]])
        leader = self.leaders.get(tp, -1)
        if leader >= 0:
            self._leader_backoff_ms = _LEADER_BACKOFF_MS
            self._next_leader_refresh_ms = 0
        else:
            self._next_leader_refresh_ms = now + self._leader_backoff_ms
            self._leader_backoff_ms = min(self._leader_backoff_ms * 2, _LEADER_BACKOFF_MAX_MS)
        return leader

    def _connection(self, node: int) -> BrokerConnection:
        conn = self._conns.get(node)
        if conn is None:
            host, port = self.brokers[node]
            conn = self._conns[node] = BrokerConnection(host, port, client_id=self.client_id, timeout=self.timeout)
        return conn

    def _drop_connection(self, node: int) -> None:
        conn = self._conns.pop(node, None)
        if conn is not None:
            conn.close()

    def partitions_for_topic(self, topic: str) -> list[int]:
        self._refresh_metadata([topic])
        n = self.partition_counts.get(topic)
        if not n:
            raise errors.UnknownTopicOrPartitionError(f"Topic {topic} not found")
        return list(range(n))

    # -- assignment and positions -----------------------------------------------------------------------
    def assign(self, partitions) -> None:
        """Assign ``[(topic, partition), ...]`` (replaces the previous assignment)."""
        self.assignment = [(t, int(p)) for t, p in partitions]
        self.positions = {tp: off for tp, off in self.positions.items() if tp in self.assignment}
        self._refresh_metadata(sorted({t for t, _ in self.assignment}))

    def assign_topic(self, topic: str) -> None:
        self.assign([(topic, p) for p in self.partitions_for_topic(topic)])

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self.positions[(topic, partition)] = offset

    def seek_to_beginning(self, partitions=None) -> None:
        """Lazily: the next ``poll`` / ``position`` looks up the earliest offsets."""
        for tp in partitions or self.assignment:
            self.positions.pop(tp, None)
            self._pending_reset[tp] = EARLIEST

    def seek_to_end(self, partitions=None) -> None:
        """Lazily: the next ``poll`` / ``position`` looks up the latest offsets."""
        for tp in partitions or self.assignment:
            self.positions.pop(tp, None)
            self._pending_reset[tp] = LATEST

    def position(self, topic: str, partition: int) -> int:
        """Raises LeaderNotAvailableError when the offset cannot be looked up (no leader) right now."""
        tp = (topic, partition)
        if tp not in self.positions:
            self._reset_positions([tp])
        if tp not in self.positions:
            raise errors.LeaderNotAvailableError(f"no leader for {tp}")
        return self.positions[tp]

    def end_offsets(self, partitions) -> dict:
        return self._list_offsets(partitions, LATEST)

    def beginning_offsets(self, partitions) -> dict:
        return self._list_offsets(partitions, EARLIEST)

    def _list_offsets(self, partitions, timestamp: int) -> dict:
        """Offsets of the ``partitions`` whose leaders are known and answer; the others are left out."""
        by_leader: dict[int, list] = {}
        for tp in partitions:
            leader = self._leader(tp)
            if leader >= 0:
                by_leader.setdefault(leader, []).append(tp)
        out = {}
        for leader, tps in by_leader.items():
            topics: dict[str, list] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                )
            response = self._connection(leader).request(
                ApiKeys.LIST_OFFSETS,
                LIST_OFFSETS_VERSION,
                {
                    "replica_id": -1,
                    "isolation_level": self.isolation,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                },
            )
            for t in response["topics"]:
                for p in t["partitions"]:
                    tp = (t["name"], p["partition_index"])
                    code = p["error_code"]
                    if code != errors.NONE:
                        if getattr(errors.for_code(code), "retriable", False):
                            self.leaders.pop(tp, None)  # look the leader up again, retry on the next poll
                            continue
                        raise errors.for_code(code)(f"ListOffsets {t['name']}-{p['partition_index']}")
                    out[tp] = p["offset"]
        return out

    def _reset_positions(self, tps) -> None:
        by_strategy: dict[int, list] = {}
        default = EARLIEST if self.reset == "earliest" else LATEST
        for tp in tps:
            strategy = self._pending_reset.get(tp)
            if strategy is None:
                if self.reset == "none":
                    raise NoOffsetForPartitionError(f"Undefined offset with no reset policy for partitions: {tps}")
                strategy = default
            by_strategy.setdefault(strategy, []).append(tp)
        for strategy, group in by_strategy.items():
            for tp, off in self._list_offsets(group, strategy).items():
                self.positions[tp] = off
                self._pending_reset.pop(tp, None)

    # -- fetching -----------------------------------------------------------------------------------------
    def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """Records from the assigned partitions (waits up to ``timeout_ms`` for at least one)."""
        if self._closed:
            raise RuntimeError("This consumer has already been closed.")
        deadline_ms = self.time.hi_res_milliseconds() + int(timeout_ms)
        while True:
            self._maybe_rebalance()
            if (
                self.auto_commit
                and self.coordinator is not None
                and self.time.hi_res_milliseconds() >= self._next_auto_commit_ms
            ):
                self._next_auto_commit_ms = self.time.hi_res_milliseconds() + self.auto_commit_interval_ms
                try:
                    self.commit()
                except errors.KafkaError:
                    pass
            missing = [tp for tp in self.assignment if tp not in self.positions]
            if missing:
                self._reset_positions(missing)
            if not self.assignment:
                self.time.sleep(min(50, max(0, deadline_ms - self.time.hi_res_milliseconds())))
                records = []
            else:
                records = self._fetch_once(max(0, min(deadline_ms - self.time.hi_res_milliseconds(), 1000)))
            if records or self.time.hi_res_milliseconds() >= deadline_ms:
                return records

    def _fetch_once(self, max_wait_ms: int) -> list[ConsumerRecord]:
        by_leader: dict[int, list] = {}
        for tp in self.assignment:
            if tp not in self.positions:
                continue
            leader = self._leader(tp)
            if leader >= 0:
                by_leader.setdefault(leader, []).append(tp)
        if not by_leader:
            self.time.sleep(min(_LEADER_BACKOFF_MS, max_wait_ms))  # nothing fetchable yet: no busy loop
            return []
        records: list[ConsumerRecord] = []
        wait = min(max_wait_ms, int(self.config["fetch.max.wait.ms"]))
        for leader, tps in by_leader.items():
            topics: dict[str, list] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(
                    {
                        "partition": p,
                        "current_leader_epoch": -1,
                        "fetch_offset": self.positions[(t, p)],
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": int(self.config["max.partition.fetch.bytes"]),
                    }
                )
            try:
                response = self._connection(leader).request(
                    ApiKeys.FETCH,
                    FETCH_VERSION,
                    {
                        "replica_id": -1,
                        "max_wait_ms": wait,
                        "min_bytes": int(self.config["fetch.min.bytes"]),
                        "max_bytes": int(self.config["fetch.max.bytes"]),
                        "isolation_level": self.isolation,
                        "session_id": 0,
                        "session_epoch": -1,
                        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                        "forgotten_topics_data": [],
                        "rack_id": "",
                    },
                )
            except OSError:
                self._drop_connection(leader)
                self._refresh_metadata(sorted({t for t, _ in tps}))
                continue
            for t in response["responses"]:
                for p in t["partitions"]:
                    records += self._handle_partition(t["topic"], p)
        return records

    def _handle_partition(self, topic: str, p: dict) -> list[ConsumerRecord]:
        tp = (topic, p["partition_index"])
        code = p["error_code"]
        if code == errors.OFFSET_OUT_OF_RANGE:
            self.positions.pop(tp, None)
            self._reset_positions([tp])
            return []
        if code in (errors.NOT_LEADER_OR_FOLLOWER, errors.UNKNOWN_TOPIC_OR_PARTITION, errors.FENCED_LEADER_EPOCH):
            self._refresh_metadata([topic])
            return []
        if code != errors.NONE:
            raise errors.for_code(code)(f"Fetch {topic}-{p['partition_index']}")
        data = p["records"]
        if not data:
            return []
        position = self.positions[tp]
        out = []
        verify = bool(self.config["check.crcs"])
        # read_committed: the response lists the aborted transactions overlapping it; their batches are
        # skipped until the producer's ABORT marker (Java's CompletedFetch.nextFetchedRecord).
        aborted = sorted(p.get("aborted_transactions") or (), key=lambda a: a["first_offset"])
        aborted_pids: set[int] = set()
        next_aborted = 0
        for _, batch in iter_batches(memoryview(data)):
            if batch.last_offset < position:
                continue
            if aborted and batch.producer_id >= 0:
                while next_aborted < len(aborted) and aborted[next_aborted]["first_offset"] <= batch.last_offset:
                    aborted_pids.add(aborted[next_aborted]["producer_id"])
                    next_aborted += 1
                if batch.producer_id in aborted_pids:
                    if batch.is_control_batch:
                        if any(
                            r.key is not None and ControlRecordType.parse(r.key) is ControlRecordType.ABORT
                            for r in batch.records()
                        ):
                            aborted_pids.discard(batch.producer_id)
                        position = batch.next_offset
                        continue
                    if batch.is_transactional:
                        position = batch.next_offset
                        continue
            if batch.is_control_batch:
                position = batch.next_offset
                continue
            ts_type = batch.timestamp_type
            for r in batch.records(verify_crc=verify):
                if r.offset >= position:
                    out.append(ConsumerRecord(topic, tp[1], r.offset, r.timestamp, ts_type, r.key, r.value, r.headers))
            position = batch.next_offset
        self.positions[tp] = position
        return out

    def close(self) -> None:
        if self.coordinator is not None and not self._closed:
            try:
                if self.auto_commit and self.assignment:
                    self.commit()
                self.coordinator.leave()
            except (errors.KafkaError, OSError):
                pass
        self._closed = True
        for node in list(self._conns):
            self._drop_connection(node)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
