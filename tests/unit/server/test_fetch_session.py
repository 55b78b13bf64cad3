"""Incremental fetch sessions (KIP-227): FetchManager, contexts, FetchSessionCache (after Kafka's
FetchSessionTest)."""

from __future__ import annotations

import random
import threading
import uuid

import pytest

from pykbroker.protocol import errors
from pykbroker.protocol.codec import Output, decode, encode, encode_into
from pykbroker.protocol.schemas import REQUESTS, RESPONSES
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    NUM_INCREMENTAL_FETCH_PARTITIONS_CACHED,
    NUM_INCREMENTAL_FETCH_SESSIONS,
    FetchManager,
    FetchPartition,
    FetchSessionCache,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    SessionlessFetchContext,
    partition_response,
)
from pykbroker.server.fetch_session.fetch_metadata import next_epoch
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.time import MockTime

FOO_ID = uuid.UUID("11111111-1111-1111-1111-111111111111")
BAR_ID = uuid.UUID("22222222-2222-2222-2222-222222222222")
NAMES = {FOO_ID: "foo", BAR_ID: "bar"}
V_NAMES = 12  # last version naming topics
V_IDS = 13  # first version with topic ids


# ------------------------------------------------------------------------------------------------------ helpers


def part(p: int, offset: int = 0, max_bytes: int = 100, **kw) -> dict:
    d = {
        "partition": p,
        "fetch_offset": offset,
        "partition_max_bytes": max_bytes,
        "current_leader_epoch": -1,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
    }
    d.update(kw)
    return d


def topic(name_or_id, *partitions: dict) -> dict:
    if isinstance(name_or_id, uuid.UUID):
        return {"topic": "", "topic_id": name_or_id, "partitions": list(partitions)}
    return {"topic": name_or_id, "topic_id": ZERO_UUID, "partitions": list(partitions)}


def forget(name_or_id, *partitions: int) -> dict:
    if isinstance(name_or_id, uuid.UUID):
        return {"topic": "", "topic_id": name_or_id, "partitions": list(partitions)}
    return {"topic": name_or_id, "topic_id": ZERO_UUID, "partitions": list(partitions)}


def resp(hw: int, lso: int = 0, records=None, error: int = 0, **kw) -> dict:
    d = {
        "error_code": error,
        "high_watermark": hw,
        "last_stable_offset": hw,
        "log_start_offset": lso,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": records,
    }
    d.update(kw)
    return d


def answered(responses: list[dict]) -> list[tuple]:
    """[(topic id or name, partition, high watermark)] in response order."""
    return [
        (t["topic_id"] if t["topic_id"] != ZERO_UUID else t["topic"], p["partition_index"], p["high_watermark"])
        for t in responses
        for p in t["partitions"]
    ]


@pytest.fixture
def time():
    return MockTime(current_ms=1_000_000)


@pytest.fixture
def cache():
    return FetchSessionCache(max_entries=10, evict_ms=1000, rng=random.Random(42))


@pytest.fixture
def manager(cache, time):
    return FetchManager(cache, time)


def full(manager, version, topics, session_id=0, follower=False, results=None):
    """Full fetch with epoch INITIAL; answers every partition with hw 10 unless ``results`` given."""
    ctx = manager.new_context(version, session_id, INITIAL_EPOCH, topics, [], NAMES, follower)
    assert isinstance(ctx, FullFetchContext)
    if results is None:
        results = {p.key: resp(10) for p in ctx.partitions()}
    return ctx, ctx.update_and_generate_response_data(results)


def incremental(manager, version, session_id, epoch, topics=(), forgotten=(), names=NAMES):
    return manager.new_context(version, session_id, epoch, list(topics), list(forgotten), names, False)


# ---------------------------------------------------------------------------------------------------- metadata


def test_next_epoch_wraps_to_one_and_final_stays_final():
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(0x7FFFFFFF) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH
    assert next_epoch(-7) == FINAL_EPOCH


# ------------------------------------------------------------------------------------------------- sessionless


