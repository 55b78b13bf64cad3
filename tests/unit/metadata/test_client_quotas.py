"""ClientQuotaControlManager validation (Kafka's ClientQuotaControlManagerTest), DescribeClientQuotas filters
(ClientQuotasImageTest) and ClientQuotaRecords through the delta, the image and its records."""

from __future__ import annotations

import pytest

from pykbroker.metadata.client_quota_control_manager import ClientQuotaControlManager
from pykbroker.metadata.client_quotas import describe_client_quotas
from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.image import EMPTY_IMAGE
from pykbroker.metadata.records import MetadataRecordSerde
from pykbroker.protocol import errors


def _entity(**kw):
    return [{"entity_type": k.replace("_", "-"), "entity_name": v} for k, v in kw.items()]


def _alter(manager, *entries, validate_only=False):
    request = {
        "entries": [
            {"entity": e, "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops.items()]}
            for e, ops in entries
        ],
        "validate_only": validate_only,
    }
    result = manager.alter_client_quotas(request)
    for r in result.records:
        manager.replay(r)
    return result


def test_alter_writes_records_and_replays():
    m = ClientQuotaControlManager()
    r = _alter(
        m, (_entity(user="alice"), {"producer_byte_rate": 1024.0}), (_entity(user=None), {"consumer_byte_rate": 5.0})
    )
    assert [e["error_code"] for e in r.response["entries"]] == [0, 0]
    assert m.quotas == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0},
        (("user", None),): {"consumer_byte_rate": 5.0},
    }
    # same value again: nothing written; remove: a remove record
    assert _alter(m, (_entity(user="alice"), {"producer_byte_rate": 1024.0})).records == []
    r = _alter(m, (_entity(user="alice"), {"producer_byte_rate": None}))
    assert [rec.data["remove"] for rec in r.records] == [True]
    assert (("user", "alice"),) not in m.quotas
    # removing an absent key writes nothing and succeeds
    r = _alter(m, (_entity(user="alice"), {"producer_byte_rate": None}))
    assert r.records == [] and r.response["entries"][0]["error_code"] == 0


def test_validate_only_writes_nothing():
    m = ClientQuotaControlManager()
    r = _alter(m, (_entity(client_id="c"), {"request_percentage": 12.5}), validate_only=True)
    assert r.records == [] and r.response["entries"][0]["error_code"] == 0


@pytest.mark.parametrize(
    "entity,ops,message",
    [
        ([], {"producer_byte_rate": 1.0}, "Invalid empty client quota entity"),
        (_entity(group="g"), {"producer_byte_rate": 1.0}, "Unhandled client quota entity type: group"),
        (_entity(user=""), {"producer_byte_rate": 1.0}, "Empty user not supported"),
        (
            _entity(user="u", ip="1.2.3.4"),
            {"producer_byte_rate": 1.0},
            "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
        ),
        (
            _entity(ip="not a host!"),
            {"connection_creation_rate": 1.0},
            "not a host! is not a valid IP or resolvable host.",
        ),
        (_entity(user="u"), {"bogus": 1.0}, "Invalid configuration key bogus"),
        (_entity(user="u"), {"connection_creation_rate": 1.0}, "Invalid configuration key connection_creation_rate"),
        (_entity(ip="1.2.3.4"), {"producer_byte_rate": 1.0}, "Invalid configuration key producer_byte_rate"),
        (_entity(user="u"), {"producer_byte_rate": -1.0}, "Quota producer_byte_rate must be greater than 0"),
        (_entity(user="u"), {"producer_byte_rate": 1.5}, "producer_byte_rate cannot be a fractional value."),
        (
            _entity(ip=None),
            {"connection_creation_rate": 3e9},
            "Proposed value for connection_creation_rate is too large for an INT.",
        ),
    ],
)
def test_invalid_alterations(entity, ops, message):
    m = ClientQuotaControlManager()
    r = _alter(m, (entity, ops))
    assert r.records == []
    assert r.response["entries"] == [{"error_code": errors.INVALID_REQUEST, "error_message": message, "entity": entity}]


def test_duplicate_entity_in_one_request():
    m = ClientQuotaControlManager()
    r = _alter(m, (_entity(user="u"), {"producer_byte_rate": 1.0}), (_entity(user="u"), {"consumer_byte_rate": 1.0}))
    (entry,) = r.response["entries"]
    assert entry["error_code"] == errors.INVALID_REQUEST and entry["error_message"].startswith(
        "Ignoring duplicate entity"
    )


