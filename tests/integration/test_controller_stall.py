"""A stalled active controller fences no broker (issue 23), a dead broker is still fenced.

Three combined nodes (``process.roles=broker,controller``) with 2 s broker sessions and a Raft fetch
timeout (20 s) longer than the pause, so the paused controller stays the active one and whatever it
fences on resuming would be committed. The active controller is stopped with SIGSTOP for longer than a
session and resumed with SIGCONT: its own silence must not expire any session (before the fix it fenced
all three brokers within milliseconds of resuming). A broker killed with SIGKILL is still fenced once
its session times out.
"""

from __future__ import annotations

import re
import signal
import time

import pytest

from tests.helpers.cluster import KRaftCluster
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

SESSION_MS = 2000
FENCING = re.compile(r"Fencing broker because its session has timed out.*broker=(\d+)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = KRaftCluster(
        tmp_path_factory.mktemp("stall"),
        controllers=3,
        brokers=0,
        combined=True,
        broker_session_timeout_ms=str(SESSION_MS),
        controller_quorum_fetch_timeout_ms="20000",
    )
    try:
        c.start()
        for node in c.controllers.values():
            assert node.wait_for_line("Transitioning from RECOVERY to RUNNING", 30), node.output()[-3000:]
        yield c
    finally:
        c.kill_all()


def fencings(cluster: KRaftCluster, marks: dict[int, int]) -> list[tuple[int, int]]:
    """(controller, broker) of every session-timeout fencing logged since ``marks`` (line counts)."""
    return [
        (i, int(m.group(1)))
        for i, node in cluster.controllers.items()
        for line in node.lines[marks[i] :]
        if (m := FENCING.search(line))
    ]


def test_a_paused_active_controller_fences_no_broker_when_it_resumes(cluster):
    leader = cluster.await_leader()
    node = cluster.controllers[leader]
    assert node.proc is not None
    marks = {i: len(n.lines) for i, n in cluster.controllers.items()}
    node.proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(SESSION_MS / 1000 + 0.5)  # every heartbeat it had is older than a session on resuming
    finally:
        node.proc.send_signal(signal.SIGCONT)
    # a whole session after resuming: whatever it would fence for its own silence, it has fenced by now
    time.sleep(SESSION_MS / 1000)
    assert fencings(cluster, marks) == [], "\n".join(node.lines[marks[leader] :])[-5000:]
    assert cluster.leader_id() == leader  # the case that matters: it stayed active, a fencing would commit
    assert node.wait_for_line(r"The controller did not run for \d+ ms", 1, marks[leader]), node.output()[-3000:]


def test_a_killed_broker_is_still_fenced_after_its_session(cluster):
    leader = cluster.await_leader()
    victim = next(i for i in cluster.controllers if i != leader)
    marks = {i: len(n.lines) for i, n in cluster.controllers.items()}
    cluster.controllers[victim].kill()
    killed = time.monotonic()
    wait_until(lambda: fencings(cluster, marks), SESSION_MS / 1000 + 5, message="the dead broker fenced")
    assert fencings(cluster, marks) == [(leader, victim)]
    assert time.monotonic() - killed >= SESSION_MS / 1000 - 0.5
