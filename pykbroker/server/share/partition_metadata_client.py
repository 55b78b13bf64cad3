"""PartitionMetadataClient: the latest offsets (high watermarks) of partitions, for the share-partition lag (KIP-1226).

Kafka 4.2's group coordinator asks the partition leaders for the latest offset of every share partition that
DescribeShareGroupOffsets v1 reports a lag for (lag = high watermark - share-partition start offset - delivery
complete count). Here: a partition this broker leads is read from its log (``high_watermark``); the others are asked
of their leader with ListOffsets (timestamp -1 LATEST, ``read_uncommitted``, replica id -1: the high watermark),
one request per leader, over an :class:`~pykbroker.clients.inter_broker_send_thread.InterBrokerSendThread` started
on first use.

``latest_offsets([(topic, partition)])`` -> Future of ``{(topic, partition): (offset, error code)}``: offset -1 with
LEADER_NOT_AVAILABLE for a partition without a known live leader, REQUEST_TIMED_OUT / NETWORK_EXCEPTION when the
leader did not answer, or the leader's ListOffsets error (Kafka answers the partition with that error).

Threading: ``latest_offsets`` is thread-safe; the future completes on the caller's thread (all local) or on the send
thread (``PartitionMetadataClient-<node id>``), so its callbacks must be quick.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

from pykbroker.clients.inter_broker_send_thread import InterBrokerSendThread
from pykbroker.clients.network_client import RequestTimeoutError
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.client_security import PLAINTEXT, ClientSecurity
from pykbroker.utils.time import SYSTEM, Time

LIST_OFFSETS_VERSION = 7
LATEST_TIMESTAMP = -1

TopicPartition = tuple[str, int]
Latest = tuple[int, int]  # (offset, error code)


class PartitionMetadataClient:
    """See the module docstring. ``replica_manager``: this broker's (local leaders); ``metadata_cache``: partition
    leaders and broker endpoints; ``listener``: the inter-broker listener name."""

    def __init__(
        self,
        node_id: int,
        replica_manager,
        metadata_cache,
        listener: str,
        request_timeout_ms: int = 30000,
        security: ClientSecurity = PLAINTEXT,
        time: Time = SYSTEM,
    ):
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.cache = metadata_cache
        self.listener = listener
        self.send_thread = InterBrokerSendThread(
            f"PartitionMetadataClient-{node_id}",
            f"broker-{node_id}-partition-metadata",
            request_timeout_ms,
            time=time,
            security=security,
        )
        self._lock = threading.Lock()
        self._started = False
        self._stopped = False

    def _local(self, tp: TopicPartition) -> int | None:
        """The high watermark of a partition this broker leads, else None."""
        p = self.replica_manager.get_partition(*tp)
        if p is None or not p.is_leader:
            return None
        log = p.log
        return None if log is None else log.high_watermark

    def latest_offsets(self, partitions: list[TopicPartition]) -> Future[dict[TopicPartition, Latest]]:
        out: dict[TopicPartition, Latest] = {}
        remote: dict[int, list[TopicPartition]] = {}
        for tp in dict.fromkeys(partitions):
            local = self._local(tp)
            if local is not None:
                out[tp] = (local, errors.NONE)
                continue
            reg = self.cache.partition(*tp)
            leader = reg.leader if reg is not None else -1
            if leader < 0 or leader == self.node_id:
                out[tp] = (-1, errors.LEADER_NOT_AVAILABLE)
            else:
                remote.setdefault(leader, []).append(tp)
        future: Future[dict[TopicPartition, Latest]] = Future()
        if not remote:
            future.set_result(out)
            return future
        endpoints = {n: ep for n, ep, _ in self.cache.alive_brokers(self.listener)}
        lock = threading.Lock()
        left = [len(remote)]

        def finished(answers: dict[TopicPartition, Latest]) -> None:
            with lock:
                out.update(answers)
                left[0] -= 1
                last = left[0] == 0
            if last:
                future.set_result(out)

        for leader, tps in remote.items():
            ep = endpoints.get(leader)
            if ep is None or not self._start():
                finished(dict.fromkeys(tps, (-1, errors.LEADER_NOT_AVAILABLE)))
                continue
            self.send_thread.set_address(leader, ep.host, ep.port)
            self.send_thread.send(
                leader, ApiKeys.LIST_OFFSETS, LIST_OFFSETS_VERSION, _request(tps), _on_response(tps, finished)
            )
        return future

    def _start(self) -> bool:
        with self._lock:
            if self._stopped:
                return False
            if not self._started:
                self._started = True
                self.send_thread.start()
            return True

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            started = self._started
        if started:
            self.send_thread.shutdown()


def _request(tps: list[TopicPartition]) -> dict:
    topics: dict[str, list[dict]] = {}
    for topic, partition in tps:
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "current_leader_epoch": -1, "timestamp": LATEST_TIMESTAMP}
        )
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    }


def _on_response(
    tps: list[TopicPartition], finished: Callable[[dict[TopicPartition, Latest]], None]
) -> Callable[[dict | None, Exception | None], None]:
    def on_response(resp: dict | None, err: Exception | None) -> None:
        if err is not None or resp is None:
            code = errors.REQUEST_TIMED_OUT if isinstance(err, RequestTimeoutError) else errors.NETWORK_EXCEPTION
            finished(dict.fromkeys(tps, (-1, code)))
            return
        answers: dict[TopicPartition, Latest] = dict.fromkeys(tps, (-1, errors.UNKNOWN_TOPIC_OR_PARTITION))
        for t in resp.get("topics", ()):
            for p in t["partitions"]:
                tp = (t["name"], p["partition_index"])
                if tp in answers:
                    code = p["error_code"]
                    answers[tp] = (p["offset"] if code == errors.NONE else -1, code)
        finished(answers)

    return on_response
