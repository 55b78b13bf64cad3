"""DelegationTokenControlManager: delegation tokens in the metadata log (KIP-48; Kafka's
``DelegationTokenControlManager`` and ``TokenInformation``).

A token is a :class:`TokenInformation` (id, owner, requester, renewers, issue / max / expiry timestamps in ms since
the epoch) written as a ``DelegationTokenRecord``; removing one writes a ``RemoveDelegationTokenRecord``. Its
secret is not stored: the hmac is HMAC-SHA512 of the token id (UTF-8) under ``delegation.token.secret.key``
(:func:`create_hmac`, as Kafka's controller computes it; the broker's
:mod:`pykbroker.security.delegation_token_cache` computes the same).

Operations (each a :class:`~pykbroker.metadata.controller_result.ControllerResult`, Kafka's rules and order of
checks):

* :meth:`create` -- DELEGATION_TOKEN_AUTH_DISABLED without a secret key, UNSUPPORTED_VERSION below
  ``metadata.version`` 3.6-IV2, INVALID_PRINCIPAL_TYPE for a renewer that is not a ``User``; max lifetime =
  min(``delegation.token.max.lifetime.ms``, the request's when > 0), expiry = min(max, now +
  ``delegation.token.expiry.time.ms``).
* :meth:`renew` -- by hmac: DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_EXPIRED, DELEGATION_TOKEN_OWNER_MISMATCH
  (only the owner or a renewer); new expiry = min(max, now + min(expiry.time.ms, the period when > 0)).
* :meth:`expire` -- by hmac, owner or renewers: a negative period removes the token now, else its expiry becomes
  min(max, now + period) (DELEGATION_TOKEN_EXPIRED when it has expired already).
* :meth:`sweep_expired` -- the RemoveDelegationTokenRecords of the expired tokens (the active controller runs it
  every ``delegation.token.expiry.check.interval.ms``).

Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

from pykbroker.config.broker_configs.security_configs import (
    DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS_CONFIG,
    DELEGATION_TOKEN_EXPIRY_TIME_MS_CONFIG,
    DELEGATION_TOKEN_MASTER_KEY_CONFIG,
    DELEGATION_TOKEN_MAX_LIFETIME_MS_CONFIG,
    DELEGATION_TOKEN_SECRET_KEY_CONFIG,
)
from pykbroker.metadata.controller_result import ControllerResult
from pykbroker.metadata.features import IBP_3_6_IV2
from pykbroker.metadata.records import (
    DELEGATION_TOKEN_RECORD,
    REMOVE_DELEGATION_TOKEN_RECORD,
    ApiMessageAndVersion,
    delegation_token_record,
    remove_delegation_token_record,
)
from pykbroker.protocol import errors
from pykbroker.utils.time import Time

#: Kafka's ``DelegationTokenManager.ErrorTimestamp``: the expiry answered with an error
ERROR_TIMESTAMP = -1
_LONG_MAX = 2**63 - 1


class TokenInformation(NamedTuple):
    """One token (Kafka's ``TokenInformation``): principals as ``"User:alice"``, timestamps in ms since the epoch."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> TokenInformation:
        return cls(
            d["token_id"],
            d["owner"],
            d["requester"],
            tuple(d["renewers"]),
            d["issue_timestamp"],
            d["max_timestamp"],
            d["expiration_timestamp"],
        )

    def to_record(self, expiry_timestamp: int | None = None) -> ApiMessageAndVersion:
        return delegation_token_record(
            self.token_id,
            self.owner,
            self.requester,
            list(self.renewers),
            self.issue_timestamp,
            self.max_timestamp,
            self.expiry_timestamp if expiry_timestamp is None else expiry_timestamp,
        )

    def owner_or_renewer(self, principal: str) -> bool:
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms


def create_hmac(token_id: str, secret_key: str) -> bytes:
    """HMAC-SHA512 of the token id under the secret key, both UTF-8 (Kafka's ``DelegationTokenControlManager.
    createHmac``)."""
    return hmac.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


def _sum(now: int, duration: int) -> int:
    return _LONG_MAX if now > _LONG_MAX - duration else now + duration


class DelegationTokenSettings(NamedTuple):
    """The controller's token configs: ``delegation.token.secret.key`` (or the deprecated
    ``delegation.token.master.key``; None: tokens disabled), max lifetime, expiry time and check interval (ms)."""

    secret_key: str | None = None
    max_lifetime_ms: int = 7 * 24 * 3600 * 1000
    expiry_time_ms: int = 24 * 3600 * 1000
    expiry_check_interval_ms: int = 3600 * 1000

    @classmethod
    def from_config(cls, config) -> DelegationTokenSettings:
        return cls(
            config[DELEGATION_TOKEN_SECRET_KEY_CONFIG] or config[DELEGATION_TOKEN_MASTER_KEY_CONFIG] or None,
            config[DELEGATION_TOKEN_MAX_LIFETIME_MS_CONFIG],
            config[DELEGATION_TOKEN_EXPIRY_TIME_MS_CONFIG],
            config[DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS_CONFIG],
        )


class DelegationTokenControlManager:
    def __init__(
        self,
        settings: DelegationTokenSettings,
        time: Time,
        metadata_version: Callable[[], int | None] = lambda: None,
    ) -> None:
        self.settings = settings
        self.time = time
        self.metadata_version = metadata_version
        self.tokens: dict[str, TokenInformation] = {}
        self._by_hmac: dict[bytes, str] = {}  # hmac -> token id (only when enabled)

    @property
    def enabled(self) -> bool:
        return self.settings.secret_key is not None

    def _supported(self) -> bool:
        mv = self.metadata_version()
        return mv is None or mv >= IBP_3_6_IV2

    def _check_enabled(self) -> int:
        if not self.enabled:
            return errors.DELEGATION_TOKEN_AUTH_DISABLED
        if not self._supported():
            return errors.UNSUPPORTED_VERSION
        return errors.NONE

    def replay(self, record: ApiMessageAndVersion) -> None:
        if record.name == DELEGATION_TOKEN_RECORD:
            token = TokenInformation.from_record(record.data)
            self.tokens[token.token_id] = token
            if self.settings.secret_key is not None:
                self._by_hmac[create_hmac(token.token_id, self.settings.secret_key)] = token.token_id
        elif record.name == REMOVE_DELEGATION_TOKEN_RECORD:
            token_id = record.data["token_id"]
            if self.tokens.pop(token_id, None) is not None and self.settings.secret_key is not None:
                self._by_hmac.pop(create_hmac(token_id, self.settings.secret_key), None)

    def _token_to_change(self, mac: bytes) -> tuple[int, TokenInformation | None]:
        """Renew's and Expire's first checks: ``(NONE, token)``, or ``(error code, None)`` when tokens are disabled
        (DELEGATION_TOKEN_AUTH_DISABLED, UNSUPPORTED_VERSION) or no token has this hmac
        (DELEGATION_TOKEN_NOT_FOUND)."""
        code = self._check_enabled()
        if code != errors.NONE:
            return code, None
        token = self.token_for_hmac(mac)
        return (errors.NONE, token) if token is not None else (errors.DELEGATION_TOKEN_NOT_FOUND, None)

    def token_for_hmac(self, mac: bytes) -> TokenInformation | None:
        token_id = self._by_hmac.get(bytes(mac))
        return None if token_id is None else self.tokens.get(token_id)

    def create(self, request: dict[str, Any], principal: str) -> ControllerResult[dict]:
        """CreateDelegationToken for ``principal`` (the requester) -> the v3 response body (owner: the
        request's ``owner_principal_type/name`` when a name is given, else the requester)."""
        now = self.time.milliseconds()
        owner = principal
        if request.get("owner_principal_name"):
            owner = f"{request.get('owner_principal_type') or 'User'}:{request['owner_principal_name']}"
        owner_type, _, owner_name = owner.partition(":")
        requester_type, _, requester_name = principal.partition(":")
        response: dict[str, Any] = {
            "error_code": errors.NONE,
            "principal_type": owner_type,
            "principal_name": owner_name,
            "token_requester_principal_type": requester_type,
            "token_requester_principal_name": requester_name,
            "issue_timestamp_ms": ERROR_TIMESTAMP,
            "expiry_timestamp_ms": ERROR_TIMESTAMP,
            "max_timestamp_ms": ERROR_TIMESTAMP,
            "token_id": "",
            "hmac": b"",
            "throttle_time_ms": 0,
        }
        code = self._check_enabled()
        if code != errors.NONE:
            return ControllerResult([], {**response, "error_code": code})
        renewers = []
        for r in request.get("renewers") or []:
            if r["principal_type"] != "User":
                return ControllerResult([], {**response, "error_code": errors.INVALID_PRINCIPAL_TYPE})
            renewers.append(f"{r['principal_type']}:{r['principal_name']}")
        max_lifetime = self.settings.max_lifetime_ms
        if request.get("max_lifetime_ms", -1) > 0:
            max_lifetime = min(max_lifetime, request["max_lifetime_ms"])
        max_timestamp = _sum(now, max_lifetime)
        expiry_timestamp = min(max_timestamp, _sum(now, self.settings.expiry_time_ms))
        token_id = str(uuid.uuid4())
        assert self.settings.secret_key is not None  # checked by _check_enabled
        mac = create_hmac(token_id, self.settings.secret_key)
        token = TokenInformation(token_id, owner, principal, tuple(renewers), now, max_timestamp, expiry_timestamp)
        response.update(
            issue_timestamp_ms=now,
            expiry_timestamp_ms=expiry_timestamp,
            max_timestamp_ms=max_timestamp,
            token_id=token_id,
            hmac=mac,
        )
        return ControllerResult([token.to_record()], response)

    def renew(self, request: dict[str, Any], principal: str) -> ControllerResult[dict]:
        """RenewDelegationToken -> ``{error_code, expiry_timestamp_ms, throttle_time_ms}``."""
        now = self.time.milliseconds()
        code, token = self._token_to_change(request["hmac"])
        if token is None:
            return _expiry_answer(code)
        if token.expired(now):
            return _expiry_answer(errors.DELEGATION_TOKEN_EXPIRED)
        if not token.owner_or_renewer(principal):
            return _expiry_answer(errors.DELEGATION_TOKEN_OWNER_MISMATCH)
        period = self.settings.expiry_time_ms
        if request.get("renew_period_ms", -1) > 0:
            period = min(period, request["renew_period_ms"])
        expiry = min(token.max_timestamp, _sum(now, period))
        return _expiry_answer(errors.NONE, expiry, [token.to_record(expiry)])

    def expire(self, request: dict[str, Any], principal: str) -> ControllerResult[dict]:
        """ExpireDelegationToken -> ``{error_code, expiry_timestamp_ms, throttle_time_ms}``."""
        now = self.time.milliseconds()
        code, token = self._token_to_change(request["hmac"])
        if token is None:
            return _expiry_answer(code)
        if not token.owner_or_renewer(principal):
            return _expiry_answer(errors.DELEGATION_TOKEN_OWNER_MISMATCH)
        period = request.get("expiry_time_period_ms", -1)
        if period < 0:
            return _expiry_answer(errors.NONE, now, [remove_delegation_token_record(token.token_id)])
        if token.expired(now):
            return _expiry_answer(errors.DELEGATION_TOKEN_EXPIRED)
        expiry = min(token.max_timestamp, _sum(now, period))
        return _expiry_answer(errors.NONE, expiry, [token.to_record(expiry)])

    def sweep_expired(self) -> list[ApiMessageAndVersion]:
        """The RemoveDelegationTokenRecords of every token past its expiry or max timestamp."""
        now = self.time.milliseconds()
        return [remove_delegation_token_record(t.token_id) for t in self.tokens.values() if t.expired(now)]


def _expiry_answer(
    code: int, expiry_timestamp_ms: int = ERROR_TIMESTAMP, records: list[ApiMessageAndVersion] | None = None
) -> ControllerResult[dict]:
    """Renew's and Expire's answer ``{error_code, expiry_timestamp_ms, throttle_time_ms}`` with the records to
    write (none with an error)."""
    return ControllerResult(
        records or [], {"error_code": code, "expiry_timestamp_ms": expiry_timestamp_ms, "throttle_time_ms": 0}
    )
