"""Pre-vote (KIP-996) in KafkaRaftClient, one RPC at a time: who grants a pre-vote (and that granting one
changes nothing), Prospective standing only on a majority, a voter that lost contact with a healthy leader
coming back without a new epoch, and the fallback for a voter without Vote v2 (UNSUPPORTED_VERSION)."""

from __future__ import annotations

from pykbroker.protocol.errors import NONE, UNSUPPORTED_VERSION
from pykbroker.raft.epoch_state import StateKind
from pykbroker.raft.quorum_state_store import ElectionState
from pykbroker.raft.raft_messages import RaftRequest, RaftResponse, VoteRequestData, VoteResponseData
from pykbroker.raft.replicated_log import LogRecord
from tests.unit.raft.test_kafka_raft_client_multi_voter import VOTERS, Cluster


def pre_vote(source, destination, epoch, last_epoch, last_offset):
    """``source``'s pre-vote to ``destination``: ``epoch`` is the one it would stand in (its epoch + 1)."""
    data = VoteRequestData(epoch, source, last_epoch, last_offset, voter_id=destination, pre_vote=True)
    return RaftRequest(7, source, destination, data)


def answer(client, request):
    client.handle(request)
    client.poll_once()
    (response,) = [m for m in client.drain_outbound() if isinstance(m, RaftResponse)]
    return response.data


def test_a_healthy_leader_and_its_followers_refuse_a_pre_vote_and_change_nothing():
    cluster = Cluster()
    cluster.elect(1)
    cluster.run(300)  # the followers fetched: their leader is healthy
    end = cluster.logs[1].end_offset()
    before = cluster.stores[2].state
    assert answer(cluster.clients[2], pre_vote(3, 2, 2, 1, end)) == VoteResponseData(NONE, 1, 1, False)
    assert answer(cluster.clients[1], pre_vote(3, 1, 2, 1, end)) == VoteResponseData(NONE, 1, 1, False)
    assert cluster.stores[2].state == before and cluster.clients[2].quorum.epoch == 1
    assert cluster.clients[1].quorum.is_leader() and cluster.clients[1].quorum.epoch == 1


def test_a_follower_grants_a_pre_vote_once_its_leader_is_silent_for_the_fetch_timeout():
    cluster = Cluster()
    cluster.elect(1)
    cluster.run(300)
    follower = cluster.clients[2]
    cluster.time.sleep(2001)  # no fetch answered within the fetch timeout (the request is handled first)
    end = cluster.logs[2].end_offset()
    assert answer(follower, pre_vote(3, 2, 2, 1, end)) == VoteResponseData(NONE, 1, 1, True)
    assert cluster.stores[2].state == ElectionState(1, 1, -1, frozenset(VOTERS))  # no vote, no new epoch


def test_a_pre_vote_needs_a_log_at_least_as_up_to_date_and_is_not_a_vote():
    cluster = Cluster()
    cluster.logs[2].append_as_leader([LogRecord(None, b"x")], 2)
    voter = cluster.clients[2]
    assert answer(voter, pre_vote(1, 2, 3, 1, 5)) == VoteResponseData(NONE, -1, 0, False)  # older last epoch
    assert answer(voter, pre_vote(3, 2, 3, 2, 1)) == VoteResponseData(NONE, -1, 0, True)
    assert answer(voter, pre_vote(1, 2, 3, 2, 1)) == VoteResponseData(NONE, -1, 0, True)  # many may be granted
    assert cluster.stores[2].state == ElectionState(0, -1, -1, frozenset(VOTERS))  # nothing persisted
    assert voter.quorum.epoch == 0 and voter.quorum.kind is StateKind.UNATTACHED


def test_a_follower_cut_off_from_a_healthy_leader_comes_back_without_a_new_epoch():
    """Before pre-vote, voter 3 stood in epoch after epoch while cut off, and when it came back its Vote in
    a higher epoch deposed the healthy leader."""
    cluster = Cluster()
    cluster.elect(1)
    cluster.run(300)
    cut_off_3 = lambda m: 3 in (m.source_id, m.destination_id)  # noqa: E731
    kinds = set()
    for _ in range(12):  # 6 s: three fetch timeouts
        cluster.run(500, drop=cut_off_3)
        kinds.add(cluster.clients[3].quorum.kind)
        assert cluster.clients[3].quorum.epoch == 1
    assert StateKind.PROSPECTIVE in kinds and StateKind.CANDIDATE not in kinds
    cluster.clients[1].prepare_append(1, ["after"])
    cluster.run(1000)  # healed
    assert cluster.clients[1].leader_and_epoch == (1, 1) and cluster.clients[1].quorum.is_leader()
    assert cluster.clients[3].leader_and_epoch == (1, 1)
    assert cluster.clients[3].high_watermark() == cluster.clients[1].high_watermark() == cluster.logs[1].end_offset()


def test_a_majority_of_pre_votes_makes_a_candidate_when_the_leader_is_gone():
    cluster = Cluster()
    cluster.elect(1)
    cluster.run(300)
    leader_gone = lambda m: 1 in (m.source_id, m.destination_id)  # noqa: E731
    cluster.run(6000, drop=leader_gone)
    leaders = [c for c in cluster.clients.values() if c.quorum.is_leader() and c.node_id != 1]
    assert len(leaders) == 1 and leaders[0].quorum.epoch >= 2


def test_a_voter_without_vote_v2_makes_the_prospective_stand_at_once():
    cluster = Cluster()
    cluster.time.sleep(2001)
    requests = cluster.poll(1)
    assert cluster.clients[1].quorum.kind is StateKind.PROSPECTIVE
    request = requests[0]
    no_v2 = VoteResponseData(UNSUPPORTED_VERSION, -1, -1, False)
    cluster.clients[1].handle(RaftResponse(request.correlation_id, request.destination_id, 1, no_v2))
    votes = cluster.poll(1)
    assert cluster.clients[1].quorum.kind is StateKind.CANDIDATE and cluster.clients[1].quorum.epoch == 1
    assert {m.destination_id for m in votes if not m.data.pre_vote} == {2, 3}
