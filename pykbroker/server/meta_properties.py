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


class InconsistentMetaPropertiesError(RuntimeError):
    pass


def random_uuid() -> str:
    """A Kafka Uuid string (never starting with '-', as Kafka avoids)."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


def uuid_from_string(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=="))


def read_meta_properties(log_dir: str) -> dict[str, str] | None:
    path = os.path.join(log_dir, META_PROPERTIES)
    return load_properties(path) if os.path.exists(path) else None


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


def ensure_formatted(log_dirs: list[str], node_id: int, log) -> tuple[str, bool]:
    """Check (or, when every directory is empty, create) meta.properties in each log dir.

    Returns ``(cluster_id, formatted_now)``. Raises InconsistentMetaPropertiesError when directories
    disagree or belong to another node, or RuntimeError when a non-empty dir has no meta.properties.
    """
    metas = {d: read_meta_properties(d) for d in log_dirs}
    if all(m is None for m in metas.values()):
        if not all(is_empty_dir(d) for d in log_dirs):
            unformatted = [d for d in log_dirs if not is_empty_dir(d)]
            raise RuntimeError(
                f"No meta.properties found in {', '.join(unformatted)} (have you run kafka-storage.sh to format "
                "the directory?)"
            )
        cluster_id = random_uuid()
        for d in log_dirs:
            write_meta_properties(d, cluster_id, node_id)
        log.info(
            f"Formatted storage directories {', '.join(log_dirs)} with cluster.id {cluster_id} and node.id {node_id}."
        )
        return cluster_id, True
    cluster_ids = {m.get("cluster.id") for m in metas.values() if m}
    if len(cluster_ids) != 1:
        raise InconsistentMetaPropertiesError(
            f"Invalid cluster.id in log dirs: found {sorted(cluster_ids)} in {', '.join(log_dirs)}"
        )
    cluster_id = cluster_ids.pop()
    for d, m in metas.items():
        if m is None:
            write_meta_properties(d, cluster_id, node_id)
            continue
        stored = int(m.get("node.id", m.get("broker.id", "-1")))
        if stored != node_id:
            raise InconsistentMetaPropertiesError(
                f"Stored node id {stored} doesn't match previous node id {node_id} in "
                f"{os.path.join(d, META_PROPERTIES)}. "
                "If you moved your data, make sure your configured node id matches."
            )
    return cluster_id, False
