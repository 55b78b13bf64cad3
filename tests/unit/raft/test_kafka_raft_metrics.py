"""KafkaRaftMetrics (raft-metrics): gauges over a single voter's live state and the sensors the client records
(commit latency, election latency, appended records), read through the registry and the Prometheus names."""

from __future__ import annotations

import math

from pykbroker.metrics.jmx_names import to_prometheus
from pykbroker.raft.kafka_raft_metrics import GROUP, KafkaRaftMetrics, SampledStat
from pykbroker.raft.quorum_state_store import MemoryQuorumStateStore
from pykbroker.raft.replicated_log import MemoryReplicatedLog
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.time import MockTime
from tests.unit.raft.test_kafka_raft_client import new_client


def read(registry: MetricsRegistry, attribute: str) -> float:
    return registry.get(f"{GROUP},name={attribute}").value


def test_single_voter_gauges_and_sensors():
    time, registry = MockTime(), MetricsRegistry()
    client = new_client(MemoryReplicatedLog(), MemoryQuorumStateStore(), time)
    metrics = KafkaRaftMetrics(registry, client, time)
    assert client.metrics is metrics
    assert read(registry, "current-leader") == -1 and read(registry, "high-watermark") == -1
    assert registry.get(f"{GROUP},name=current-state").values() == [(("unattached",), 1.0)]
    assert math.isnan(read(registry, "election-latency-max"))
    client.poll_once()  # stands and wins at once
    assert registry.get(f"{GROUP},name=current-state").values() == [(("leader",), 1.0)]
    assert (read(registry, "current-leader"), read(registry, "current-vote"), read(registry, "current-epoch")) == (
        1,
        1,
        1,
    )
    assert read(registry, "high-watermark") == 1 == read(registry, "log-end-offset")
    assert read(registry, "election-latency-max") == 0
    epoch = client.leader_and_epoch.epoch
    client.prepare_append(epoch, ["a", "b", "c"])
    time.sleep(25)
    client.poll_once()
    assert read(registry, "high-watermark") == 4 == read(registry, "log-end-offset")
    assert read(registry, "log-end-epoch") == 1
    assert read(registry, "commit-latency-avg") == 0 == read(registry, "commit-latency-max")
    assert read(registry, "append-records-rate") == 3 / 30  # 3 records over one 30 s window
    metrics.close()
    assert client.metrics is None and registry.get(f"{GROUP},name=current-leader") is None


def test_sampled_stat_keeps_two_windows_of_thirty_seconds():
    time = MockTime()
    stat = SampledStat(time)
    stat.record(10)
    time.sleep(30_000)
    stat.record(30)
    assert (stat.avg(), stat.max(), stat.rate()) == (20, 30, 40 / 30)
    time.sleep(30_000)
    assert (stat.avg(), stat.max()) == (30, 30)
    time.sleep(30_000)
    assert math.isnan(stat.avg()) and stat.rate() == 0


def test_prometheus_names_are_the_exporters_kraft_rules():
    leader = to_prometheus("kafka.server:type=raft-metrics,name=current-leader", "gauge")
    assert leader is not None and (leader.name, leader.type) == ("kafka_server_raft_metrics_current_leader", "gauge")
    state = to_prometheus("kafka.server:type=raft-metrics,name=current-state", "gauge")
    assert state is not None and state.name == "kafka_server_raft_metrics_current_state_info"
    rate = to_prometheus("kafka.server:type=raft-metrics,name=append-records-rate", "gauge")
    assert rate is not None and rate.name == "kafka_server_raft_metrics_append_records_rate"


def test_poll_idle_ratio_is_the_waiting_share_of_each_cycle():
    time, registry = MockTime(), MetricsRegistry()
    client = new_client(MemoryReplicatedLog(), MemoryQuorumStateStore(), time)
    metrics = KafkaRaftMetrics(registry, client, time)
    assert math.isnan(read(registry, "poll-idle-ratio-avg"))
    metrics.update_poll_start(1000)  # waits 800 ms, then works 200 ms
    metrics.update_poll_end(1800)
    metrics.update_poll_start(2000)
    assert read(registry, "poll-idle-ratio-avg") == 0.8
    metrics.update_poll_end(2100)  # waits 100 ms, works 300 ms
    metrics.update_poll_start(2400)
    assert read(registry, "poll-idle-ratio-avg") == (0.8 + 0.25) / 2
