"""kafka-log-dirs' JSON: Kafka's (Jackson over Java HashMaps), reproduced without a JVM."""

from __future__ import annotations

import json

from pykbroker.protocol import errors
from pykbroker.tools.log_dirs_command import format_as_json, java_hash, java_hashmap_order, java_string_hash


def test_java_hashes():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648  # the classic Integer.MIN_VALUE hash
    assert java_hash(7) == 7
    # TopicPartition("t", 0).hashCode(): 31 * (31 * 1 + 0) + "t".hashCode()
    assert java_hash(("t", 0)) == 31 * 31 + ord("t")


def test_hashmap_order_buckets_then_insertion():
    assert java_hashmap_order(["version", "brokers"]) == ["brokers", "version"]
    assert java_hashmap_order([17, 1, 16, 0]) == [16, 0, 17, 1]  # 16 buckets: 16 and 0 share bucket 0
    assert java_hashmap_order(range(20)) == list(range(20))  # resized to 32 buckets


def test_format_with_an_offline_dir_and_topic_filter():
    results = [
        {
            "error_code": errors.NONE,
            "log_dir": "/d1",
            "topics": [
                {
                    "name": "a",
                    "partitions": [
                        {"partition_index": 0, "partition_size": 10, "offset_lag": 0, "is_future_key": False}
                    ],
                },
                {
                    "name": "b",
                    "partitions": [
                        {"partition_index": 0, "partition_size": 5, "offset_lag": 0, "is_future_key": False}
                    ],
                },
            ],
        },
        {"error_code": errors.KAFKA_STORAGE_ERROR, "log_dir": "/d2", "topics": []},
    ]
    text = format_as_json({1: results}, {"a"})
    assert " " not in text
    report = json.loads(text)
    dirs = {d["logDir"]: d for d in report["brokers"][0]["logDirs"]}
    assert dirs["/d1"]["error"] is None
    assert dirs["/d1"]["partitions"] == [{"partition": "a-0", "size": 10, "offsetLag": 0, "isFuture": False}]
    assert dirs["/d2"] == {
        "partitions": [],
        "error": "org.apache.kafka.common.errors.KafkaStorageException",
        "logDir": "/d2",
    }
