"""ReplicaFetcherManager: which ReplicaFetcherThread fetches which follower partition.

Mirrors ``kafka.server.AbstractFetcherManager`` / ``ReplicaFetcherManager``: a partition goes to the
thread keyed by (leader broker id, fetcher id), where the fetcher id is
``abs(31 * hash(topic) + partition) % num.replica.fetchers`` (Kafka's ``getFetcherId``, with Java's
String.hashCode so the spread matches Kafka's). A thread is created on first use, replaced when the
leader's endpoint changed, and shut down once it has no partitions left
(``shutdown_idle_fetcher_threads``: after each metadata delta that moved partitions, as Kafka's
``ReplicaManager.applyDelta`` does, so a thread left fetching from a leader that lost its partitions
closes its connection -- and abandons the request in flight there -- at once; and every 10 s).
``resize_thread_pool`` (dynamic ``num.replica.fetchers``) reassigns
every partition by the new count, as Kafka's ``resizeThreadPool``. Each thread has Kafka's meter
``kafka.server:type=FetcherStats,name=RequestsPerSec,clientId=<thread name>,brokerHost=<h>,brokerPort=<p>``
while it exists.

When the metadata shows that a leader came back after losing its session, re-registered, or moved to a
new endpoint, or that this broker itself came back after losing its session, the threads fetching over
those links reset their connections (:meth:`ReplicaFetcherManager.reset_connections`): a request lost in
a network partition is abandoned at once instead of being waited for up to ``replica.socket.timeout.ms``.

Threading: ``_lock`` guards the thread map and the fetcher count; called by the metadata publisher
(through the ReplicaManager and the DynamicBrokerConfig), the scheduler (idle threads) and at shutdown.
"""

from __future__ import annotations

import threading

from pykbroker.config.broker_configs.replication_configs import NUM_REPLICA_FETCHERS_CONFIG
from pykbroker.server.replica_fetcher_thread import BrokerEndPoint, PartitionFetchState, ReplicaFetcherThread
from pykbroker.utils.logging import get_logger


