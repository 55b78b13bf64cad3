"""Delegation token APIs (KIP-48): CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken
(40) and DescribeDelegationToken (41).

Mirrors ``KafkaApis.handle{Create,Renew,Expire,Describe}TokenRequest`` and ``ControllerApis``'s handlers:

* Only SASL sessions that did not log in with a token may use them (Kafka's ``allowTokenRequests``):
  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED for a token-authenticated principal, a PLAINTEXT connection or an
  anonymous (1-way) SSL one; a request a broker forwarded in an Envelope (KIP-590) is exempt from the protocol
  rule, its principal is the client's.
* Create: the owner is the request's ``owner_principal_type/name`` (v3) when a name is given, else the requester;
  creating for another owner needs CREATE_TOKENS on that USER resource (DELEGATION_TOKEN_AUTHORIZATION_FAILED);
  renewers must be ``User`` principals (INVALID_PRINCIPAL_TYPE). Create, renew and expire are written by the
  controller (:class:`~pykbroker.metadata.delegation_token_control_manager.DelegationTokenControlManager`): a broker
  forwards them, the local controller of a single node runs them; the response is sent once the records commit.
* Describe is answered from the node's :class:`~pykbroker.security.delegation_token_cache.DelegationTokenCache`
  (DELEGATION_TOKEN_AUTH_DISABLED without ``delegation.token.secret.key``): the tokens of the requested owners
  (``owners`` null: all) that the principal owns or renews, or may DESCRIBE (DELEGATION_TOKEN resource, the token
  id) or DESCRIBE_TOKENS (USER resource, the owner) -- Kafka's ``DelegationTokenManager.filterToken``.

Threading: called on request handler threads; responses are sent from the controller future's completion.
"""

from __future__ import annotations

from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import ResourceType
from pykbroker.server import error_responses

ANONYMOUS = "User:ANONYMOUS"
_ERROR_TIMESTAMP = -1

error_responses.register_schema_built(
    ApiKeys.CREATE_DELEGATION_TOKEN,
    issue_timestamp_ms=_ERROR_TIMESTAMP,
    expiry_timestamp_ms=_ERROR_TIMESTAMP,
    max_timestamp_ms=_ERROR_TIMESTAMP,
)
error_responses.register_schema_built(ApiKeys.RENEW_DELEGATION_TOKEN, expiry_timestamp_ms=_ERROR_TIMESTAMP)
error_responses.register_schema_built(ApiKeys.EXPIRE_DELEGATION_TOKEN, expiry_timestamp_ms=_ERROR_TIMESTAMP)
error_responses.register_schema_built(ApiKeys.DESCRIBE_DELEGATION_TOKEN)


def allow_token_requests(request) -> bool:
    """Kafka's ``allowTokenRequests`` (see the module docstring)."""
    ctx = request.context
    forwarded = getattr(request, "envelope", None) is not None
    if ctx.token_authenticated:
        return False
    if not forwarded and ctx.security_protocol == "PLAINTEXT":
        return False
    return not (not forwarded and ctx.security_protocol == "SSL" and ctx.principal == ANONYMOUS)


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