def test_sessionless_full_fetch_returns_all_partitions_without_session(manager, cache):
    topics = [topic("foo", part(0, 5), part(1, 7, 200)), topic("bar", part(0))]
    ctx = manager.new_context(V_NAMES, 0, FINAL_EPOCH, topics, [], {}, False)
    assert isinstance(ctx, SessionlessFetchContext)
    assert ctx.partitions() == [
        FetchPartition(ZERO_UUID, "foo", 0, 5, 100),
        FetchPartition(ZERO_UUID, "foo", 1, 7, 200),
        FetchPartition(ZERO_UUID, "bar", 0, 0, 100),
    ]
    assert ctx.get_fetch_offset(("foo", 1)) == 7
    results = {("foo", 0): resp(10), ("foo", 1): resp(10), ("bar", 0): resp(3)}
    error, session_id, responses = ctx.update_and_generate_response_data(results)
    assert (error, session_id) == (errors.NONE, INVALID_SESSION_ID)
    assert answered(responses) == [("foo", 0, 10), ("foo", 1, 10), ("bar", 0, 3)]
    assert [t["topic"] for t in responses] == ["foo", "bar"]
    assert cache.num_sessions == 0


def test_requests_before_v7_are_sessionless(manager, cache):
    ctx = manager.new_context(6, 1234, 5, [topic("foo", part(0))], [], {}, False)
    assert isinstance(ctx, SessionlessFetchContext)
    assert ctx.update_and_generate_response_data({("foo", 0): resp(1)}).session_id == 0


def test_response_keeps_result_order_and_groups_adjacent_partitions_only(manager):
    topics = [topic("foo", part(0), part(1)), topic("bar", part(0))]
    ctx = manager.new_context(V_NAMES, 0, FINAL_EPOCH, topics, [], {}, False)
    results = {("foo", 0): resp(1), ("bar", 0): resp(2), ("foo", 1): resp(3)}
    _, _, responses = ctx.update_and_generate_response_data(results)
    assert [(t["topic"], [p["partition_index"] for p in t["partitions"]]) for t in responses] == [
        ("foo", [0]),
        ("bar", [0]),
        ("foo", [1]),
    ]


# ---------------------------------------------------------------------------------------------- full / create


def test_full_fetch_creates_session(manager, cache):
    _, (error, session_id, responses) = full(manager, V_NAMES, [topic("foo", part(0), part(1))])
    assert error == errors.NONE and session_id > 0
    assert answered(responses) == [("foo", 0, 10), ("foo", 1, 10)]
    session = cache.get(session_id)
    assert session is not None and session.epoch == 1 and not session.privileged and not session.uses_topic_ids
    assert cache.num_sessions == 1 and cache.num_partitions == 2
    assert cache.metrics.get(NUM_INCREMENTAL_FETCH_SESSIONS).value == 1
    assert cache.metrics.get(NUM_INCREMENTAL_FETCH_PARTITIONS_CACHED).value == 2


def test_full_fetch_naming_an_existing_session_closes_it(manager, cache):
    _, first = full(manager, V_NAMES, [topic("foo", part(0))])
    _, second = full(manager, V_NAMES, [topic("foo", part(0))], session_id=first.session_id)
    assert cache.get(first.session_id) is None and cache.get(second.session_id) is not None
    ctx = manager.new_context(V_NAMES, second.session_id, FINAL_EPOCH, [topic("foo", part(0))], [], {}, False)
    assert isinstance(ctx, SessionlessFetchContext) and cache.num_sessions == 0


def test_cache_full_answers_session_id_zero(time):
    cache = FetchSessionCache(max_entries=1, evict_ms=1000)
    manager = FetchManager(cache, time)
    _, first = full(manager, V_NAMES, [topic("foo", part(0), part(1))])
    _, second = full(manager, V_NAMES, [topic("foo", part(0), part(1))])
    assert first.session_id > 0 and second.session_id == INVALID_SESSION_ID
    assert second.error_code == errors.NONE and len(answered(second.responses)) == 2
    assert cache.num_sessions == 1 and cache.evictions == 0


# ------------------------------------------------------------------------------------------------- incremental


def test_incremental_fetch_with_unchanged_data_returns_no_partitions(manager, cache):
    _, created = full(manager, V_NAMES, [topic("foo", part(0, 5), part(1, 7))])
    ctx = incremental(manager, V_NAMES, created.session_id, 1)
    assert isinstance(ctx, IncrementalFetchContext)
    assert [(p.topic, p.partition, p.fetch_offset) for p in ctx.partitions()] == [("foo", 0, 5), ("foo", 1, 7)]
    error, session_id, responses = ctx.update_and_generate_response_data({("foo", 0): resp(10), ("foo", 1): resp(10)})
    assert (error, session_id, responses) == (errors.NONE, created.session_id, [])
    assert cache.get(created.session_id).epoch == 2


