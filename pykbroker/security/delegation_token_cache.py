"""DelegationTokenCache: the delegation tokens a node authenticates and describes (KIP-48; Kafka's
``DelegationTokenCache`` filled by ``DelegationTokenPublisher`` / ``DelegationTokenManager.updateToken``).

Filled from the metadata image's tokens (:meth:`update_from_image`, on the metadata publisher's thread). Each token
keeps its hmac (HMAC-SHA512 of the token id under ``delegation.token.secret.key``) and, as Kafka's
``DelegationTokenManager.prepareScramCredentials``, a SCRAM credential per mechanism (SCRAM-SHA-256 and -512)
derived from the base64 hmac as the password with the minimum 4096 iterations: a client logs in over SCRAM with the
token id as user name, the base64 hmac as password and the ``tokenauth=true`` extension
(:meth:`scram_credential`). Without a secret key the cache stays empty and :attr:`enabled` is False.

Threading: readers (Processor threads, request handlers) see a dict that :meth:`update_from_image` replaces whole
(an atomic reference swap); updates come from one thread.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any, NamedTuple

from pykbroker.security.scram import MECHANISMS, MIN_ITERATIONS, ScramCredential, credential_for

#: a token's TokenInformation (pykbroker.metadata.delegation_token_control_manager): token_id, owner, requester,
#: renewers, issue_timestamp, max_timestamp, expiry_timestamp, owner_or_renewer(principal)
TokenInformation = Any


def create_hmac(token_id: str, secret_key: str) -> bytes:
    """HMAC-SHA512 of the token id under the secret key, both UTF-8 (Kafka's ``DelegationTokenManager.createHmac``)."""
    return hmac.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


def hmac_string(mac: bytes) -> str:
    """The hmac as clients use it as a SCRAM password and the tool prints it: standard base64."""
    return base64.b64encode(mac).decode()


class CachedToken(NamedTuple):
    info: TokenInformation
    hmac: bytes
    credentials: dict[str, ScramCredential]  # SCRAM mechanism name -> credential


class DelegationTokenCache:
    def __init__(self, secret_key: str | None = None):
        """``secret_key``: ``delegation.token.secret.key`` (or ``delegation.token.master.key``); None: disabled."""
        self.secret_key = secret_key
        self._tokens: dict[str, CachedToken] = {}

    @property
    def enabled(self) -> bool:
        return self.secret_key is not None

    def update_from_image(self, image) -> None:
        """Take the tokens of a metadata image (``image.delegation_tokens``: token id -> TokenInformation); the
        hmac and SCRAM credentials of a token already cached are kept (they depend on its id only)."""
        if self.secret_key is None:
            return
        old = self._tokens
        new: dict[str, CachedToken] = {}
        for token_id, info in image.delegation_tokens.items():
            cached = old.get(token_id)
            if cached is None:
                mac = create_hmac(token_id, self.secret_key)
                password = hmac_string(mac)
                credentials = {m: credential_for(password, m, MIN_ITERATIONS) for m in MECHANISMS}
                cached = CachedToken(info, mac, credentials)
            elif cached.info != info:
                cached = cached._replace(info=info)
            new[token_id] = cached
        self._tokens = new

    def token(self, token_id: str) -> CachedToken | None:
        return self._tokens.get(token_id)

    def tokens(self) -> list[CachedToken]:
        return list(self._tokens.values())

    def scram_credential(self, token_id: str, mechanism: str) -> tuple[ScramCredential, TokenInformation] | None:
        """The SCRAM credential of a token login (``tokenauth=true``) and the token, or None when unknown."""
        cached = self._tokens.get(token_id)
        if cached is None or mechanism not in cached.credentials:
            return None
        return cached.credentials[mechanism], cached.info