def _quotas():
    return {
        (("user", "alice"),): {"producer_byte_rate": 1.0},
        (("user", None),): {"producer_byte_rate": 2.0},
        (("client-id", "c1"), ("user", "alice")): {"request_percentage": 3.0},
        (("client-id", None),): {"consumer_byte_rate": 4.0},
        (("ip", "1.2.3.4"),): {"connection_creation_rate": 5.0},
    }


def _described(components, strict):
    r = describe_client_quotas(_quotas(), {"components": components, "strict": strict})
    return [tuple((e["entity_type"], e["entity_name"]) for e in entry["entity"]) for entry in r["entries"]]


def test_describe_filters():
    exact_alice = {"entity_type": "user", "match_type": 0, "match": "alice"}
    default_user = {"entity_type": "user", "match_type": 1, "match": None}
    any_client = {"entity_type": "client-id", "match_type": 2, "match": None}
    assert _described([exact_alice], strict=True) == [(("user", "alice"),)]
    assert sorted(_described([exact_alice], strict=False)) == sorted(
        [(("user", "alice"),), (("client-id", "c1"), ("user", "alice"))]
    )
    assert _described([default_user], strict=True) == [(("user", None),)]
    assert set(_described([any_client], strict=False)) == {
        (("client-id", None),),
        (("client-id", "c1"), ("user", "alice")),
    }
    assert _described([exact_alice, any_client], strict=True) == [(("client-id", "c1"), ("user", "alice"))]
    assert len(_described([], strict=False)) == 5
    assert _described([], strict=True) == []


@pytest.mark.parametrize(
    "components,error",
    [
        ([{"entity_type": "", "match_type": 2, "match": None}], errors.InvalidRequestError),
        ([{"entity_type": "group", "match_type": 2, "match": None}], errors.UnsupportedVersionError),
        ([{"entity_type": "user", "match_type": 0, "match": None}], errors.InvalidRequestError),
        ([{"entity_type": "user", "match_type": 1, "match": "x"}], errors.InvalidRequestError),
        ([{"entity_type": "user", "match_type": 7, "match": None}], errors.InvalidRequestError),
        (
            [
                {"entity_type": "user", "match_type": 2, "match": None},
                {"entity_type": "user", "match_type": 1, "match": None},
            ],
            errors.InvalidRequestError,
        ),
        (
            [
                {"entity_type": "ip", "match_type": 2, "match": None},
                {"entity_type": "user", "match_type": 2, "match": None},
            ],
            errors.InvalidRequestError,
        ),
    ],
)
def test_describe_bad_filters(components, error):
    with pytest.raises(error):
        describe_client_quotas(_quotas(), {"components": components, "strict": False})


def test_records_through_delta_image_and_serde():
    m = ClientQuotaControlManager()
    r = _alter(
        m,
        (_entity(user="alice", client_id=None), {"producer_byte_rate": 1024.0, "request_percentage": 50.0}),
        (_entity(ip=None), {"connection_creation_rate": 7.0}),
    )
    serde = MetadataRecordSerde()
    decoded = [serde.read(serde.write(rec)) for rec in r.records]
    image = MetadataDelta(EMPTY_IMAGE).replay_all(decoded).apply()
    assert dict(image.client_quotas[(("client-id", None), ("user", "alice"))]) == {
        "producer_byte_rate": 1024.0,
        "request_percentage": 50.0,
    }
    assert not image.is_empty()
    rebuilt = MetadataDelta(EMPTY_IMAGE).replay_all(image.to_records()).apply()
    assert {k: dict(v) for k, v in rebuilt.client_quotas.items()} == {
        k: dict(v) for k, v in image.client_quotas.items()
    }
    # removing the last key of an entity drops the entity; a snapshot without quotas clears them
    remove = _alter(m, (_entity(ip=None), {"connection_creation_rate": None})).records
    image2 = MetadataDelta(image).replay_all(remove).apply()
    assert (("ip", None),) not in image2.client_quotas
    delta = MetadataDelta(image2)
    delta.finish_snapshot()
    assert delta.apply().client_quotas == {}
