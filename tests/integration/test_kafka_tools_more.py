"""kafka-dump-log, kafka-consumer-perf-test, kafka-verifiable-producer and kafka-verifiable-consumer against one
real broker (Kafka's output formats)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from tests.helpers.tools import create_topic_with_tool, run_tool
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kafka(module_broker):
    return module_broker


def tool(module: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return run_tool(module, *args, timeout=timeout)


def create(kafka, topic: str, partitions: int = 1, *config: str) -> None:
    create_topic_with_tool(kafka.bootstrap, topic, partitions, *config)


BATCH_LINE = re.compile(
    r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: (-?\d+) lastSequence: (-?\d+) "
    r"producerId: (-?\d+) producerEpoch: (-?\d+) partitionLeaderEpoch: (\d+) isTransactional: (true|false) "
    r"isControl: (true|false) deleteHorizonMs: OptionalLong\.empty position: (\d+) CreateTime: (\d+) size: (\d+) "
    r"magic: 2 compresscodec: (none|gzip) crc: (\d+) isvalid: true"
)


def test_dump_log_segments_indexes_and_snapshot(kafka, tmp_path):
    from confluent_kafka import Producer

    create(kafka, "dump", 1, "index.interval.bytes=1")
    ts = (int(time.time()) - 60) * 1000
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0, "enable.idempotence": False})
    producer.produce("dump", key=b"k0", value=b"v0", timestamp=ts, headers=[("h", b"x")])
    assert producer.flush(30) == 0
    producer.produce("dump", value=b"v1", timestamp=ts + 1)
    producer.produce("dump", key=b"k2", value=None, timestamp=ts + 2)
    assert producer.flush(30) == 0
    seg = kafka.data_dir / "logs" / "dump-0"
    log, index, timeindex = (str(seg / f"{0:020d}.{s}") for s in ("log", "index", "timeindex"))

    shallow = tool("dump_log_segments", "--files", log)
    assert shallow.returncode == 0, shallow.stderr
    lines = shallow.stdout.splitlines()
    assert lines[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    batches = [BATCH_LINE.fullmatch(line) for line in lines[2:]]
    assert all(batches), lines
    first = batches[0]
    assert first is not None and first.group(1, 2, 3, 11, 12) == ("0", "0", "1", "0", str(ts))
    assert int(batches[1].group(11)) == int(first.group(11)) + int(first.group(13))  # type: ignore[union-attr]
    assert sum(int(b.group(3)) for b in batches) == 3  # type: ignore[union-attr]

    deep = tool("dump_log_segments", "--files", log, "--print-data-log").stdout.splitlines()
    records = [line for line in deep if line.startswith("|")]
    assert records == [
        f"| offset: 0 CreateTime: {ts} keySize: 2 valueSize: 2 sequence: -1 headerKeys: [h] key: k0 payload: v0",
        f"| offset: 1 CreateTime: {ts + 1} keySize: -1 valueSize: 2 sequence: -1 headerKeys: [] payload: v1",
        f"| offset: 2 CreateTime: {ts + 2} keySize: 2 valueSize: -1 sequence: -1 headerKeys: [] key: k2",
    ]
    assert deep[2].startswith("baseOffset: 0 lastOffset: 0 ") and deep[3].startswith("| offset: 0 ")
    no_data = tool("dump_log_segments", "--files", log, "--deep-iteration").stdout.splitlines()
    assert [line for line in no_data if line.startswith("|")][1] == (
        f"| offset: 1 CreateTime: {ts + 1} keySize: -1 valueSize: 2 sequence: -1 headerKeys: []"
    )

    bare = tool("dump_log_segments", "--files", log, "--print-data-log", "--skip-record-metadata").stdout
    assert [line for line in bare.splitlines() if line.startswith("|")] == ["| key: k0 payload: v0", "| payload: v1",
                                                                          "| key: k2"]  # fmt: skip

    idx = tool("dump_log_segments", "--files", f"{index},{timeindex}")
    assert idx.returncode == 0, idx.stderr
    out = idx.stdout.splitlines()
    split = out.index(f"Dumping {timeindex}")
    assert out[0] == f"Dumping {index}" and split >= 2, out
    positions = {b.group(11) for b in batches}  # type: ignore[union-attr]
    for entry in out[1:split]:  # every indexed position is the start of a batch
        m = re.fullmatch(r"offset: ([0-2]) position: (\d+)", entry)
        assert m and m.group(2) in positions, out
    assert len(out) > split + 1, out
    for entry in out[split + 1 :]:
        m = re.fullmatch(r"timestamp: (\d+) offset: ([0-2])", entry)
        assert m and ts <= int(m.group(1)) <= ts + 2, out

    from pykbroker.log.producer_state_entry import BatchMetadata, ProducerStateEntry
    from pykbroker.log.producer_state_snapshot import write_snapshot

    snap = str(tmp_path / f"{5:020d}.snapshot")
    write_snapshot(snap, [ProducerStateEntry(7, 1, 2, ts, -1, [BatchMetadata(4, 4, 4, ts)])], sync=False)
    assert tool("dump_log_segments", "--files", snap).stdout == (
        f"Dumping {snap}\nproducerId: 7 producerEpoch: 1 coordinatorEpoch: 2 currentTxnFirstOffset: "
        f"OptionalLong.empty lastTimestamp: {ts} firstSequence: 0 lastSequence: 4 lastOffset: 4 offsetDelta: 4 "
        f"timestamp: {ts}\n"
    )
    other = tool("dump_log_segments", "--files", str(tmp_path / "x.txt"))
    assert other.returncode == 0 and other.stderr == f"Ignoring unknown file {tmp_path / 'x.txt'}\n"


def test_dump_log_offsets_decoder(kafka):
    from confluent_kafka import Consumer, TopicPartition

    create(kafka, "dumped-offsets", 1)
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "dump-g", "enable.auto.commit": False})
    try:
        consumer.subscribe(["dumped-offsets"])
        wait_until(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), 30, message="assigned")
        consumer.commit(offsets=[TopicPartition("dumped-offsets", 0, 42)], asynchronous=False)
    finally:
        consumer.close()
    logs = sorted((kafka.data_dir / "logs").glob("__consumer_offsets-*/*.log"))
    found, groups = [], []
    for log in logs:
        run = tool("dump_log_segments", "--files", str(log), "--offsets-decoder")
        assert run.returncode == 0, run.stderr
        found += [line for line in run.stdout.splitlines() if '"topic":"dumped-offsets"' in line]
        groups += [line for line in run.stdout.splitlines() if 'key: {"type":"2","data":{"group":"dump-g"}}' in line]
    # the group's metadata: the member's subscription and assignment decoded, as Kafka prints them
    values = [json.loads(line.split(" payload: ", 1)[1]) for line in groups if " payload: {" in line]
    joined = [v for v in values if v["data"]["members"]]  # the group emptied when the consumer left
    assert joined and all(v["version"] == "3" for v in values), groups
    member = joined[-1]["data"]["members"][0]
    assert joined[-1]["data"]["protocolType"] == "consumer" and joined[-1]["data"]["generation"] >= 1
    assert member["subscription"]["topics"] == ["dumped-offsets"], member
    assert member["assignment"]["assignedPartitions"] == [{"topic": "dumped-offsets", "partitions": [0]}], member
    found = [line for line in found if "assignedPartitions" not in line]
    assert len(found) == 1, found
    m = re.fullmatch(
        r"\| offset: \d+ CreateTime: \d+ keySize: \d+ valueSize: \d+ sequence: -1 headerKeys: \[\] "
        r"key: (\{.*\}) payload: (\{.*\})",
        found[0],
    )
    assert m, found[0]
    assert m.group(1) == '{"type":"1","data":{"group":"dump-g","topic":"dumped-offsets","partition":0}}'
    payload = json.loads(m.group(2))
    assert payload["version"] == "3" and payload["data"]["offset"] == 42
    assert list(payload["data"]) == ["offset", "leaderEpoch", "metadata", "commitTimestamp"]


PERF_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
    "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
NUM = r"(-?\d+\.\d{4}|NaN|Infinity)"


def test_consumer_perf_test(kafka):
    from confluent_kafka import Producer

    create(kafka, "perf-in", 2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    for i in range(20):
        producer.produce("perf-in", key=b"k", value=b"x" * 99, partition=i % 2)
    assert producer.flush(30) == 0
    bs = ("--bootstrap-server", kafka.bootstrap, "--topic", "perf-in")
    run = tool("consumer_performance", *bs, "--messages", "20", "--group", "perf-g", "--timeout", "20000")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == PERF_HEADER and len(lines) == 2, lines
    m = re.fullmatch(
        rf"({DATE}), ({DATE}), (\d+\.\d{{4}}), {NUM}, (\d+), {NUM}, (\d+), (-?\d+), {NUM}, {NUM}", lines[1]
    )
    assert m, lines[1]
    assert m.group(3) == f"{2000 / 1024 / 1024:.4f}" and m.group(5) == "20", lines[1]
    # the group exists and --hide-header drops the header; a short topic ends with Kafka's timeout warning
    short = tool("consumer_performance", *bs, "--messages", "30", "--timeout", "1000", "--hide-header")
    assert short.returncode == 0, short.stderr
    out = short.stdout.splitlines()
    assert out[0] == (
        "WARNING: Exiting before consuming the expected number of messages: timeout (1000 ms) exceeded. "
        "You can use the --timeout option to increase the timeout."
    )
    assert len(out) == 2 and out[1].split(", ")[4] == "20", out
    assert "perf-g" in tool("consumer_group_command", "--bootstrap-server", kafka.bootstrap, "--list").stdout


def events(stdout: str) -> list[dict]:
    out = [json.loads(line) for line in stdout.splitlines()]
    assert all(list(e)[:2] == ["timestamp", "name"] and isinstance(e["timestamp"], int) for e in out), out
    return out


def test_verifiable_producer_and_consumer(kafka):
    create(kafka, "verify", 2)
    run = tool(
        "verifiable_producer", "--bootstrap-server", kafka.bootstrap, "--topic", "verify", "--max-messages", "6",
        "--value-prefix", "7", "--acks", "-1", "--throughput", "1000",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    produced = events(run.stdout)
    names = [e["name"] for e in produced]
    assert names == ["startup_complete"] + ["producer_send_success"] * 6 + ["shutdown_complete", "tool_data"], names
    sends = produced[1:7]
    assert sorted(e["value"] for e in sends) == [f"7.{i}" for i in range(6)]
    assert all(list(e)[2:] == ["key", "value", "partition", "topic", "offset"] for e in sends), sends
    assert all(e["key"] is None and e["topic"] == "verify" and e["partition"] in (0, 1) for e in sends)
    by_partition: dict[int, list[int]] = {}
    for e in sends:
        by_partition.setdefault(e["partition"], []).append(e["offset"])
    assert all(sorted(v) == list(range(len(v))) for v in by_partition.values()), by_partition
    data = produced[-1]
    assert (data["sent"], data["acked"], data["target_throughput"]) == (6, 6, 1000)
    assert isinstance(data["avg_throughput"], float) and data["avg_throughput"] > 0

    consume = tool(
        "verifiable_consumer", "--bootstrap-server", kafka.bootstrap, "--topic", "verify", "--group-id", "verify-g",
        "--max-messages", "6", "--verbose",
    )  # fmt: skip
    assert consume.returncode == 0, consume.stderr
    consumed = events(consume.stdout)
    assert consumed[0]["name"] == "startup_complete"
    assert [e["name"] for e in consumed[-2:]] == ["partitions_revoked", "shutdown_complete"]
    assigned = [e for e in consumed if e["name"] == "partitions_assigned"]
    assert assigned[0]["partitions"] == [{"topic": "verify", "partition": 0}, {"topic": "verify", "partition": 1}]
    batches = [e for e in consumed if e["name"] == "records_consumed"]
    assert sum(sum(s["count"] for s in e["partitions"]) for e in batches) == 6
    assert all(e["count"] >= sum(s["count"] for s in e["partitions"]) for e in batches)  # count: records polled
    seen: dict[int, list[int]] = {}
    for e in batches:
        for s in e["partitions"]:
            assert list(s) == ["topic", "partition", "count", "minOffset", "maxOffset"], s
            assert s["maxOffset"] - s["minOffset"] + 1 == s["count"]
            seen.setdefault(s["partition"], []).extend(range(s["minOffset"], s["maxOffset"] + 1))
    assert seen == {p: sorted(v) for p, v in by_partition.items()}
    records = [e for e in consumed if e["name"] == "record_data"]
    assert sorted(e["value"] for e in records) == [f"7.{i}" for i in range(6)]
    commits = [e for e in consumed if e["name"] == "offsets_committed"]
    assert commits and all(e["success"] is True and "error" not in e for e in commits), commits
    final = {(o["partition"]): o["offset"] for e in commits for o in e["offsets"]}
    assert final == {p: len(v) for p, v in by_partition.items()}
    # the group committed them: a second consumer in the group starts after them and stops on SIGTERM
    proc = subprocess.Popen(
        [sys.executable, "-m", "pykbroker.tools.verifiable_consumer", "--bootstrap-server", kafka.bootstrap,
         "--topic", "verify", "--group-id", "verify-g"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = []
        while not lines or json.loads(lines[-1])["name"] != "partitions_assigned":
            line = proc.stdout.readline()
            assert line, lines
            lines.append(line)
        proc.terminate()
        rest, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    later = events("".join(lines) + rest)
    assert [e["name"] for e in later] == [
        "startup_complete",
        "partitions_assigned",
        "partitions_revoked",
        "shutdown_complete",
    ], later


@pytest.mark.parametrize(
    "module", ["dump_log_segments", "consumer_performance", "verifiable_producer", "verifiable_consumer"]
)
def test_bad_arguments_exit_1_as_kafka_tools_do(module):
    run = tool(module, "--no-such-option")
    assert run.returncode == 1 and run.stdout == "", run
    assert "error: " in run.stderr.splitlines()[-1], run.stderr
