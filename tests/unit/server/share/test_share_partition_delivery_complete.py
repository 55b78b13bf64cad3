"""SharePartition writes its delivery complete count with every state write (KIP-1226): the in-flight offsets at or
above the start offset that are acknowledged or archived, the part of the log the share-partition lag leaves out."""

from __future__ import annotations

from pykbroker.protocol import errors
from pykbroker.server.share.share_partition import ACCEPT, REJECT, RELEASE, AckBatch, FetchedBatch
from tests.unit.server.share.test_share_partition import TOPIC_ID, make


def summary(persister):
    return persister.read_summary("g", TOPIC_ID, 0, 0).result()


def test_the_delivery_complete_count_follows_acknowledgements():
    sp, _time, _timer, persister = make()
    assert summary(persister).delivery_complete_count == 0  # initialized with a start offset
    assert sp.acquire("m1", [FetchedBatch(0, 9)], 500)
    assert summary(persister).delivery_complete_count == 0  # acquired is not complete
    acks = [AckBatch(2, 3, [ACCEPT]), AckBatch(5, 5, [REJECT]), AckBatch(6, 6, [RELEASE])]
    assert sp.acknowledge("m1", acks).result() == errors.NONE
    got = summary(persister)
    assert (got.start_offset, got.delivery_complete_count) == (0, 3)  # 2, 3 accepted and 5 rejected above SPSO 0
    assert sp.acknowledge("m1", [AckBatch(0, 1, [ACCEPT])]).result() == errors.NONE
    got = summary(persister)
    assert (got.start_offset, got.delivery_complete_count) == (4, 1)  # SPSO past 0-3; 5 still counts
