"""DelegationTokenControlManager (KIP-48): create / renew / expire / sweep with Kafka's rules, replay into the
controller's state and into the metadata image (delta, snapshot records), and the broker's token cache."""

from __future__ import annotations

import base64
import hashlib
import hmac

from pykbroker.metadata.delegation_token_control_manager import (
    DelegationTokenControlManager,
    DelegationTokenSettings,
    TokenInformation,
)
from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.features import IBP_3_5_IV2
from pykbroker.metadata.image import EMPTY_IMAGE
from pykbroker.protocol import errors
from pykbroker.protocol.metadata_records import decode_metadata_record, encode_metadata_record
from pykbroker.security.delegation_token_cache import DelegationTokenCache
from pykbroker.security.sasl_client import ScramSaslClient
from pykbroker.security.scram import ScramSaslServer
from pykbroker.utils.time import MockTime

SECRET = "secret-key"
DAY, WEEK = 24 * 3600 * 1000, 7 * 24 * 3600 * 1000


def manager(secret: str | None = SECRET, metadata_version=None) -> tuple[DelegationTokenControlManager, MockTime]:
    time = MockTime()
    settings = DelegationTokenSettings(secret, WEEK, DAY, 3600 * 1000)
    return DelegationTokenControlManager(settings, time, lambda: metadata_version), time


def apply(m: DelegationTokenControlManager, result):
    for record in result.records:
        # every record survives the wire format of the metadata log
        name, _version, data = decode_metadata_record(encode_metadata_record(record.name, record.version, record.data))
        assert name == record.name
        m.replay(record._replace(data=data))
    return result.response


def create(m, principal="User:alice", **body):
    request = {"renewers": [], "max_lifetime_ms": -1, **body}
    return apply(m, m.create(request, principal))


def test_disabled_without_secret_key_and_unsupported_before_3_6():
    m, _ = manager(None)
    assert create(m)["error_code"] == errors.DELEGATION_TOKEN_AUTH_DISABLED
    assert apply(m, m.renew({"hmac": b"x", "renew_period_ms": -1}, "User:a"))["error_code"] == (
        errors.DELEGATION_TOKEN_AUTH_DISABLED
    )
    m, _ = manager(metadata_version=IBP_3_5_IV2)
    assert create(m)["error_code"] == errors.UNSUPPORTED_VERSION
    assert m.tokens == {}


def test_create_hmac_lifetimes_owner_and_renewers():
    m, time = manager()
    now = time.milliseconds()
    r = create(m, renewers=[{"principal_type": "User", "principal_name": "bob"}], max_lifetime_ms=2 * DAY)
    assert r["error_code"] == errors.NONE
    assert (r["principal_type"], r["principal_name"]) == ("User", "alice")
    assert r["issue_timestamp_ms"] == now
    assert r["max_timestamp_ms"] == now + 2 * DAY
    assert r["expiry_timestamp_ms"] == now + DAY
    assert r["hmac"] == hmac.new(SECRET.encode(), r["token_id"].encode(), hashlib.sha512).digest()
    token = m.tokens[r["token_id"]]
    assert token == TokenInformation(
        r["token_id"], "User:alice", "User:alice", ("User:bob",), now, now + 2 * DAY, now + DAY
    )
    # a longer max lifetime than the server's is capped; another owner (v3); renewers must be users
    r2 = create(m, "User:admin", max_lifetime_ms=30 * DAY, owner_principal_type="User", owner_principal_name="carol")
    assert r2["max_timestamp_ms"] == now + WEEK
    assert m.tokens[r2["token_id"]].owner == "User:carol"
    assert m.tokens[r2["token_id"]].requester == "User:admin"
    bad = create(m, renewers=[{"principal_type": "Group", "principal_name": "g"}])
    assert bad["error_code"] == errors.INVALID_PRINCIPAL_TYPE