def test_incremental_fetch_returns_changed_high_watermark_and_caches_it(manager):
    _, created = full(manager, V_NAMES, [topic("foo", part(0), part(1))])
    ctx = incremental(manager, V_NAMES, created.session_id, 1)
    out = ctx.update_and_generate_response_data({("foo", 0): resp(10), ("foo", 1): resp(12)})
    assert answered(out.responses) == [("foo", 1, 12)]
    ctx = incremental(manager, V_NAMES, created.session_id, 2)
    assert ctx.update_and_generate_response_data({("foo", 0): resp(10), ("foo", 1): resp(12)}).responses == []


def test_incremental_fetch_inclusion_rules(manager):
    _, created = full(manager, V_NAMES, [topic("foo", *(part(p) for p in range(6)))])
    ctx = incremental(manager, V_NAMES, created.session_id, 1)
    results = {
        ("foo", 0): resp(10),  # unchanged
        ("foo", 1): resp(10, records=b"x" * 8),  # new data
        ("foo", 2): resp(10, lso=4),  # log start offset moved
        ("foo", 3): resp(10, preferred_read_replica=2),  # preferred replica
        ("foo", 4): resp(10, diverging_epoch={"epoch": 3, "end_offset": 7}),  # diverging epoch
        ("foo", 5): resp(10, error=errors.NOT_LEADER_OR_FOLLOWER),  # error
    }
    out = ctx.update_and_generate_response_data(results)
    assert [p for _, p, _ in answered(out.responses)] == [1, 2, 3, 4, 5]
    # The error reset the cached high watermark: the partition is sent again once the error clears.
    ctx = incremental(manager, V_NAMES, created.session_id, 2)
    again = {("foo", p): resp(10, lso=4 if p == 2 else 0) for p in range(6)}
    assert [p for _, p, _ in answered(ctx.update_and_generate_response_data(again).responses)] == [5]


def test_partitions_with_records_move_to_the_end_of_the_fetch_order(manager):
    _, created = full(manager, V_NAMES, [topic("foo", part(0), part(1), part(2))])
    ctx = incremental(manager, V_NAMES, created.session_id, 1)
    ctx.update_and_generate_response_data(
        {("foo", 0): resp(11, records=b"abc"), ("foo", 1): resp(11), ("foo", 2): resp(10)}
    )
    ctx = incremental(manager, V_NAMES, created.session_id, 2)
    assert [p.partition for p in ctx.partitions()] == [1, 2, 0]


def test_incremental_fetch_adds_and_updates_partitions(manager, cache):
    _, created = full(manager, V_NAMES, [topic("foo", part(0, 5))])
    ctx = incremental(
        manager,
        V_NAMES,
        created.session_id,
        1,
        [topic("foo", part(0, 9, 300, current_leader_epoch=4)), topic("bar", part(2, 1))],
    )
    assert [tuple(p) for p in ctx.partitions()] == [
        (ZERO_UUID, "foo", 0, 9, 300, 4, -1, -1),
        (ZERO_UUID, "bar", 2, 1, 100, -1, -1, -1),
    ]
    assert ctx.get_fetch_offset(("foo", 0)) == 9 and cache.num_partitions == 2
    # The new partition has never been answered: it is sent even without news.
    out = ctx.update_and_generate_response_data({("foo", 0): resp(10), ("bar", 2): resp(0, lso=-1)})
    assert answered(out.responses) == [("bar", 2, 0)]


def test_forgotten_topics_are_removed_and_an_empty_session_is_closed(manager, cache):
    _, created = full(manager, V_NAMES, [topic("foo", part(0), part(1)), topic("bar", part(0))])
    ctx = incremental(manager, V_NAMES, created.session_id, 1, forgotten=[forget("foo", 0, 1)])
    assert [(p.topic, p.partition) for p in ctx.partitions()] == [("bar", 0)]
    assert cache.num_partitions == 1
    ctx = incremental(manager, V_NAMES, created.session_id, 2, forgotten=[forget("bar", 0)])
    assert isinstance(ctx, SessionlessFetchContext) and ctx.partitions() == []
    assert cache.get(created.session_id) is None and cache.num_partitions == 0


# ---------------------------------------------------------------------------------------------- session errors


