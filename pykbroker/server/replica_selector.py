"""Replica selection for fetch from the closest replica (KIP-392).

Mirrors ``org.apache.kafka.common.replica``: a consumer's Fetch (v11+) carries its ``client.rack`` as
``rack_id``; the partition leader, when ``replica.selector.class`` names a selector, asks it which replica
the consumer should read from and answers that replica's id as ``preferred_read_replica`` (Kafka's
``ReplicaManager.findPreferredReadReplica``).

* :class:`ClientMetadata`: what the broker knows of the fetching client (Kafka's ``DefaultClientMetadata``).
* :class:`ReplicaView`: one candidate replica (node id, rack, log end offset, ms since it last caught up;
  ``node_id`` -1 when the broker has no live endpoint on the client's listener, Kafka's ``Node.noNode()``).
* :class:`PartitionView`: the candidates and the leader (Kafka's ``DefaultPartitionView``).
* :class:`RackAwareReplicaSelector`: the replica in the client's rack, preferring the leader if it is in
  that rack, else the most caught-up one (:func:`most_caught_up`, Kafka's ``ReplicaView.comparator``);
  the leader when no replica is in the rack or the client names no rack.

:func:`create_replica_selector` maps the ``replica.selector.class`` value to a selector (None: the
default, leader only). Only Kafka's own implementation is known; :data:`REPLICA_SELECTORS` is what the
config validator accepts (anything else is a ConfigException at startup, as Kafka fails to load an
unknown class). Selectors are stateless and thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClientMetadata:
    """A consumer's Fetch metadata (Fetch v11+): ``rack_id`` ("" when the client sets no ``client.rack``),
    ``client_id``, ``client_address`` (host string), ``principal`` and ``listener_name``."""

    rack_id: str
    client_id: str = ""
    client_address: str = ""
    principal: object = None
    listener_name: str = ""


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """A candidate replica: ``node_id`` (-1: no live endpoint), ``rack`` (None: no rack),
    ``log_end_offset`` and ``time_since_last_caught_up_ms`` (0 for the leader)."""

    node_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int

    @property
    def has_endpoint(self) -> bool:
        return self.node_id >= 0


@dataclass(frozen=True, slots=True)
class PartitionView:
    """The replicas eligible to serve a read (the leader included) and the leader."""

    replicas: tuple[ReplicaView, ...]
    leader: ReplicaView


def most_caught_up(replicas) -> ReplicaView:
    """Kafka's ``ReplicaView.comparator()`` maximum: the highest log end offset, then the least time since
    it last caught up, then the highest node id."""
    return max(replicas, key=lambda r: (r.log_end_offset, -r.time_since_last_caught_up_ms, r.node_id))


class RackAwareReplicaSelector:
    """Kafka's ``RackAwareReplicaSelector``: a replica in the client's rack (the leader if it is there,
    else the most caught up), or the leader."""

    def select(self, topic: str, partition: int, client: ClientMetadata, view: PartitionView) -> ReplicaView | None:
        """The replica the client should read ``topic``-``partition`` from (never None here)."""
        if not client.rack_id:
            return view.leader
        same_rack = [r for r in view.replicas if r.rack == client.rack_id]
        if not same_rack or view.leader in same_rack:
            return view.leader
        return most_caught_up(same_rack)


RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
REPLICA_SELECTORS = {RACK_AWARE_REPLICA_SELECTOR: RackAwareReplicaSelector}


def create_replica_selector(class_name: str | None) -> RackAwareReplicaSelector | None:
    """The selector named by ``replica.selector.class`` (None or "": none, every read from the leader).
    Raises ValueError for an unknown class (the config validator refuses it before)."""
    if not class_name:
        return None
    cls = REPLICA_SELECTORS.get(class_name.strip())
    if cls is None:
        raise ValueError(f"Class {class_name} cannot be found")
    return cls()
