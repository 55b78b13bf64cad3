"""ShareSessionCache (KIP-932, Kafka's ShareSessionCacheTest / SharePartitionManager's session contexts): epochs,
incremental partitions, closing, the session limit and the errors a bad epoch gets."""

from __future__ import annotations

import uuid

from pykbroker.protocol import errors
from pykbroker.server.share.share_session_cache import ShareSessionCache, ShareSessionKey, next_epoch

T = uuid.UUID(int=1)
K = ShareSessionKey("g", "m1")


def test_open_then_incremental_epochs():
    cache = ShareSessionCache(10)
    r = cache.fetch_context(K, 0, [(T, 0), (T, 1)], [])
    assert r.error_code == errors.NONE and r.partitions == ((T, 0), (T, 1))
    r = cache.fetch_context(K, 1, [(T, 2)], [(T, 0)])
    assert r.error_code == errors.NONE and r.partitions == ((T, 1), (T, 2))
    assert cache.fetch_context(K, 2, [], []).partitions == ((T, 1), (T, 2))
    assert cache.acknowledge_context(K, 3).error_code == errors.NONE
    assert cache.fetch_context(K, 4, [], []).error_code == errors.NONE


def test_wrong_epoch_and_missing_session():
    cache = ShareSessionCache(10)
    assert cache.fetch_context(K, 1, [], []).error_code == errors.SHARE_SESSION_NOT_FOUND
    assert cache.acknowledge_context(K, 1).error_code == errors.SHARE_SESSION_NOT_FOUND
    assert cache.fetch_context(K, -1, [], []).error_code == errors.SHARE_SESSION_NOT_FOUND
    cache.fetch_context(K, 0, [(T, 0)], [])
    assert cache.fetch_context(K, 5, [], []).error_code == errors.INVALID_SHARE_SESSION_EPOCH
    assert cache.acknowledge_context(K, 0).error_code == errors.INVALID_SHARE_SESSION_EPOCH
    assert cache.fetch_context(K, 1, [], []).error_code == errors.NONE  # a bad epoch does not move the session


def test_close_and_reopen_returns_the_old_session():
    cache = ShareSessionCache(10)
    cache.fetch_context(K, 0, [(T, 0)], [])
    r = cache.acknowledge_context(K, -1)
    assert r.error_code == errors.NONE and r.removed is not None and list(r.removed.partitions) == [(T, 0)]
    assert cache.get(K) is None
    cache.fetch_context(K, 0, [(T, 0)], [])
    r = cache.fetch_context(K, 0, [(T, 1)], [])  # a new epoch 0 replaces the session
    assert r.removed is not None and list(r.removed.partitions) == [(T, 0)]
    assert len(cache) == 1


def test_session_limit():
    cache = ShareSessionCache(1)
    assert cache.fetch_context(K, 0, [], []).error_code == errors.NONE
    other = ShareSessionKey("g", "m2")
    assert cache.fetch_context(other, 0, [], []).error_code == errors.SHARE_SESSION_LIMIT_REACHED
    assert cache.fetch_context(K, 0, [], []).error_code == errors.NONE  # the member's own session is replaced


def test_connection_close_drops_its_sessions():
    cache = ShareSessionCache(10)
    cache.fetch_context(K, 0, [(T, 0)], [], connection_id="c1")
    cache.fetch_context(ShareSessionKey("g", "m2"), 0, [], [], connection_id="c2")
    assert [s.key for s in cache.remove_connection("c1")] == [K]
    assert len(cache) == 1


def test_epoch_wraps_to_one():
    assert next_epoch(2**31 - 1) == 1