def test_unknown_session_is_fetch_session_id_not_found(manager):
    for session_id in (123456, -5, 0x7FFFFFFF):
        ctx = incremental(manager, V_NAMES, session_id, 1)
        assert isinstance(ctx, SessionErrorContext) and ctx.partitions() == []
        assert ctx.update_and_generate_response_data({}) == (errors.FETCH_SESSION_ID_NOT_FOUND, 0, [])


def test_wrong_epoch_is_invalid_fetch_session_epoch(manager, cache):
    _, created = full(manager, V_NAMES, [topic("foo", part(0))])
    for epoch in (2, 5, -3):
        ctx = incremental(manager, V_NAMES, created.session_id, epoch)
        assert ctx.update_and_generate_response_data({}) == (errors.INVALID_FETCH_SESSION_EPOCH, 0, [])
    assert cache.get(created.session_id).epoch == 1  # errors do not advance the session


def test_duplicate_request_is_detected_when_generating_the_response(manager):
    _, created = full(manager, V_NAMES, [topic("foo", part(0))])
    first = incremental(manager, V_NAMES, created.session_id, 1)
    second = incremental(manager, V_NAMES, created.session_id, 2)  # overtakes the first
    assert first.update_and_generate_response_data({("foo", 0): resp(11)}) == (
        errors.INVALID_FETCH_SESSION_EPOCH,
        created.session_id,
        [],
    )
    assert first.get_throttled_response(5)["error_code"] == errors.INVALID_FETCH_SESSION_EPOCH
    assert answered(second.update_and_generate_response_data({("foo", 0): resp(11)}).responses) == [("foo", 0, 11)]


def test_topic_id_usage_must_match_the_session(manager):
    _, by_name = full(manager, V_NAMES, [topic("foo", part(0))])
    _, by_id = full(manager, V_IDS, [topic(FOO_ID, part(0))])
    ctx = incremental(manager, V_IDS, by_name.session_id, 1)
    assert ctx.update_and_generate_response_data({}).error_code == errors.FETCH_SESSION_TOPIC_ID_ERROR
    ctx = incremental(manager, V_NAMES, by_id.session_id, 1)
    assert ctx.update_and_generate_response_data({}).error_code == errors.FETCH_SESSION_TOPIC_ID_ERROR


# ----------------------------------------------------------------------------------------------- topic ids v13+


def test_v13_sessions_key_partitions_by_topic_id_and_resolve_names_later(manager, cache):
    unknown = uuid.UUID("33333333-3333-3333-3333-333333333333")
    ctx = manager.new_context(
        V_IDS, 0, INITIAL_EPOCH, [topic(FOO_ID, part(0)), topic(unknown, part(1))], [], NAMES, False
    )
    assert [(p.topic_id, p.topic, p.key) for p in ctx.partitions()] == [
        (FOO_ID, "foo", (FOO_ID, 0)),
        (unknown, None, (unknown, 1)),
    ]
    results = {(FOO_ID, 0): resp(10), (unknown, 1): partition_response(1, errors.UNKNOWN_TOPIC_ID)}
    error, session_id, responses = ctx.update_and_generate_response_data(results)
    assert error == errors.NONE and session_id > 0 and cache.get(session_id).uses_topic_ids
    assert [(t["topic_id"], t["topic"]) for t in responses] == [(FOO_ID, "foo"), (unknown, None)]
    # The topic becomes known: the incremental context resolves its name and the handler can read it.
    names = {**NAMES, unknown: "baz"}
    ctx = incremental(manager, V_IDS, session_id, 1, names=names)
    assert [(p.topic, p.partition) for p in ctx.partitions()] == [("foo", 0), ("baz", 1)]
    out = ctx.update_and_generate_response_data({(FOO_ID, 0): resp(10), (unknown, 1): resp(4)})
    assert [(t["topic_id"], t["topic"], [p["high_watermark"] for p in t["partitions"]]) for t in out.responses] == [
        (unknown, "baz", [4])
    ]
    # Forgetting by id.
    ctx = incremental(manager, V_IDS, session_id, 2, forgotten=[forget(FOO_ID, 0)], names=names)
    assert [p.key for p in ctx.partitions()] == [(unknown, 1)]


