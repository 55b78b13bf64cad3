"""A property of SharePartition (hypothesis): under any sequence of fetches (whole log batches), acknowledgements of
any range with any type, releases and lock expiries, the in-flight ranges exactly tile [SPSO, SPEO), the SPSO sits on
an undelivered or unfinished record, no offset is ever held by two members, an acknowledgement succeeds exactly when
every offset it names is held by the acknowledging member, and delivery counts never pass the limit."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from pykbroker.coordinator.share.persister import InMemoryPersister
from pykbroker.protocol import errors
from pykbroker.server.share.share_partition import (
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AckBatch,
    FetchedBatch,
    SharePartition,
    SharePartitionConfig,
)
from pykbroker.utils.time import MockTime
from pykbroker.utils.timer import Timer

LIMIT = 3
MEMBERS = ("a", "b", "c")

op = st.one_of(
    st.tuples(st.just("fetch"), st.sampled_from(MEMBERS), st.integers(1, 12)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 40), st.integers(0, 6), st.integers(0, 3)),
    st.tuples(st.just("mixed"), st.sampled_from(MEMBERS), st.integers(0, 40), st.lists(st.integers(0, 3), max_size=4)),
    st.tuples(st.just("release"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("expire"), st.integers(100, 1500)),
)


def _held(sp) -> dict[int, str]:
    return {o: m for first, last, state, _c, m in sp.snapshot() if state == ACQUIRED for o in range(first, last + 1)}


def _check(sp) -> None:
    snap = sp.snapshot()
    at = sp.start_offset
    for first, last, state, count, member in snap:
        assert first == at and first <= last
        assert 0 <= count <= LIMIT
        assert (member is not None) == (state == ACQUIRED)
        at = last + 1
    assert at == sp.end_offset
    if snap:
        assert snap[0][2] not in (ACKNOWLEDGED, ARCHIVED)


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=12), ops=st.lists(op, max_size=40))
def test_share_partition_invariants(sizes, ops):
    time = MockTime()
    timer = Timer("locks", time)
    config = SharePartitionConfig(record_lock_duration_ms=1000, delivery_count_limit=LIMIT, max_in_flight=100)
    sp = SharePartition("g", "t", uuid.UUID(int=1), 0, 0, config, InMemoryPersister(), timer)
    assert sp.maybe_initialize(lambda: 0).result() == errors.NONE
    batches, base = [], 0
    for size in sizes:
        batches.append(FetchedBatch(base, base + size - 1))
        base += size
    for o in ops:
        kind = o[0]
        if kind == "fetch":
            _, member, max_records = o
            held_before = _held(sp)
            start = sp.next_fetch_offset()
            read = [b for b in batches if b.last_offset >= start]
            got = sp.acquire(member, read, max_records)
            for r in got:
                for off in range(r.first_offset, r.last_offset + 1):
                    assert off not in held_before, "an offset acquired twice"
                assert 1 <= r.delivery_count <= LIMIT
        elif kind in ("ack", "mixed"):
            if kind == "ack":
                _, member, first, length, ack_type = o
                types = [ack_type]
                last = first + length
            else:
                _, member, first, types = o
                last = first + max(len(types), 1) - 1
                types = types or [1]
            held = _held(sp)
            expect_ok = all(held.get(off) == member for off in range(first, last + 1))
            code = sp.acknowledge(member, [AckBatch(first, last, types)]).result()
            assert (code == errors.NONE) == expect_ok, (code, first, last, held)
        elif kind == "release":
            sp.release_member(o[1]).result()
            assert o[1] not in _held(sp).values()
        else:
            time.sleep(o[1])
            timer.advance_clock(0)
        _check(sp)
