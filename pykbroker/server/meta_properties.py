"""meta.properties: the identity of a log directory (cluster id, node id, directory id), KRaft v1.

Mirrors ``org.apache.kafka.metadata.properties.MetaProperties`` and the formatting done by
``kafka-storage format``. Ids are Kafka ``Uuid`` strings: 16 random bytes, URL-safe base64 without
padding (22 characters). Starting on a directory formatted for another cluster or node raises
:class:`InconsistentMetaPropertiesError` with a message naming both values.
"""

from __future__ import annotations

import base64
import os
import time
import uuid

from pykbroker.config.properties import load_properties
from pykbroker.utils.files import atomic_write

META_PROPERTIES = "meta.properties"
# The keys of a meta.properties file (Kafka's ``MetaProperties.*_PROP``): keys of that file, not broker configs, though
# cluster.id and node.id (and v0's broker.id) are spelt as the broker keys are.
CLUSTER_ID_PROP = "cluster.id"
NODE_ID_PROP = "node.id"
BROKER_ID_PROP = "broker.id"


class MetaPropertiesError(RuntimeError):
    """Storage this node must not start on; the message is Kafka's, one line (``MetaPropertiesEnsemble.verify``,
    ``KafkaRaftServer.initializeLogDirs``)."""


class InconsistentMetaPropertiesError(MetaPropertiesError):
    """Directories formatted for another cluster or node."""


def random_uuid() -> str:
    """A Kafka Uuid string (never starting with '-', as Kafka avoids)."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


def uuid_to_string(u: uuid.UUID) -> str:
    """A Kafka Uuid string (base64 url-safe, no padding) of ``u``."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def uuid_from_string(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=="))


def read_meta_properties(log_dir: str) -> dict[str, str] | None:
    path = os.path.join(log_dir, META_PROPERTIES)
    return load_properties(path) if os.path.exists(path) else None


def log_directory_ids(log_dirs: list[str]) -> dict[str, uuid.UUID]:
    """``{log dir: its directory.id}`` from the meta.properties of ``log_dirs`` (KIP-858); a directory without a
    readable id is left out."""
    ids = {}
    for d in log_dirs:
        try:
            meta = read_meta_properties(d)
            if meta and meta.get("directory.id"):
                ids[d] = uuid_from_string(meta["directory.id"])
        except (OSError, ValueError):
            continue
    return ids


def write_meta_properties(log_dir: str, cluster_id: str, node_id: int, directory_id: str | None = None) -> None:
    os.makedirs(log_dir, exist_ok=True)
    path = os.path.join(log_dir, META_PROPERTIES)
    text = (
        f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n"
        f"cluster.id={cluster_id}\ndirectory.id={directory_id or random_uuid()}\nnode.id={node_id}\nversion=1\n"
    )
    atomic_write(path, text.encode("utf-8"))


def is_empty_dir(path: str) -> bool:
    return not os.path.exists(path) or not [n for n in os.listdir(path) if not n.startswith(".")]


def verify_meta_properties(
    metas: dict[str, dict[str, str] | None], expected_cluster_id: str | None, expected_node_id: int | None
) -> str | None:
    """Kafka's ``MetaPropertiesEnsemble.verify``: every formatted directory of ``metas`` (dir -> its
    meta.properties, None when unformatted; checked in this order) has the same cluster id (``expected_cluster_id``
    or else the first one read) and node id. Returns the cluster id (None when nothing is formatted); raises
    InconsistentMetaPropertiesError with Kafka's message."""
    for d, m in metas.items():
        if m is None:
            continue
        path = os.path.join(d, META_PROPERTIES)
        cluster_id = m.get(CLUSTER_ID_PROP)
        if cluster_id is None:
            if m.get("version", "0") == "1":
                raise InconsistentMetaPropertiesError(f"cluster.id was not specified in the v1 file: {path}")
        elif expected_cluster_id is None:
            expected_cluster_id = cluster_id
        elif cluster_id != expected_cluster_id:
            raise InconsistentMetaPropertiesError(
                f"Invalid cluster.id in: {path}. Expected {expected_cluster_id}, but read {cluster_id}"
            )
        stored = m.get(NODE_ID_PROP, m.get(BROKER_ID_PROP))
        if stored is None:
            if m.get("version", "0") == "1":
                raise InconsistentMetaPropertiesError(f"node.id was not specified in {path}")
        elif expected_node_id is None:
            expected_node_id = int(stored)
        elif int(stored) != expected_node_id:
            raise InconsistentMetaPropertiesError(
                f"Stored node id {int(stored)} doesn't match previous node id {expected_node_id} in {path}. "
                "If you moved your data, make sure your configured node id matches. If you intend to create a "
                "new node, you should remove all data in your data directories."
            )
    return expected_cluster_id


def ensure_formatted(log_dirs: list[str], node_id: int, log, *, allow_auto_format: bool) -> tuple[str, bool]:
    """Check meta.properties in each of ``log_dirs`` (the log dirs and the metadata log dir) for ``node_id``, as
    ``KafkaRaftServer.initializeLogDirs`` does; returns ``(cluster_id, formatted_now)``.

    ``allow_auto_format`` (pykbroker's single-node default only: a combined node that is its quorum's only
    voter) formats directories that are all empty with a random cluster id, and a directory added empty to a
    formatted node. Without it, as in Kafka, unformatted storage is refused: nothing formatted raises
    MetaPropertiesError ``No readable meta.properties files found.``, one unformatted directory
    ``No `meta.properties` found in <dir> (have you run `kafka-storage.sh` to format the directory?)``.
    Directories of different clusters or another node raise InconsistentMetaPropertiesError (Kafka's
    messages, see :func:`verify_meta_properties`). A formatted directory without ``directory.id`` gets one.
    """
    metas = {d: read_meta_properties(d) for d in log_dirs}
    if all(m is None for m in metas.values()):
        if not allow_auto_format:
            raise MetaPropertiesError("No readable meta.properties files found.")
        unformatted = [d for d in log_dirs if not is_empty_dir(d)]
        if unformatted:
            raise MetaPropertiesError(_not_formatted(unformatted[0]))
        cluster_id = random_uuid()
        for d in log_dirs:
            write_meta_properties(d, cluster_id, node_id)
        log.info(
            f"Formatted storage directories {', '.join(log_dirs)} with cluster.id {cluster_id} and node.id {node_id}."
        )
        return cluster_id, True
    found = verify_meta_properties(metas, None, node_id)
    if found is None:
        raise InconsistentMetaPropertiesError(
            f"Error: cluster ID not found in {next(d for d, m in metas.items() if m)}"
        )
    for d, m in metas.items():
        if m is None:
            if not allow_auto_format:
                raise MetaPropertiesError(_not_formatted(d))
            write_meta_properties(d, found, node_id)
        elif not m.get("directory.id"):
            log.info(f"Rewriting {os.path.join(d, META_PROPERTIES)}")
            write_meta_properties(d, found, node_id)
    return found, False


def _not_formatted(log_dir: str) -> str:
    return f"No `meta.properties` found in {log_dir} (have you run `kafka-storage.sh` to format the directory?)"
