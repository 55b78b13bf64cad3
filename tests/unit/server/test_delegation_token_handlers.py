"""The delegation token handlers (KIP-48): Kafka's ``allowTokenRequests``, CREATE_TOKENS for another owner, renewer
principal types, and DescribeDelegationToken's filter (owner / renewer, DESCRIBE on the token, DESCRIBE_TOKENS on the
owner) and DELEGATION_TOKEN_AUTH_DISABLED."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import replace
from types import SimpleNamespace

from pykbroker.metadata.delegation_token_control_manager import TokenInformation
from pykbroker.metadata.image import MetadataImage
from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import ResourceType
from pykbroker.security.delegation_token_cache import DelegationTokenCache
from pykbroker.server.handlers.delegation_tokens import DelegationTokenHandlers, allow_token_requests
from tests.unit.server.apis_harness import decode_sent, make_request, only_response, recording_helper


def request(api_key, version, body, protocol="SASL_PLAINTEXT", principal="User:alice", token=False, forwarded=False):
    r = make_request(api_key, version, body)
    r.context = replace(r.context, security_protocol=protocol, principal=principal, token_authenticated=token)
    if forwarded:
        r.envelope = make_request(ApiKeys.ENVELOPE, 0, None)
    return r


def test_allow_token_requests():
    body = {"owners": None}
    key = ApiKeys.DESCRIBE_DELEGATION_TOKEN
    assert allow_token_requests(request(key, 3, body))
    assert not allow_token_requests(request(key, 3, body, token=True))
    assert not allow_token_requests(request(key, 3, body, token=True, forwarded=True))
    assert not allow_token_requests(request(key, 3, body, "PLAINTEXT", "User:ANONYMOUS"))
    assert allow_token_requests(request(key, 3, body, "PLAINTEXT", forwarded=True))  # a broker forwarded it
    assert not allow_token_requests(request(key, 3, body, "SSL", "User:ANONYMOUS"))  # 1-way SSL
    assert allow_token_requests(request(key, 3, body, "SSL", "User:CN=alice"))  # a client certificate


class Authorizer:
    def __init__(self, allowed: set[tuple[str, int, int, str]]):
        self.allowed = allowed
        self.calls: list[tuple] = []

    def authorize(self, principal, host, operation, resource_type, name) -> bool:
        self.calls.append((principal, operation, resource_type, name))
        return (principal, operation, resource_type, name) in self.allowed


def test_create_checks_before_the_controller():
    helper, channel = recording_helper()
    helper.authorizer = Authorizer(set())
    calls = []

    def create(body, principal):
        calls.append((body, principal))
        f: Future = Future()
        f.set_result({"error_code": errors.NONE, "principal_type": "User", "principal_name": "alice",
                      "token_requester_principal_type": "User", "token_requester_principal_name": "alice",
                      "issue_timestamp_ms": 1, "expiry_timestamp_ms": 2, "max_timestamp_ms": 3, "token_id": "t",
                      "hmac": b"h", "throttle_time_ms": 0})  # fmt: skip
        return f

    handlers = DelegationTokenHandlers(helper, SimpleNamespace(create_delegation_token=create)).handlers()
    create_key = ApiKeys.CREATE_DELEGATION_TOKEN
    base = {"owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1}
    cases = [
        (request(create_key, 3, base, "PLAINTEXT", "User:ANONYMOUS"), errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED),
        (request(create_key, 3, base, token=True), errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED),
        (
            request(create_key, 3, {**base, "owner_principal_type": "User", "owner_principal_name": "bob"}),
            errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
        ),
        (
            request(create_key, 1, {**base, "renewers": [{"principal_type": "Group", "principal_name": "g"}]}),
            errors.INVALID_PRINCIPAL_TYPE,
        ),
    ]
    for r, code in cases:
        handlers[create_key](r)
        _, body = decode_sent(only_response(channel), create_key, r.context.api_version)
        assert body["error_code"] == code, (r.context, body)
        assert body["expiry_timestamp_ms"] == -1
    assert calls == []
    assert helper.authorizer.calls == [("User:alice", AclOperation.CREATE_TOKENS, ResourceType.USER, "User:bob")]
    # the owner for herself: no authorization needed, the controller gets the requester
    handlers[create_key](request(create_key, 3, base))
    _, body = decode_sent(only_response(channel), create_key, 3)
    assert body["error_code"] == errors.NONE and calls[0][1] == "User:alice"


def _cache(*tokens: TokenInformation) -> DelegationTokenCache:
    cache = DelegationTokenCache("secret")
    cache.update_from_image(MetadataImage(delegation_tokens={t.token_id: t for t in tokens}))
    return cache


def _describe(handler_cache, helper, channel, owners, principal):
    handlers = DelegationTokenHandlers(helper, SimpleNamespace(), handler_cache).handlers()
    key = ApiKeys.DESCRIBE_DELEGATION_TOKEN
    handlers[key](request(key, 3, {"owners": owners}, principal=principal))
    _, body = decode_sent(only_response(channel), key, 3)
    return body


def test_describe_filters_and_disabled():
    helper, channel = recording_helper()
    a = TokenInformation("a", "User:alice", "User:alice", ("User:bob",), 1, 10, 5)
    c = TokenInformation("c", "User:carol", "User:admin", (), 2, 10, 5)
    d = TokenInformation("d", "User:dave", "User:dave", (), 3, 10, 5)
    cache = _cache(a, c, d)
    helper.authorizer = Authorizer(
        {
            ("User:eve", AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, "c"),
            ("User:eve", AclOperation.DESCRIBE_TOKENS, ResourceType.USER, "User:dave"),
        }
    )

    def ids(owners, principal):
        body = _describe(cache, helper, channel, owners, principal)
        assert body["error_code"] == errors.NONE
        return [t["token_id"] for t in body["tokens"]]

    assert ids(None, "User:alice") == ["a"]
    assert ids(None, "User:bob") == ["a"]  # a renewer
    assert ids(None, "User:eve") == ["c", "d"]  # DESCRIBE on the token, DESCRIBE_TOKENS on its owner
    assert ids([{"principal_type": "User", "principal_name": "dave"}], "User:eve") == ["d"]
    assert ids([], "User:alice") == []
    body = _describe(cache, helper, channel, None, "User:bob")
    token = body["tokens"][0]
    assert (token["principal_name"], token["renewers"]) == (
        "alice",
        [{"principal_type": "User", "principal_name": "bob"}],
    )
    assert token["hmac"] == cache.token("a").hmac
    assert _describe(DelegationTokenCache(None), helper, channel, None, "User:alice")["error_code"] == (
        errors.DELEGATION_TOKEN_AUTH_DISABLED
    )
