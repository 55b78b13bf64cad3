"""DescribeShareGroupOffsets / AlterShareGroupOffsets / DeleteShareGroupOffsets on the group coordinator, over the
InMemoryPersister: start offsets set with a new state epoch, described, deleted; an active group refuses changes;
DeleteGroups forgets the group's share-partition state; the topics with state survive a coordinator failover."""

from __future__ import annotations

import pytest

from pykbroker.protocol import errors
from pykbroker.protocol.types import ZERO_UUID
from tests.unit.coordinator.share.share_harness import T1, T2, hb, share_harness
from tests.unit.coordinator.test_consumer_group_records import failover


@pytest.fixture
def h():
    harness = share_harness()
    yield harness
    harness.close()


def _call(fn, *args) -> dict:
    out: list[dict] = []
    fn(*args, out.append)
    assert len(out) == 1
    return out[0]


def describe(h, topics=None, group="sg") -> dict:
    return _call(h.coordinator.share_offsets.describe, group, topics)


def offsets(entry: dict) -> dict[tuple[str, int], tuple[int, int]]:
    return {
        (t["topic_name"], p["partition_index"]): (p["start_offset"], p["error_code"])
        for t in entry["topics"]
        for p in t["partitions"]
    }


def test_alter_describe_and_delete_offsets(h):
    hb(h, "A")
    # assigned partitions have no state yet: start offset -1
    assert offsets(describe(h)) == {("t", p): (-1, 0) for p in range(4)}
    with pytest.raises(errors.GroupNotEmptyError):
        _call(h.coordinator.share_offsets.alter, "sg", [])
    hb(h, "A", -1, topics=None)
    altered = _call(
        h.coordinator.share_offsets.alter,
        "sg",
        [
            {
                "topic_name": "t",
                "partitions": [{"partition_index": 0, "start_offset": 5}, {"partition_index": 9, "start_offset": 1}],
            },
            {"topic_name": "u", "partitions": [{"partition_index": 1, "start_offset": 7}]},
            {"topic_name": "nope", "partitions": [{"partition_index": 0, "start_offset": 1}]},
        ],
    )
    codes = {
        (t["topic_name"], p["partition_index"]): p["error_code"] for t in altered["responses"] for p in t["partitions"]
    }
    assert codes == {
        ("t", 0): 0,
        ("t", 9): errors.UNKNOWN_TOPIC_OR_PARTITION,
        ("u", 1): 0,
        ("nope", 0): errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert {t["topic_name"]: t["topic_id"] for t in altered["responses"]} == {"t": T1, "u": T2, "nope": ZERO_UUID}
    assert h.coordinator.persister.read_summary("sg", T1, 0, -1).result().state_epoch == 1
    described = offsets(describe(h))
    assert described[("t", 0)] == (5, 0) and described[("u", 1)] == (7, 0) and described[("t", 1)] == (-1, 0)
    assert offsets(describe(h, [{"topic_name": "nope", "partitions": [0]}])) == {
        ("nope", 0): (-1, errors.UNKNOWN_TOPIC_OR_PARTITION)
    }
    # a second reset: a newer state epoch
    _call(
        h.coordinator.share_offsets.alter,
        "sg",
        [{"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 2}]}],
    )
    summary = h.coordinator.persister.read_summary("sg", T1, 0, -1).result()
    assert (summary.state_epoch, summary.start_offset) == (2, 2)
    # the topics with state survive a failover
    failover(h, "sg")
    assert offsets(describe(h))[("u", 1)] == (7, 0)
    deleted = _call(h.coordinator.share_offsets.delete, "sg", [{"topic_name": "t"}, {"topic_name": "nope"}])
    assert [(t["topic_name"], t["error_code"]) for t in deleted["responses"]] == [
        ("t", 0),
        ("nope", errors.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert (
        h.coordinator.persister.read_summary("sg", T1, 0, -1).result().error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert set(offsets(describe(h))) == {("u", 1)}
    # DeleteGroups forgets the rest
    h.coordinator.delete_group("sg", lambda code: None)
    assert (
        h.coordinator.persister.read_summary("sg", T2, 1, -1).result().error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    )


def test_offsets_of_missing_or_other_groups(h):
    assert describe(h, group="missing")["error_code"] == errors.GROUP_ID_NOT_FOUND
    h.join("classic")
    assert describe(h, group="classic")["error_code"] == errors.GROUP_ID_NOT_FOUND
    with pytest.raises(errors.GroupIdNotFoundError):
        _call(h.coordinator.share_offsets.delete, "missing", [])


def test_describe_v1_lag_from_the_latest_offsets_and_their_errors(h):
    """KIP-1226 as Kafka's GroupCoordinatorService: lag = latest offset - start offset - delivery complete count; -1
    without a start offset or a count; a partition whose latest offset failed answers that error."""
    from concurrent.futures import Future

    from pykbroker.coordinator.share.persister import ACKNOWLEDGED, PersisterStateBatch

    asked: list = []

    def latest_offsets(tps):
        asked.append(sorted(tps))
        f: Future = Future()
        f.set_result({("t", 0): (20, errors.NONE), ("t", 1): (-1, errors.NOT_LEADER_OR_FOLLOWER)})
        return f

    h.coordinator.share_offsets.latest_offsets = latest_offsets
    hb(h, "A")
    hb(h, "A", -1, topics=None)
    _call(
        h.coordinator.share_offsets.alter,
        "sg",
        [{"topic_name": "t", "partitions": [{"partition_index": p, "start_offset": 5} for p in (0, 1)]}],
    )
    per = h.coordinator.persister
    epoch = per.read_summary("sg", T1, 0, -1).result().state_epoch
    batches = (PersisterStateBatch(7, 9, ACKNOWLEDGED, 1),)
    assert per.write_state("sg", T1, 0, epoch, 0, 5, batches, 3).result() == errors.NONE

    def parts(entry):
        return {p["partition_index"]: p for t in entry["topics"] for p in t["partitions"]}

    out: list[dict] = []
    h.coordinator.share_offsets.describe("sg", None, out.append, True)
    got = parts(out[0])
    assert (got[0]["start_offset"], got[0]["lag"], got[0]["error_code"]) == (5, 20 - 5 - 3, errors.NONE)
    assert (got[1]["error_code"], got[1]["lag"]) == (errors.NOT_LEADER_OR_FOLLOWER, -1)  # the latest offset failed
    assert got[2]["lag"] == -1 and got[2]["error_code"] == errors.NONE  # no state: not asked
    assert asked == [[("t", 0), ("t", 1)]]
    # version 0: no latest offsets asked, every lag -1
    assert all(p["lag"] == -1 for p in parts(_call(h.coordinator.share_offsets.describe, "sg", None)).values())
    assert len(asked) == 1
