"""InMemoryPersister and merge_batches: the contract share partitions and the share coordinator rely on."""

import itertools
import uuid

from hypothesis import given
from hypothesis import strategies as st

from pykbroker.coordinator.share import persister as p
from pykbroker.coordinator.share.persister import InMemoryPersister, PersisterStateBatch, merge_batches

T = uuid.uuid4()


def test_read_before_initialize_is_unknown_and_initialize_then_read_returns_the_start_offset():
    per = InMemoryPersister()
    assert per.read_state("g", T, 0, 0).result().error_code == p.UNKNOWN_TOPIC_OR_PARTITION
    assert per.initialize_state("g", T, 0, 1, 42).result() == p.NONE
    got = per.read_state("g", T, 0, 0).result()
    assert (got.error_code, got.state_epoch, got.start_offset, got.state_batches) == (0, 1, 42, ())


def test_writes_merge_batches_and_fence_older_epochs():
    per = InMemoryPersister()
    per.initialize_state("g", T, 0, 1, 0).result()
    assert per.write_state("g", T, 0, 1, 5, 0, (PersisterStateBatch(0, 9, p.AVAILABLE, 1),)).result() == 0
    assert per.write_state("g", T, 0, 1, 5, -1, (PersisterStateBatch(3, 4, p.ACKNOWLEDGED, 1),)).result() == 0
    assert per.read_state("g", T, 0, 5).result().state_batches == (
        PersisterStateBatch(0, 2, p.AVAILABLE, 1),
        PersisterStateBatch(3, 4, p.ACKNOWLEDGED, 1),
        PersisterStateBatch(5, 9, p.AVAILABLE, 1),
    )
    assert per.write_state("g", T, 0, 1, 4, -1, ()).result() == p.FENCED_LEADER_EPOCH
    assert per.write_state("g", T, 0, 0, 5, -1, ()).result() == p.FENCED_STATE_EPOCH
    assert per.write_state("g", T, 0, 1, 5, 5, ()).result() == 0
    got = per.read_state("g", T, 0, 5).result()
    assert got.start_offset == 5 and got.state_batches == (PersisterStateBatch(5, 9, p.AVAILABLE, 1),)
    assert per.read_summary("g", T, 0, 5).result() == p.ReadSummaryResult(0, 1, 5, None, 5, -1)
    assert per.delete_state("g", T, 0).result() == 0
    assert per.read_summary("g", T, 0, 5).result().error_code == p.UNKNOWN_TOPIC_OR_PARTITION


batch = st.builds(
    lambda a, n, s, c: PersisterStateBatch(a, a + n, s, c),
    st.integers(0, 50),
    st.integers(0, 10),
    st.sampled_from([p.AVAILABLE, p.ACKNOWLEDGED, p.ARCHIVED]),
    st.integers(0, 3),
)


def _offsets(batches):
    return {o: (b.delivery_state, b.delivery_count) for b in batches for o in range(b.first_offset, b.last_offset + 1)}


def _disjoint(batches):
    out = []
    for b in batches:
        if all(b.last_offset < o.first_offset or b.first_offset > o.last_offset for o in out):
            out.append(b)
    return tuple(out)


@given(st.lists(batch, max_size=6), st.lists(batch, max_size=6), st.integers(0, 30))
def test_merge_batches_lays_updates_over_the_stored_state_from_the_start_offset(stored, updates, start):
    stored, updates = _disjoint(stored), _disjoint(updates)
    want = {**_offsets(stored), **_offsets(updates)}
    got = merge_batches(stored, updates, start)
    assert _offsets(got) == {o: v for o, v in want.items() if o >= start}
    assert list(got) == sorted(got)
    for a, b in itertools.pairwise(got):
        assert a.last_offset < b.first_offset
        assert a.last_offset + 1 < b.first_offset or (a.delivery_state, a.delivery_count) != (
            b.delivery_state,
            b.delivery_count,
        )
