"""Client-side cluster metadata (``org.apache.kafka.clients.Metadata`` + ``Cluster``).

Holds brokers (node id -> (host, port)) and, per topic, the partition count, each partition's leader
and leader epoch, refreshed from Metadata responses by the client's I/O thread. Application threads
wait for a topic's metadata with :meth:`await_topic` (bounded by ``max.block.ms``).

Thread-safety: all state is guarded by one condition variable.
"""

from __future__ import annotations

import threading

from pykbroker.protocol import errors
from pykbroker.utils.time import SYSTEM, Time


class ClusterMetadata:
    def __init__(self, bootstrap: list[str], metadata_max_age_ms: int = 300000, time: Time = SYSTEM):
        self.time = time
        self.bootstrap = [_split(b) for b in bootstrap]
        self.max_age_ms = metadata_max_age_ms
        self._cond = threading.Condition()
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.num_partitions: dict[str, int] = {}
        self.available: dict[str, list[int]] = {}
        self.topic_errors: dict[str, int] = {}
        self.topics: set[str] = set()  # topics the client needs
        self.need_update = True
        self.last_refresh = 0.0
        self.version = 0

    # -- application threads ---------------------------------------------------------------------
    def add_topic(self, topic: str) -> None:
        with self._cond:
            if topic not in self.topics:
                self.topics.add(topic)
                self.need_update = True

    def await_topic(self, topic: str, timeout_s: float, wakeup) -> int:
        """Wait until ``topic``'s partition count is known; returns it.
        Raises TimeoutError (Kafka: TimeoutException "Topic X not present in metadata after N ms.")."""
        with self._cond:
            n = self.num_partitions.get(topic)
            if n:
                return n
        self.add_topic(topic)
        deadline = self.time.nanoseconds() / 1e9 + timeout_s
        with self._cond:
            while True:
                n = self.num_partitions.get(topic)
                if n:
                    return n
                code = self.topic_errors.get(topic)
                if code is not None and code not in (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.LEADER_NOT_AVAILABLE):
                    raise errors.for_code(code)(f"Topic {topic}: {errors.name_of(code)}")
                remaining = deadline - self.time.nanoseconds() / 1e9
                if remaining <= 0:
                    raise TimeoutError(f"Topic {topic} not present in metadata after {int(timeout_s * 1000)} ms.")
                self.need_update = True
                wakeup()
                self._cond.wait(min(remaining, 0.1))

    # -- I/O thread -------------------------------------------------------------------------------
    def request_update(self) -> None:
        with self._cond:
            self.need_update = True

    def update_due(self, now: float) -> bool:
        return self.need_update or (now - self.last_refresh) * 1000 >= self.max_age_ms

    def leader_for(self, topic: str, partition: int) -> int | None:
        return self.leaders.get((topic, partition))

    def update(self, response: dict, now: float) -> None:
        with self._cond:
            brokers = {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}
            if brokers:
                self.brokers = brokers
            for t in response["topics"]:
                name = t["name"]
                if t["error_code"] != errors.NONE:
                    self.topic_errors[name] = t["error_code"]
                    self.num_partitions.pop(name, None)
                    continue
                self.topic_errors.pop(name, None)
                self.num_partitions[name] = len(t["partitions"])
                avail = []
                for p in t["partitions"]:
                    if p["leader_id"] >= 0:
                        self.leaders[(name, p["partition_index"])] = p["leader_id"]
                        avail.append(p["partition_index"])
                    else:
                        self.leaders.pop((name, p["partition_index"]), None)
                self.available[name] = sorted(avail)
            self.need_update = False
            self.last_refresh = now
            self.version += 1
            self._cond.notify_all()


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    return host.strip("[]") or "localhost", int(port)