def test_decoded_requests_with_names_ids_and_replica_state(manager, cache):
    schema = REQUESTS[1]
    body = {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "session_id": 0,
        "session_epoch": INITIAL_EPOCH,
        "topics": [{"topic": "foo", "topic_id": FOO_ID, "partitions": [part(0, 3)]}],
        "forgotten_topics_data": [],
        "replica_state": {"replica_id": 2, "replica_epoch": 7},
    }
    v12 = decode(schema, 12, encode(schema, 12, dict(body, replica_id=2)))[0]
    ctx = manager.new_context_from_request(12, v12, NAMES)
    assert ctx.partitions() == [FetchPartition(ZERO_UUID, "foo", 0, 3, 100)] and ctx.is_from_follower
    v15 = decode(schema, 15, encode(schema, 15, body))[0]
    ctx = manager.new_context_from_request(15, v15, NAMES)
    assert ctx.partitions() == [FetchPartition(FOO_ID, "foo", 0, 3, 100)] and ctx.is_from_follower
    _, session_id, _ = ctx.update_and_generate_response_data({(FOO_ID, 0): resp(5)})
    assert cache.get(session_id).privileged


# ---------------------------------------------------------------------------------------------- sizes, throttle


def test_response_size_and_throttled_response_leave_the_session_unchanged(manager):
    _, created = full(manager, V_IDS, [topic(FOO_ID, part(0), part(1))])
    ctx = incremental(manager, V_IDS, created.session_id, 1)
    results = {(FOO_ID, 0): resp(10), (FOO_ID, 1): resp(20, records=b"r" * 50)}
    size = ctx.get_response_size(results, V_IDS)
    assert ctx.get_throttled_response(100) == {
        "throttle_time_ms": 100,
        "error_code": 0,
        "session_id": created.session_id,
        "responses": [],
        "node_endpoints": [],
    }
    out = ctx.update_and_generate_response_data(results)
    assert answered(out.responses) == [(FOO_ID, 1, 20)]
    encoded = encode(RESPONSES[1], V_IDS, out.to_body())
    assert size == 4 + len(encoded)
    empty = Output()
    encode_into(empty, RESPONSES[1], V_IDS, {"responses": []})
    assert SessionlessFetchContext({}).get_throttled_response(7)["session_id"] == 0
    assert incremental(manager, V_IDS, 99, 1).get_response_size({}, V_IDS) == 4 + len(empty)


# -------------------------------------------------------------------------------------------- cache / eviction


def test_session_ids_are_random_positive_unique_and_name_their_shard(time):
    cache = FetchSessionCache(max_entries=16, evict_ms=1000, num_shards=4, rng=random.Random(1))
    manager = FetchManager(cache, time)
    ids = [full(manager, V_NAMES, [topic("foo", part(0))])[1].session_id for _ in range(16)]
    assert len(set(ids)) == 16 and all(0 < i < 2**31 - 1 for i in ids)
    assert sorted(cache.get_cache_shard(i).shard_num for i in ids) == sorted(list(range(4)) * 4)  # round robin
    assert all(cache.get(i) is not None for i in ids) and cache.num_sessions == 16
    assert cache.get_cache_shard(0) is None and cache.get_cache_shard(-1) is None


def test_idle_session_is_evicted_for_a_new_one(time):
    cache = FetchSessionCache(max_entries=2, evict_ms=1000)
    manager = FetchManager(cache, time)
    _, s1 = full(manager, V_NAMES, [topic("foo", part(0))])
    _, s2 = full(manager, V_NAMES, [topic("foo", part(0))])
    _, s3 = full(manager, V_NAMES, [topic("foo", part(0))])
    assert s3.session_id == 0  # nothing stale, not bigger
    time.sleep(500)
    incremental(manager, V_NAMES, s1.session_id, 1)  # s1 used recently
    time.sleep(501)
    _, s4 = full(manager, V_NAMES, [topic("foo", part(0))])
    assert s4.session_id > 0 and cache.get(s2.session_id) is None  # least recently used and stale
    assert cache.get(s1.session_id) is not None and cache.evictions == 1
    assert (
        cache.metrics.get("kafka.server:type=FetchSessionCache,name=IncrementalFetchSessionEvictionsPerSec").count == 1
    )


