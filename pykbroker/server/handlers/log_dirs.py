"""DescribeLogDirs (key 35): what each log directory of this broker holds (``KafkaApis.handleDescribeLogDirsRequest``
and ``ReplicaManager.describeLogDirs``).

One result per configured log directory: an offline one answers KAFKA_STORAGE_ERROR and nothing else; an
online one lists its partitions (all of them when the request's ``topics`` is null, else only the
requested ones) with their size in bytes, ``offset_lag`` 0 and ``is_future_key`` false (this broker has
no future replicas: no log-dir reassignment), and from v4 the directory's total and usable bytes
(``os.statvfs``; a failing statvfs answers KAFKA_STORAGE_ERROR for that directory, as Kafka does on an
IOException).
"""

from __future__ import annotations

import os
from typing import Any

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys


class DescribeLogDirsHandler:
    def __init__(self, helper, log_manager):
        self.helper = helper
        self.log_manager = log_manager

    def handlers(self) -> dict:
        return {ApiKeys.DESCRIBE_LOG_DIRS: self.handle_describe_log_dirs_request}

    def handle_describe_log_dirs_request(self, request) -> None:
        requested = request.body["topics"]
        wanted: set[tuple[str, int]] | None = None
        if requested is not None:
            wanted = {(t["topic"], p) for t in requested for p in t["partitions"]}
        self.helper.send_response(
            request,
            {"throttle_time_ms": 0, "error_code": errors.NONE, "results": self.describe_log_dirs(wanted)},
        )

    def describe_log_dirs(self, wanted: set[tuple[str, int]] | None) -> list[dict]:
        lm = self.log_manager
        live = set(lm.live_log_dirs)
        by_dir: dict[str, dict[str, list[dict]]] = {}
        for log in lm.all_logs():
            tp = tuple(log.topic_partition)
            if wanted is not None and tp not in wanted:
                continue
            topic, partition = tp
            by_dir.setdefault(log.parent_dir, {}).setdefault(topic, []).append(
                {"partition_index": partition, "partition_size": log.size, "offset_lag": 0, "is_future_key": False}
            )
        results = []
        for log_dir in lm.log_dirs:
            if log_dir not in live:
                results.append(_storage_error(log_dir))
                continue
            try:
                st = os.statvfs(log_dir)
            except OSError:
                results.append(_storage_error(log_dir))
                continue
            dir_topics: dict[str, list[dict]] = by_dir.get(log_dir, {})
            topics: list[dict[str, Any]] = [
                {"name": name, "partitions": sorted(parts, key=lambda p: p["partition_index"])}
                for name, parts in sorted(dir_topics.items())
            ]
            results.append(
                {
                    "error_code": errors.NONE,
                    "log_dir": log_dir,
                    "topics": topics,
                    "total_bytes": st.f_blocks * st.f_frsize,
                    "usable_bytes": st.f_bavail * st.f_frsize,
                }
            )
        return results


def _storage_error(log_dir: str) -> dict:
    return {
        "error_code": errors.KAFKA_STORAGE_ERROR,
        "log_dir": log_dir,
        "topics": [],
        "total_bytes": -1,
        "usable_bytes": -1,
    }
