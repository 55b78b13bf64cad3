"""ConsumerCoordinator: a consumer's group membership (``org.apache.kafka.clients.consumer.internals.
ConsumerCoordinator`` over ``AbstractCoordinator``), classic protocol, range assignment.

``ensure_active_group`` finds the coordinator (FindCoordinator), joins (JoinGroup, repeating once
with the member id the broker hands out under KIP-394), and, as leader, computes the range
assignment (``RangeAssignor``: per topic, partitions split in contiguous ranges over the sorted
member ids) that SyncGroup distributes. ``maybe_heartbeat`` sends a Heartbeat every
``heartbeat.interval.ms``; REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID mark the
group for rejoining. ``commit`` / ``fetch_committed`` use OffsetCommit v8 / OffsetFetch v7. The
subscription and assignment use ConsumerProtocol v0 bytes. Coordinator errors are retried for up to 30 s
(Java's ``default.api.timeout.ms``): COORDINATOR_LOAD_IN_PROGRESS (the coordinator is loading the group's
partition) on the same connection, NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE after looking the
coordinator up again.

Threading: used by the consumer's polling thread only (blocking requests with timeouts).
"""

from __future__ import annotations

import struct

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys

_REJOIN = {errors.REBALANCE_IN_PROGRESS, errors.ILLEGAL_GENERATION, errors.UNKNOWN_MEMBER_ID}
_FIND_AGAIN = {errors.NOT_COORDINATOR, errors.COORDINATOR_NOT_AVAILABLE}
_RETRY_MS, _RETRY_BACKOFF_MS = 30000, 100


def encode_subscription(topics: list[str]) -> bytes:
    out = [struct.pack(">hi", 0, len(topics))]
    for t in topics:
        b = t.encode()
        out.append(struct.pack(">h", len(b)) + b)
    out.append(struct.pack(">i", -1))
    return b"".join(out)


def decode_subscription(data: bytes) -> list[str]:
    (_, n), pos, topics = struct.unpack_from(">hi", data, 0), 6, []
    for _ in range(n):
        (length,) = struct.unpack_from(">h", data, pos)
        topics.append(bytes(data[pos + 2 : pos + 2 + length]).decode())
        pos += 2 + length
    return topics


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    out = [struct.pack(">hi", 0, len(partitions))]
    for t, ps in sorted(partitions.items()):
        b = t.encode()
        out.append(
            struct.pack(">h", len(b)) + b + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
        )
    out.append(struct.pack(">i", -1))
    return b"".join(out)


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    if not data:
        return []
    (_, n), pos, out = struct.unpack_from(">hi", data, 0), 6, []
    for _ in range(n):
        (length,) = struct.unpack_from(">h", data, pos)
        topic = bytes(data[pos + 2 : pos + 2 + length]).decode()
        pos += 2 + length
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(count):
            out.append((topic, struct.unpack_from(">i", data, pos)[0]))
            pos += 4
    return out


