"""Leader elections on the controller: ElectLeaders PREFERRED/UNCLEAN with Kafka's errors, the periodic
preferred-leader rebalance, and unclean election when the last ISR member is fenced."""

from __future__ import annotations

import pytest

from pykbroker.metadata import partition_change_builder
from pykbroker.metadata.configuration_control_manager import ConfigSchema
from pykbroker.metadata.leader_election import PREFERRED, UNCLEAN, balance_partition_leaders, elect_leaders
from pykbroker.metadata.records import NO_LEADER
from pykbroker.protocol import errors
from tests.unit.metadata.test_replication_control_manager import Ctx, t


def part(ctx, topic="a", index=0):
    return ctx.repl.topics[ctx.repl.topics_by_name[topic]].parts[index]


def results(result):
    return {
        (r["topic"], p["partition_id"]): p["error_code"]
        for r in result.response["replica_election_results"]
        for p in r["partition_result"]
    }


def fence(ctx, broker):
    records: list = []
    ctx.repl.handle_broker_fenced(broker, records)
    ctx.replay(records)


def unfence(ctx, broker):
    records: list = []
    ctx.repl.handle_broker_unfenced(broker, records)
    ctx.replay(records)


@pytest.fixture
def ctx():
    c = Ctx(num_brokers=3)
    c.create(t("a", p=2, rf=3))
    return c


def test_preferred_election_moves_leadership_back(ctx):
    preferred = part(ctx).replicas[0]
    assert part(ctx).leader == preferred
    fence(ctx, preferred)
    assert part(ctx).leader != preferred and preferred not in part(ctx).isr
    request = {"election_type": PREFERRED, "topic_partitions": [{"topic": "a", "partitions": [0]}]}
    assert results(elect_leaders(ctx.repl, request)) == {("a", 0): errors.PREFERRED_LEADER_NOT_AVAILABLE}
    unfence(ctx, preferred)  # back, but not in the ISR until its leader adds it
    assert results(elect_leaders(ctx.repl, request)) == {("a", 0): errors.PREFERRED_LEADER_NOT_AVAILABLE}
    p = part(ctx)
    ctx.replay(
        [partition_change_builder.build(ctx.repl.topics_by_name["a"], 0, p, [*p.isr, preferred], lambda r: True)]
    )
    result = elect_leaders(ctx.repl, request)
    assert results(result) == {("a", 0): errors.NONE}
    ctx.replay(result.records)
    assert part(ctx).leader == preferred
    assert results(elect_leaders(ctx.repl, request)) == {("a", 0): errors.ELECTION_NOT_NEEDED}


def test_all_partitions_leave_out_those_needing_no_election_and_unknown_ones_fail(ctx):
    assert elect_leaders(ctx.repl, {"election_type": PREFERRED, "topic_partitions": None}).response == {
        "error_code": errors.NONE,
        "replica_election_results": [],
    }
    wanted = [{"topic": "a", "partitions": [7]}, {"topic": "zz", "partitions": [0]}]
    request = {"election_type": PREFERRED, "topic_partitions": wanted}
    assert results(elect_leaders(ctx.repl, request)) == {
        ("a", 7): errors.UNKNOWN_TOPIC_OR_PARTITION,
        ("zz", 0): errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    bad = {"election_type": 5, "topic_partitions": [{"topic": "a", "partitions": [0]}]}
    assert results(elect_leaders(ctx.repl, bad)) == {("a", 0): errors.INVALID_REQUEST}


def test_unclean_election_by_request(ctx):
    p = part(ctx)
    others = [b for b in p.replicas if b != p.leader]
    # Shrink the ISR to the leader, then fence it: the partition keeps its last ISR member, leaderless.
    for b in others:
        fence(ctx, b)
    leader = part(ctx).leader
    fence(ctx, leader)
    assert part(ctx).leader == NO_LEADER and part(ctx).isr == (leader,)
    request = {"election_type": UNCLEAN, "topic_partitions": [{"topic": "a", "partitions": [0]}]}
    assert results(elect_leaders(ctx.repl, request)) == {("a", 0): errors.ELIGIBLE_LEADERS_NOT_AVAILABLE}
    ctx.cluster.brokers[others[0]].fenced = False  # back, without the unfence handler's election
    result = elect_leaders(ctx.repl, request)
    assert results(result) == {("a", 0): errors.NONE}
    ctx.replay(result.records)
    assert part(ctx).leader == others[0] and part(ctx).isr == (others[0],)
    assert results(elect_leaders(ctx.repl, request)) == {("a", 0): errors.ELECTION_NOT_NEEDED}


class UncleanSchema(ConfigSchema):
    def unclean_leader_election_enabled(self, overrides):
        return overrides.get("unclean.leader.election.enable", "true") == "true"


def test_unfenced_out_of_sync_replica_leads_only_with_unclean_enabled():
    for enabled in (False, True):
        c = Ctx(num_brokers=3, schema=UncleanSchema() if enabled else None)
        c.create(t("a", p=1, rf=3))
        p = part(c)
        others = [b for b in p.replicas if b != p.leader]
        for b in others:
            fence(c, b)
        fence(c, p.leader)
        assert part(c).leader == NO_LEADER
        unfence(c, others[0])
        if enabled:
            assert part(c).leader == others[0] and part(c).isr == (others[0],)
        else:
            assert part(c).leader == NO_LEADER and part(c).isr == (p.leader,)


def test_balance_moves_leaders_to_preferred_replicas(ctx):
    preferred = {i: part(ctx, index=i).replicas[0] for i in (0, 1)}
    fence(ctx, preferred[0])
    records: list = []
    ctx.repl.handle_broker_unfenced(preferred[0], records)
    ctx.replay(records)
    p = part(ctx)
    assert p.leader != preferred[0]
    assert balance_partition_leaders(ctx.repl).records == []  # the preferred replica is not in the ISR yet
    ctx.replay(
        [partition_change_builder.build(ctx.repl.topics_by_name["a"], 0, p, [*p.isr, preferred[0]], lambda r: True)]
    )
    result = balance_partition_leaders(ctx.repl)
    assert len(result.records) == 1
    ctx.replay(result.records)
    assert part(ctx).leader == preferred[0]
    assert balance_partition_leaders(ctx.repl, max_elections=0).records == []
