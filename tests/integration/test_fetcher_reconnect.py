"""A follower's fetcher does not wait out a dead connection once the metadata says the link came back.

A follower cut off from its leader and from the controller (its Fetch lost in the network, the process
stopped long enough to lose its session) is fenced and leaves the ISR. When it comes back it is unfenced,
and its fetcher reconnects at once instead of waiting ``replica.socket.timeout.ms`` (30 s here, set large
on purpose) for the answer to a request that was lost: the records written meanwhile reach it, and it
rejoins the ISR, within seconds.

Loopback loses nothing (a stopped process answers once it resumes), so the leader's inter-broker
address goes through a NetworkCutProxy (tests/helpers/proxy.py), whose cut loses what is sent, as a
network partition does; SIGSTOP on the follower makes it lose its session with the controller.
"""

from __future__ import annotations

import signal
import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.cluster import KRaftCluster, free_ports
from tests.helpers.proxy import NetworkCutProxy
from tests.helpers.replication import REPLICATION_TIMEOUTS, log_batches, partitions, raw_produce, wait_for_full_isr
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

LEADER, FOLLOWER = 101, 102
SOCKET_TIMEOUT_MS = 30_000


@pytest.fixture
def cluster(tmp_path):
    c = KRaftCluster(
        tmp_path,
        controllers=1,
        brokers=2,
        **{
            **REPLICATION_TIMEOUTS,
            "default.replication.factor": "2",
            "offsets.topic.replication.factor": "2",
            "replica.socket.timeout.ms": str(SOCKET_TIMEOUT_MS),
        },
    )
    port = free_ports(1)[0]
    proxy = NetworkCutProxy(port)
    leader = c.brokers[LEADER]
    leader.props["listeners"] = f"PLAINTEXT://127.0.0.1:{port}"
    leader.props["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
    try:
        c.start()
        yield c, proxy
    finally:
        follower = c.brokers[FOLLOWER].proc
        if follower is not None and follower.poll() is None:
            follower.send_signal(signal.SIGCONT)
        c.kill_all()
        proxy.close()


def _log_end(broker) -> int:
    batches = log_batches(broker.data_dir, "t", 0)
    return batches[-1][1] + 1 if batches else 0


def test_follower_cut_off_and_fenced_resumes_fetching_as_soon_as_it_is_back(cluster):
    cluster, proxy = cluster
    body = {
        "topics": [
            {
                "name": "t",
                "num_partitions": -1,
                "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [LEADER, FOLLOWER]}],
                "configs": [],
            }
        ],
        "timeout_ms": 10000,
        "validate_only": False,
    }
    with BrokerConnection.to(cluster.brokers[FOLLOWER].bootstrap, timeout=20) as c:
        created = c.request(ApiKeys.CREATE_TOPICS, 7, body)
    assert created["topics"][0]["error_code"] == 0, created
    wait_for_full_isr(lambda: cluster.bootstrap, "t", replicas=2)
    leader, follower = cluster.brokers[LEADER], cluster.brokers[FOLLOWER]
    assert raw_produce(leader.bootstrap, "t", 0, -1, [b"before"])["error_code"] == 0
    assert _log_end(follower) == 1

    proxy.cut()  # the follower's Fetch in flight is lost, and so is whatever it sends next
    follower.proc.send_signal(signal.SIGSTOP)  # ... and it loses its session: fenced, out of the ISR

    def fenced_and_out_of_isr() -> bool:  # a fenced replica is an offline one in Metadata
        p = partitions(leader.bootstrap, "t")[0]
        return p["isr_nodes"] == [LEADER] and p["offline_replicas"] == [FOLLOWER]

    wait_until(fenced_and_out_of_isr, 20, message="the follower fenced and out of the ISR")
    r = raw_produce(leader.bootstrap, "t", 0, 1, [b"while-cut-off"])
    assert r["error_code"] == 0, r
    end = r["base_offset"] + 1

    proxy.heal()
    follower.proc.send_signal(signal.SIGCONT)
    back = time.monotonic()
    wait_until(lambda: _log_end(follower) >= end, 15, interval=0.02, message="the follower fetched what it missed")
    caught_up_s = time.monotonic() - back
    wait_until(
        lambda: partitions(leader.bootstrap, "t")[0]["isr_nodes"] == [LEADER, FOLLOWER],
        10,
        message="the follower back in the ISR",
    )
    print(f"follower fetching again {caught_up_s:.2f} s after it came back (socket timeout {SOCKET_TIMEOUT_MS} ms)")
    assert caught_up_s < 10