def _utf16_units(s: str):
    data = s.encode("utf-16-be")
    return (int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, as a signed 32-bit int)."""
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    value = (31 * java_string_hash(topic) + partition) & 0xFFFFFFFF
    value = value - (1 << 32) if value >= 1 << 31 else value
    return (abs(value) if value != -(1 << 31) else 0) % num_fetchers


class ReplicaFetcherManager:
    def __init__(self, replica_manager, config, time):
        self.replica_manager = replica_manager
        self.config = config
        self.time = time
        self.num_fetchers = config[NUM_REPLICA_FETCHERS_CONFIG]
        self.node_id = replica_manager.node_id
        self._threads: dict[tuple[int, int], ReplicaFetcherThread] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.metrics = None
        # This broker's session as its metadata shows it: unfenced at least once, then lost (fenced or
        # re-registered) and not yet back. Written by the metadata publisher's thread only.
        self._was_unfenced = False
        self._lost_session = False
        self.log = get_logger("ReplicaFetcherManager", broker=self.node_id)

    def register_metrics(self, metrics) -> None:
        """Kafka's ``kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica`` (messages the
        most lagging followed partition is behind its leader's HW) and ``DeadThreadCount``."""
        self.metrics = metrics
        prefix = "kafka.server:type=ReplicaFetcherManager,name="

        def threads() -> list[ReplicaFetcherThread]:
            with self._lock:
                return list(self._threads.values())

        metrics.gauge(prefix + "MaxLag,clientId=Replica", lambda: max((t.max_lag() for t in threads()), default=0))
        metrics.gauge(
            prefix + "DeadThreadCount,clientId=Replica", lambda: sum(1 for t in threads() if not t.is_alive())
        )

    def add_fetcher_for_partitions(
        self, partitions: dict[tuple[str, int], tuple[BrokerEndPoint, PartitionFetchState]]
    ) -> None:
        """Start fetching each partition from its leader (``(leader endpoint, initial state)``)."""
        with self._lock:
            if not self._closed:
                self._add_locked(partitions)

    def _add_locked(self, partitions: dict[tuple[str, int], tuple[BrokerEndPoint, PartitionFetchState]]) -> None:
        by_thread: dict[tuple[int, int], dict] = {}
        endpoints: dict[tuple[int, int], BrokerEndPoint] = {}
        for tp, (leader, state) in partitions.items():
            key = (leader.id, fetcher_id(tp[0], tp[1], self.num_fetchers))
            by_thread.setdefault(key, {})[tp] = state
            endpoints[key] = leader
        for key, states in by_thread.items():
            thread = self._threads.get(key)
            if thread is not None and thread.source != endpoints[key]:
                self._shutdown_thread(thread)
                thread = None
            if thread is None:
                thread = self._new_thread(key, endpoints[key])
            # A partition fetches from one leader only.
            for other_key, other in self._threads.items():
                if other_key != key:
                    other.remove_partitions(states)
            thread.add_partitions(states)
            added = ", ".join(
                f"{t}-{p} (offset {st.fetch_offset}, epoch {st.current_leader_epoch})" for (t, p), st in states.items()
            )
            self.log.info(f"Added fetcher to broker {key[0]} for partitions {added}")

    def remove_fetcher_for_partitions(self, partitions) -> None:
        """Stop fetching ``partitions``; when this returns no fetcher appends to them any more."""
        partitions = list(partitions)
        if not partitions:
            return
        with self._lock:
            for thread in self._threads.values():
                thread.remove_partitions(partitions)

    @staticmethod
    def _stats_name(thread: ReplicaFetcherThread) -> str:
        source = thread.source
        return (
            f"kafka.server:type=FetcherStats,name=RequestsPerSec,clientId={thread.name},"
            f"brokerHost={source.host},brokerPort={source.port}"
        )

    def _shutdown_thread(self, thread: ReplicaFetcherThread) -> None:
        thread.shutdown()
        if self.metrics is not None:
            self.metrics.remove(self._stats_name(thread))

    def shutdown_idle_fetcher_threads(self) -> None:
        """Stop the threads without partitions (their connections are interrupted first, so the wait for
        them is short)."""
        with self._lock:
            self._shutdown_idle_locked()

    def _shutdown_idle_locked(self) -> None:
        idle = [(key, t) for key, t in self._threads.items() if t.partition_count() == 0]
        for key, thread in idle:
            del self._threads[key]
            thread.initiate_shutdown()
        for _, thread in idle:
            self._shutdown_thread(thread)

    def on_broker_changes(self, old_brokers, new_brokers, changed, fenced_meanwhile=frozenset()) -> None:
        """Registrations of ``changed`` broker ids moved from ``old_brokers`` to ``new_brokers`` (one metadata
        delta; ``fenced_meanwhile``: ids a record of the delta fenced, even if unfenced again by its end).
        Reset the connections whose either end came back:

        * a leader re-registered (new broker epoch: a restart, or the same process after losing its
          session), or unfenced after being fenced, or with a new inter-broker endpoint: the threads
          fetching from it reconnect (to the new endpoint);
        * this broker unfenced again after losing its session (it was fenced, or re-registered, after
          having been unfenced under its current registration -- the history of earlier incarnations
          replayed at start-up does not count): every thread reconnects, since a broker cut off long
          enough to be fenced has its requests of that time lost, not merely late.
        """
        listener = self.replica_manager.inter_broker_listener
        for broker_id in sorted(changed):
            old, new = old_brokers.get(broker_id), new_brokers.get(broker_id)
            if broker_id == self.node_id:
                if self._was_unfenced and (
                    new is None
                    or new.fenced
                    or broker_id in fenced_meanwhile
                    or (old is not None and old.epoch != new.epoch)
                ):
                    self._lost_session = True
                if new is not None and not new.fenced and new.epoch == self.replica_manager.broker_epoch():
                    if self._lost_session:
                        self.log.info("This broker is back after losing its session: every fetcher reconnects")
                        self.reset_connections(None, f"broker {broker_id} (this broker) came back")
                    self._lost_session = False
                    self._was_unfenced = True
                continue
            if old is None or new is None or new.fenced:
                continue
            old_ep, new_ep = old.listeners.get(listener), new.listeners.get(listener)
            if new.epoch != old.epoch:
                reason = f"broker {broker_id} re-registered with broker epoch {new.epoch}"
            elif old.fenced or broker_id in fenced_meanwhile:
                reason = f"broker {broker_id} unfenced after being fenced"
            elif old_ep != new_ep:
                reason = f"broker {broker_id} has a new endpoint"
            else:
                continue
            endpoint = None if new_ep is None else BrokerEndPoint(broker_id, new_ep.host or "127.0.0.1", new_ep.port)
            self.reset_connections(broker_id, reason, endpoint)

    def reset_connections(self, broker_id: int | None, reason: str, endpoint: BrokerEndPoint | None = None) -> None:
        """The threads fetching from ``broker_id`` (every thread with None) abandon their request in flight
        and reconnect. With the broker's current inter-broker ``endpoint``, a thread still pointed at an
        older one is replaced by a thread to the new endpoint that takes over its partitions."""
        with self._lock:
            if self._closed:
                return
            for key, thread in list(self._threads.items()):
                if broker_id is not None and key[0] != broker_id:
                    continue
                if endpoint is not None and thread.source != endpoint:
                    self._replace_thread(key, thread, endpoint, reason)
                else:
                    thread.reset_connection(reason)

    def _replace_thread(self, key, thread: ReplicaFetcherThread, endpoint: BrokerEndPoint, reason: str) -> None:
        states = thread.remove_all_partitions()
        self._shutdown_thread(thread)
        replacement = self._new_thread(key, endpoint)
        replacement.add_partitions(states)
        self.log.info(
            f"Moved the fetcher to broker {key[0]} from {thread.source.host}:{thread.source.port} to "
            f"{endpoint.host}:{endpoint.port} ({reason}) with {len(states)} partitions"
        )

    def _new_thread(self, key: tuple[int, int], endpoint: BrokerEndPoint) -> ReplicaFetcherThread:
        thread = ReplicaFetcherThread(
            f"ReplicaFetcherThread-{key[1]}-{key[0]}", key[1], endpoint, self.replica_manager, self.config, self.time
        )
        if self.metrics is not None:
            thread.requests_meter = self.metrics.meter(self._stats_name(thread))
        self._threads[key] = thread
        thread.start()
        return thread

    def resize_thread_pool(self, new_size: int) -> None:
        """Kafka's ``AbstractFetcherManager.resizeThreadPool``: fetcher threads per source broker become
        ``new_size`` (>= 1): every partition is taken out of its thread, threads whose fetcher id is no
        longer below ``new_size`` stop, and the partitions are spread again by the new count (each
        truncating first, from its fetch offset and leader epoch, as a newly added partition); idle
        threads stop."""
        with self._lock:
            if self._closed:
                return
            current, self.num_fetchers = self.num_fetchers, new_size
            self.log.info(f"Resizing fetcher thread pool size from {current} to {new_size}")
            if new_size != current:
                moved: dict[tuple[str, int], tuple[BrokerEndPoint, PartitionFetchState]] = {}
                for key, thread in list(self._threads.items()):
                    states = thread.remove_all_partitions()
                    if key[1] >= new_size:
                        self._shutdown_thread(thread)
                        del self._threads[key]
                    for tp, st in states.items():
                        moved[tp] = (
                            thread.source,
                            PartitionFetchState(st.topic_id, st.fetch_offset, st.current_leader_epoch),
                        )
                self._add_locked(moved)
            self._shutdown_idle_locked()

    def fetcher_count(self) -> int:
        with self._lock:
            return len(self._threads)

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads.values())
            self._threads.clear()
        for thread in threads:
            self._shutdown_thread(thread)
