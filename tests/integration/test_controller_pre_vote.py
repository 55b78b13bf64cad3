"""Pre-vote (KIP-996) between real controllers: a paused follower controller does not disturb a healthy
active controller when it resumes.

Three controller-only nodes and one broker, with the short quorum timeouts of tests.helpers.cluster
(election 600 ms, fetch 1200 ms). A follower controller is stopped with SIGSTOP for 2 fetch timeouts
(4 election timeouts) and resumed with SIGCONT, twice: its fetch timeout has expired, so it asks for
pre-votes, which the active controller and the other follower (whose leader is healthy) refuse. No
controller ever stands, the epoch (DescribeQuorum) does not change, and the quorum keeps committing (a
topic created after each pause moves the high watermark) with the resumed follower caught up. Without
pre-vote the resumed follower stood in a new epoch at once and its Vote deposed the active controller.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.helpers.cluster import QUORUM_TIMEOUTS, KRaftCluster
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

FETCH_TIMEOUT_S = int(QUORUM_TIMEOUTS["controller.quorum.fetch.timeout.ms"]) / 1000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = KRaftCluster(tmp_path_factory.mktemp("prevote"), controllers=3, brokers=1)
    try:
        c.start()
        yield c
    finally:
        c.kill_all()


def voter_end_offset(quorum: dict, node_id: int) -> int:
    return next(v["log_end_offset"] for v in quorum["current_voters"] if v["replica_id"] == node_id)


def test_a_paused_follower_controller_resumes_without_a_new_election(cluster):
    leader = cluster.await_leader()
    leader_address = cluster.controller_address(leader)
    epoch = cluster.describe_quorum(leader_address)["leader_epoch"]
    follower = min(i for i in cluster.controllers if i != leader)
    node = cluster.controllers[follower]
    assert node.proc is not None
    marks = {i: len(n.lines) for i, n in cluster.controllers.items()}
    for pause in range(2):
        node.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(2 * FETCH_TIMEOUT_S)
        finally:
            node.proc.send_signal(signal.SIGCONT)
        resumed_hw = cluster.describe_quorum(leader_address)["high_watermark"]
        create_topic(cluster.bootstrap, f"after-pause-{pause}", partitions=1)

        def caught_up(hw=resumed_hw):
            q = cluster.describe_quorum(leader_address)
            assert (q["error_code"], q["leader_id"], q["leader_epoch"]) == (0, leader, epoch), f"new election: {q}"
            return q["high_watermark"] > hw and voter_end_offset(q, follower) >= q["high_watermark"] > hw

        wait_until(caught_up, 4 * FETCH_TIMEOUT_S, message="the resumed follower caught up with new commits")
        time.sleep(FETCH_TIMEOUT_S)  # what it would do on resuming (stand, depose) it has done by now
        q = cluster.describe_quorum(leader_address)
        assert (q["error_code"], q["leader_id"], q["leader_epoch"]) == (0, leader, epoch)
    for i, n in cluster.controllers.items():
        stood = [line for line in n.lines[marks[i] :] if "CandidateState" in line]
        assert stood == [], f"controller {i} stood:\n" + "\n".join(stood)