class DelegationTokenHandlers:
    def __init__(self, helper, controller, token_cache=None):
        """``controller``: the local QuorumController or the broker's ForwardingManager; ``token_cache``: the
        node's DelegationTokenCache (None: Describe is not served here, e.g. on the controller listener)."""
        self.helper = helper
        self.controller = controller
        self.token_cache = token_cache

    def handlers(self) -> dict:
        out = {
            ApiKeys.CREATE_DELEGATION_TOKEN: self.handle_create_token_request,
            ApiKeys.RENEW_DELEGATION_TOKEN: self.handle_renew_token_request,
            ApiKeys.EXPIRE_DELEGATION_TOKEN: self.handle_expire_token_request,
        }
        if self.token_cache is not None:
            out[ApiKeys.DESCRIBE_DELEGATION_TOKEN] = self.handle_describe_tokens_request
        return out

    def _client(self, request) -> dict:
        return {"client": request} if getattr(self.controller, "forwards_clients", False) else {}

    def _error(self, request, code: int, **fields) -> None:
        ctx = request.context
        body = error_responses.build_error_response(ctx.api_key, ctx.api_version, request.body, code)
        assert body is not None  # the four APIs register a builder
        self.helper.send_response(request, {**body, **fields})

    def _reply(self, request, future) -> None:
        def done(f):
            try:
                body = f.result()
            except Exception as e:  # noqa: BLE001 - NotController, timeouts: the API's error response
                self._error(request, errors.for_exception(e))
                return
            self.helper.send_response(request, body)

        future.add_done_callback(done)

    def handle_create_token_request(self, request) -> None:
        body, requester = request.body, request.context.principal
        owner = requester
        if body.get("owner_principal_name"):
            owner = f"{body.get('owner_principal_type') or 'User'}:{body['owner_principal_name']}"
        owner_type, owner_name = _split(owner)
        requester_type, requester_name = _split(requester)
        principals = {
            "principal_type": owner_type,
            "principal_name": owner_name,
            "token_requester_principal_type": requester_type,
            "token_requester_principal_name": requester_name,
        }
        if not allow_token_requests(request):
            self._error(request, errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, **principals)
        elif owner != requester and not self.helper.authorize(
            request, AclOperation.CREATE_TOKENS, ResourceType.USER, owner
        ):
            self._error(request, errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED, **principals)
        elif any(r["principal_type"] != "User" for r in body.get("renewers") or []):
            self._error(request, errors.INVALID_PRINCIPAL_TYPE, **principals)
        else:
            self._reply(request, self.controller.create_delegation_token(body, requester, **self._client(request)))

    def handle_renew_token_request(self, request) -> None:
        if not allow_token_requests(request):
            self._error(request, errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
            return
        future = self.controller.renew_delegation_token(
            request.body, request.context.principal, **self._client(request)
        )
        self._reply(request, future)

    def handle_expire_token_request(self, request) -> None:
        if not allow_token_requests(request):
            self._error(request, errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
            return
        future = self.controller.expire_delegation_token(
            request.body, request.context.principal, **self._client(request)
        )
        self._reply(request, future)

    def handle_describe_tokens_request(self, request) -> None:
        cache = self.token_cache
        if not allow_token_requests(request):
            self._error(request, errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
            return
        if cache is None or not cache.enabled:
            self._error(request, errors.DELEGATION_TOKEN_AUTH_DISABLED)
            return
        owners_field = request.body.get("owners")
        owners = (
            None if owners_field is None else [f"{o['principal_type']}:{o['principal_name']}" for o in owners_field]
        )
        principal = request.context.principal
        tokens = []
        if owners is None or owners:
            for cached in sorted(cache.tokens(), key=lambda c: c.info.issue_timestamp):
                info = cached.info
                if owners is not None and not any(info.owner_or_renewer(o) for o in owners):
                    continue
                if not (
                    info.owner_or_renewer(principal)
                    or self.helper.authorize(
                        request, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, info.token_id
                    )
                    or self.helper.authorize(request, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, info.owner)
                ):
                    continue
                owner_type, owner_name = _split(info.owner)
                requester_type, requester_name = _split(info.requester)
                tokens.append(
                    {
                        "principal_type": owner_type,
                        "principal_name": owner_name,
                        "token_requester_principal_type": requester_type,
                        "token_requester_principal_name": requester_name,
                        "issue_timestamp": info.issue_timestamp,
                        "expiry_timestamp": info.expiry_timestamp,
                        "max_timestamp": info.max_timestamp,
                        "token_id": info.token_id,
                        "hmac": cached.hmac,
                        "renewers": [
                            {"principal_type": t, "principal_name": n} for t, n in (_split(r) for r in info.renewers)
                        ],
                    }
                )
        self.helper.send_response(request, {"error_code": errors.NONE, "tokens": tokens, "throttle_time_ms": 0})