def test_bigger_sessions_evict_smaller_ones_only_after_they_age(time):
    cache = FetchSessionCache(max_entries=1, evict_ms=1000)
    manager = FetchManager(cache, time)
    _, small = full(manager, V_NAMES, [topic("foo", part(0))])
    _, big = full(manager, V_NAMES, [topic("foo", part(0), part(1))])
    assert big.session_id == 0  # the small session is too recent
    for epoch in (1, 2, 3):  # keep the small session in use while it ages past evict_ms
        time.sleep(400)
        incremental(manager, V_NAMES, small.session_id, epoch)
    _, same_size = full(manager, V_NAMES, [topic("foo", part(5))])
    assert same_size.session_id == 0
    _, big = full(manager, V_NAMES, [topic("foo", part(0), part(1))])
    assert big.session_id > 0 and cache.get(small.session_id) is None and cache.num_partitions == 2


def test_follower_sessions_are_privileged(time):
    cache = FetchSessionCache(max_entries=2, evict_ms=1000)
    manager = FetchManager(cache, time)
    _, c1 = full(manager, V_NAMES, [topic("foo", *(part(p) for p in range(5)))])
    _, f1 = full(manager, V_NAMES, [topic("foo", part(0))], follower=True)
    _, f2 = full(manager, V_NAMES, [topic("foo", part(1))], follower=True)
    assert f2.session_id > 0 and cache.get(c1.session_id) is None  # a follower evicts a consumer
    _, c2 = full(manager, V_NAMES, [topic("foo", *(part(p) for p in range(50)))])
    assert c2.session_id == 0  # a consumer never evicts a live follower session, however big
    _, f3 = full(manager, V_NAMES, [topic("foo", part(2))], follower=True)
    assert f3.session_id == 0  # nor does a follower evict a recently created follower session
    assert {cache.get(f1.session_id).privileged, cache.get(f2.session_id).privileged} == {True}


def test_zero_partition_full_fetch_creates_a_session_closed_by_the_next_incremental(manager, cache):
    _, created = full(manager, V_NAMES, [])
    assert created.session_id > 0 and cache.num_partitions == 0
    ctx = incremental(manager, V_NAMES, created.session_id, 1)
    assert isinstance(ctx, SessionlessFetchContext) and cache.get(created.session_id) is None


# --------------------------------------------------------------------------------------------------- threads


def test_concurrent_sessions_smoke(time):
    cache = FetchSessionCache(max_entries=1000, evict_ms=120_000, num_shards=4)
    manager = FetchManager(cache, time)
    failures: list[str] = []
    n_threads, rounds = 8, 150

    def consumer(i: int) -> None:
        try:
            name = f"t{i}"
            _, created = full(
                manager, V_NAMES, [topic(name, part(0), part(1))], results={(name, 0): resp(0), (name, 1): resp(0)}
            )
            epoch = 1
            for r in range(rounds):
                ctx = incremental(manager, V_NAMES, created.session_id, epoch, [topic(name, part(0, r))])
                results = {(name, 0): resp(r), (name, 1): resp(0)}
                out = ctx.update_and_generate_response_data(results)
                expect = [(name, 0, r)] if r > 0 else []
                if out.error_code != 0 or answered(out.responses) != expect:
                    failures.append(f"{name} round {r}: {out}")
                epoch = next_epoch(epoch)
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(repr(e))

    _, shared = full(manager, V_NAMES, [topic("shared", part(0))])
    outcomes: list[int] = []

    def racer() -> None:
        # Several threads race one session with the same epochs: at most one wins each epoch.
        try:
            for epoch in range(1, 60):
                ctx = incremental(manager, V_NAMES, shared.session_id, epoch)
                outcomes.append(ctx.update_and_generate_response_data({("shared", 0): resp(epoch)}).error_code)
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(f"racer: {e!r}")

    threads = [threading.Thread(target=consumer, args=(i,)) for i in range(n_threads)]
    threads += [threading.Thread(target=racer) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "threads still running after 30 s"
    assert not failures, failures[:3]
    assert len(outcomes) == 3 * 59
    assert set(outcomes) <= {errors.NONE, errors.INVALID_FETCH_SESSION_EPOCH}
    assert outcomes.count(errors.NONE) <= cache.get(shared.session_id).epoch - 1 <= 59
    assert cache.num_sessions == n_threads + 1
    assert cache.num_partitions == 2 * n_threads + 1


def test_metrics_registry_is_shared_when_given():
    registry = MetricsRegistry()
    cache = FetchSessionCache(metrics=registry)
    assert registry.snapshot()[NUM_INCREMENTAL_FETCH_SESSIONS] == {"value": 0}
    assert cache.shards[0].max_entries == 1000 and cache.shards[0].evict_ms == 120_000