def test_renew_rules():
    m, time = manager()
    r = create(m, renewers=[{"principal_type": "User", "principal_name": "bob"}], max_lifetime_ms=3 * DAY)
    mac = r["hmac"]
    assert apply(m, m.renew({"hmac": b"nope", "renew_period_ms": -1}, "User:alice"))["error_code"] == (
        errors.DELEGATION_TOKEN_NOT_FOUND
    )
    assert apply(m, m.renew({"hmac": mac, "renew_period_ms": -1}, "User:eve"))["error_code"] == (
        errors.DELEGATION_TOKEN_OWNER_MISMATCH
    )
    time.sleep(DAY // 2)
    renewed = apply(m, m.renew({"hmac": mac, "renew_period_ms": 1000}, "User:bob"))
    assert renewed["error_code"] == errors.NONE
    assert renewed["expiry_timestamp_ms"] == time.milliseconds() + 1000
    assert m.tokens[r["token_id"]].expiry_timestamp == time.milliseconds() + 1000
    # the renew period is capped by expiry.time.ms, the expiry by the max timestamp
    time.sleep(500)
    assert apply(m, m.renew({"hmac": mac, "renew_period_ms": 10 * DAY}, "User:alice"))["expiry_timestamp_ms"] == (
        time.milliseconds() + DAY
    )
    time.sleep(2 * DAY)
    assert apply(m, m.renew({"hmac": mac, "renew_period_ms": -1}, "User:alice"))["error_code"] == (
        errors.DELEGATION_TOKEN_EXPIRED
    )


def test_expire_and_sweep():
    m, time = manager()
    a = create(m)
    b = create(m)
    assert apply(m, m.expire({"hmac": a["hmac"], "expiry_time_period_ms": 5000}, "User:bob"))["error_code"] == (
        errors.DELEGATION_TOKEN_OWNER_MISMATCH
    )
    r = apply(m, m.expire({"hmac": a["hmac"], "expiry_time_period_ms": 5000}, "User:alice"))
    assert (r["error_code"], r["expiry_timestamp_ms"]) == (errors.NONE, time.milliseconds() + 5000)
    assert m.sweep_expired() == []
    time.sleep(5001)
    sweep = m.sweep_expired()
    assert [rec.data["token_id"] for rec in sweep] == [a["token_id"]]
    for rec in sweep:
        m.replay(rec)
    assert set(m.tokens) == {b["token_id"]}
    assert m.token_for_hmac(a["hmac"]) is None
    # a negative period removes the token now
    r = apply(m, m.expire({"hmac": b["hmac"], "expiry_time_period_ms": -1}, "User:alice"))
    assert (r["error_code"], r["expiry_timestamp_ms"]) == (errors.NONE, time.milliseconds())
    assert m.tokens == {}
    assert apply(m, m.expire({"hmac": b["hmac"], "expiry_time_period_ms": -1}, "User:alice"))["error_code"] == (
        errors.DELEGATION_TOKEN_NOT_FOUND
    )


def test_image_snapshot_and_broker_cache_scram_login():
    m, _ = manager()
    result = m.create({"renewers": [], "max_lifetime_ms": -1}, "User:alice")
    apply(m, result)
    token_id, mac = result.response["token_id"], result.response["hmac"]
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay_all(result.records)
    image = delta.apply()
    assert image.delegation_tokens[token_id].owner == "User:alice"
    # snapshot records rebuild the same tokens
    rebuilt = MetadataDelta(EMPTY_IMAGE).replay_all(image.to_records()).apply()
    assert rebuilt.delegation_tokens == image.delegation_tokens
    cache = DelegationTokenCache(SECRET)
    cache.update_from_image(image)
    cached = cache.token(token_id)
    assert cached is not None and cached.hmac == mac
    password = base64.b64encode(mac).decode()
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        server = ScramSaslServer(mechanism, lambda u, mech: None, cache.scram_credential)
        client = ScramSaslClient(mechanism, token_id, password, extensions={"tokenauth": "true"})
        final = client.evaluate_challenge(server.evaluate_response(client.initial_response()))
        assert final is not None
        client.evaluate_challenge(server.evaluate_response(final))
        assert client.complete and server.complete
        assert server.authorization_id == "alice" and server.token_authenticated
        assert server.credential_expiration_ms == image.delegation_tokens[token_id].expiry_timestamp
    # without the extension the token id is an unknown user; a wrong hmac fails the proof
    server = ScramSaslServer("SCRAM-SHA-512", lambda u, mech: None, cache.scram_credential)
    try:
        server.evaluate_response(ScramSaslClient("SCRAM-SHA-512", token_id, password).initial_response())
        raise AssertionError("a token id without tokenauth must fail")
    except errors.SaslAuthenticationError:
        pass
    # a removed token is gone from the cache
    delta = MetadataDelta(image)
    removal = m.expire({"hmac": mac, "expiry_time_period_ms": -1}, "User:alice")
    assert [r.name for r in removal.records] == ["RemoveDelegationTokenRecord"]
    delta.replay_all(removal.records)
    cache.update_from_image(delta.apply())
    assert cache.token(token_id) is None and cache.scram_credential(token_id, "SCRAM-SHA-512") is None