def range_assign(
    subscriptions: dict[str, list[str]], partition_counts: dict[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: ``{member: {topic: [partitions]}}``."""
    result: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    topics = sorted({t for ts in subscriptions.values() for t in ts})
    for topic in topics:
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        n = partition_counts.get(topic, 0)
        per, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            count = per + (1 if i < extra else 0)
            if count:
                result[m][topic] = list(range(start, start + count))
            start += count
    return result


class ConsumerCoordinator:
    def __init__(
        self, consumer, group_id: str, session_timeout_ms: int, rebalance_timeout_ms: int, heartbeat_interval_ms: int
    ):
        self.consumer = consumer
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.time = consumer.time
        self.conn: BrokerConnection | None = None
        self.member_id = ""
        self.generation = -1
        self.needs_join = True
        self.last_heartbeat_ms = 0  # on the consumer's Time (hi_res_milliseconds)

    # -- coordinator connection -----------------------------------------------------------------------
    def _coordinator(self) -> BrokerConnection:
        if self.conn is not None:
            return self.conn
        deadline_ms = self.time.hi_res_milliseconds() + 30000
        while True:
            conn = self.consumer._bootstrap_connection()
            try:
                r = conn.request(ApiKeys.FIND_COORDINATOR, 3, {"key": self.group_id, "key_type": 0})
            finally:
                if conn not in self.consumer._conns.values():
                    conn.close()
            if r["error_code"] == errors.NONE:
                self.conn = BrokerConnection(
                    r["host"],
                    r["port"],
                    client_id=self.consumer.client_id,
                    timeout=max(30.0, self.rebalance_timeout_ms / 1000.0 + 5),
                )
                return self.conn
            if self.time.hi_res_milliseconds() > deadline_ms:
                raise errors.for_code(r["error_code"])(f"FindCoordinator for {self.group_id}")
            self.time.sleep(100)

    def _request(self, api_key: int, version: int, body: dict) -> dict:
        try:
            return self._coordinator().request(api_key, version, body)
        except OSError:
            self.close_connection()
            raise

    def _request_retrying(self, api_key: int, version: int, body: dict, code_of) -> dict:
        """``_request``, again while ``code_of(response)`` is a coordinator error (see the module doc)."""
        deadline_ms = self.time.hi_res_milliseconds() + _RETRY_MS
        while True:
            r = self._request(api_key, version, body)
            code = code_of(r)
            if code not in _FIND_AGAIN and code != errors.COORDINATOR_LOAD_IN_PROGRESS:
                return r
            if self.time.hi_res_milliseconds() > deadline_ms:
                return r
            if code in _FIND_AGAIN:
                self.close_connection()
            self.time.sleep(_RETRY_BACKOFF_MS)

    def close_connection(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # -- membership -----------------------------------------------------------------------------------
    def ensure_active_group(self, topics: list[str]) -> list[tuple[str, int]] | None:
        """Join (and sync) if needed; returns the new assignment, or None if nothing changed."""
        if not self.needs_join:
            return None
        for _ in range(20):
            join = self._request(
                ApiKeys.JOIN_GROUP,
                5,
                {
                    "group_id": self.group_id,
                    "session_timeout_ms": self.session_timeout_ms,
                    "rebalance_timeout_ms": self.rebalance_timeout_ms,
                    "member_id": self.member_id,
                    "group_instance_id": None,
                    "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": encode_subscription(topics)}],
                },
            )
            code = join["error_code"]
            if code == errors.MEMBER_ID_REQUIRED:
                self.member_id = join["member_id"]
                continue
            if code in (errors.UNKNOWN_MEMBER_ID, errors.ILLEGAL_GENERATION):
                self.member_id = ""
                continue
            if code in _FIND_AGAIN or code in (errors.REBALANCE_IN_PROGRESS, errors.COORDINATOR_LOAD_IN_PROGRESS):
                self.close_connection() if code in _FIND_AGAIN else None
                self.time.sleep(100)
                continue
            if code != errors.NONE:
                raise errors.for_code(code)(f"JoinGroup {self.group_id}")
            self.member_id, self.generation = join["member_id"], join["generation_id"]
            assignments = []
            if join["leader"] == self.member_id:
                subscriptions = {m["member_id"]: decode_subscription(m["metadata"]) for m in join["members"]}
                # Topics missing from the metadata get no partitions (Java's ConsumerCoordinator assigns
                # from the cluster metadata it has); the consumer rejoins once they appear.
                counts = self.consumer.partition_counts_of(sorted({t for ts in subscriptions.values() for t in ts}))
                plan = range_assign(subscriptions, counts)
                assignments = [{"member_id": m, "assignment": encode_assignment(a)} for m, a in plan.items()]
            sync = self._request(
                ApiKeys.SYNC_GROUP,
                3,
                {
                    "group_id": self.group_id,
                    "generation_id": self.generation,
                    "member_id": self.member_id,
                    "group_instance_id": None,
                    "assignments": assignments,
                },
            )
            if sync["error_code"] in _REJOIN:
                if sync["error_code"] != errors.REBALANCE_IN_PROGRESS:
                    self.member_id = ""
                continue
            if sync["error_code"] != errors.NONE:
                raise errors.for_code(sync["error_code"])(f"SyncGroup {self.group_id}")
            self.needs_join = False
            self.last_heartbeat_ms = self.time.hi_res_milliseconds()
            return decode_assignment(sync["assignment"])
        raise errors.RebalanceInProgressError(f"could not join group {self.group_id}")

    def maybe_heartbeat(self) -> None:
        now = self.time.hi_res_milliseconds()
        if self.needs_join or now - self.last_heartbeat_ms < self.heartbeat_interval_ms:
            return
        self.last_heartbeat_ms = now
        r = self._request(
            ApiKeys.HEARTBEAT,
            4,
            {
                "group_id": self.group_id,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": None,
            },
        )
        if r["error_code"] in _REJOIN:
            if r["error_code"] != errors.REBALANCE_IN_PROGRESS:
                self.member_id = ""
            self.needs_join = True

    def leave(self) -> None:
        if self.member_id and not self.needs_join:
            try:
                self._request(
                    ApiKeys.LEAVE_GROUP,
                    4,
                    {"group_id": self.group_id, "members": [{"member_id": self.member_id, "group_instance_id": None}]},
                )
            except OSError:
                pass
        self.member_id, self.generation, self.needs_join = "", -1, True
        self.close_connection()

    # -- offsets --------------------------------------------------------------------------------------
    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        """OffsetCommit; raises CommitFailedError-like KafkaErrors when the group moved on."""
        if not offsets:
            return
        topics: dict[str, list] = {}
        for (t, p), o in offsets.items():
            topics.setdefault(t, []).append(
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "committed_metadata": ""}
            )
        r = self._request_retrying(
            ApiKeys.OFFSET_COMMIT,
            8,
            {
                "group_id": self.group_id,
                "generation_id_or_member_epoch": self.generation,
                "member_id": self.member_id,
                "group_instance_id": None,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
            lambda r: next((p["error_code"] for t in r["topics"] for p in t["partitions"] if p["error_code"]), 0),
        )
        for t in r["topics"]:
            for p in t["partitions"]:
                code = p["error_code"]
                if code in _REJOIN:
                    self.needs_join = True
                if code != errors.NONE:
                    raise errors.for_code(code)(f"OffsetCommit {t['name']}-{p['partition_index']}")

    def fetch_committed(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        r = self._request_retrying(
            ApiKeys.OFFSET_FETCH,
            7,
            {
                "group_id": self.group_id,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                "require_stable": False,
            },
            lambda r: r["error_code"],
        )
        if r["error_code"] != errors.NONE:
            raise errors.for_code(r["error_code"])(f"OffsetFetch {self.group_id}")
        return {
            (t["name"], p["partition_index"]): p["committed_offset"]
            for t in r["topics"]
            for p in t["partitions"]
            if p["committed_offset"] >= 0
        }
