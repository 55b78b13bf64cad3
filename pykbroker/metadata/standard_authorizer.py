"""StandardAuthorizer: authorization against the ACLs of the metadata log (Kafka's
``org.apache.kafka.metadata.authorizer.StandardAuthorizer``, KIP-801).

Enabled by ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``. Rules, as Kafka's:

* a principal of ``super.users`` (``User:admin;User:ops``) is allowed everything;
* an ACL applies when its resource type matches and its pattern does (LITERAL: the same name or ``*``;
  PREFIXED: a prefix of the name), its principal is the caller's or ``User:*``, its host the caller's or ``*``;
* any applicable DENY for the operation (or ALL) denies; else an applicable ALLOW for the operation, for ALL,
  or implying it (READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
* a resource no ACL applies to at all (for any principal) is allowed only with
  ``allow.everyone.if.no.acl.found=true`` (default false).

The ACLs are read from the current metadata image and indexed per image (:class:`~pykbroker.metadata.
authorizer_data.AclIndex`, Kafka's StandardAuthorizerData: by resource type and literal name, the wildcard,
prefixed names by the lengths in use), so a decision looks at the ACLs of the resource's own patterns only:
its cost does not grow with the number of unrelated ACLs (nor with other principals' ACLs on the same
resource). The first decision after the image's ACLs change derives the new index from the previous one
(``AclIndex.updated``: only the changed ACLs' sections are recomputed).

Threading: ``authorize`` / ``authorize_any`` are called from request handler threads (and a controller's);
an index is immutable and swapped whole; one thread rebuilds it under a lock while the others wait for it
(a decision never uses ACLs older than the image it was asked under).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pykbroker.metadata.authorizer_data import EMPTY, WILDCARD, AclIndex
from pykbroker.protocol.acl import AclOperation

CLASS_NAMES = frozenset(
    {"org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer"}
)
_O = AclOperation
_IMPLIES: dict[int, tuple[AclOperation, ...]] = {
    _O.DESCRIBE: (_O.READ, _O.WRITE, _O.DELETE, _O.ALTER),
    _O.DESCRIBE_CONFIGS: (_O.ALTER_CONFIGS,),
}
_ALL_BIT = 1 << AclOperation.ALL
#: per operation: the mask of ALLOW operations that grant it, and of DENY operations that refuse it
_ALLOWED_BY: dict[int, int] = {
    op: _ALL_BIT | 1 << op | sum(1 << i for i in _IMPLIES.get(op, ())) for op in AclOperation
}
_DENIED_BY: dict[int, int] = {op: _ALL_BIT | 1 << op for op in AclOperation}
_ANY_USER = "User:*"


class StandardAuthorizer:
    def __init__(
        self, image_fn: Callable[[], Any], super_users: str = "", allow_everyone_if_no_acl_found: bool = False
    ):
        self.image_fn = image_fn
        self.super_users = {u.strip() for u in str(super_users or "").split(";") if u.strip()}
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self._indexed_for: Any = None
        self._acl_index: AclIndex = EMPTY
        self._lock = threading.Lock()

    def _index(self) -> AclIndex:
        acls = self.image_fn().acls
        if acls is not self._indexed_for:
            with self._lock:
                if acls is not self._indexed_for:
                    self._acl_index = self._acl_index.updated(acls)
                    self._indexed_for = acls
        return self._acl_index

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Kafka's authorizeByResourceType (simplified): some ALLOW ACL of ``resource_type`` grants the
        operation to the principal (super users always), or no ACL of that type exists and everyone is allowed."""
        if principal in self.super_users:
            return True
        index = self._index()
        if not index.has_type(resource_type):
            return self.allow_if_no_acl
        by_principal = index.allow_by_type.get(resource_type, {})
        wanted = _ALLOWED_BY.get(operation, _ALL_BIT | 1 << operation)
        for p in (principal, _ANY_USER):
            hosts = by_principal.get(p)
            if hosts and (hosts.get(host, 0) | hosts.get(WILDCARD, 0)) & wanted:
                return True
        return False

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        """Whether ``principal`` connected from ``host`` may do ``operation`` (AclOperation code) on the
        resource ``(resource_type, name)``: super users always; a matching DENY refuses; else a matching ALLOW
        (or one implying the operation) grants; a resource that no ACL matches follows
        ``allow.everyone.if.no.acl.found``. Kafka's ``StandardAuthorizerData.authorize``."""
        if principal in self.super_users:
            return True
        sections = self._index().sections(resource_type, name)
        if not sections:
            return self.allow_if_no_acl
        wanted = _ALLOWED_BY.get(operation, _ALL_BIT | 1 << operation)
        refused = _DENIED_BY.get(operation, _ALL_BIT | 1 << operation)
        allowed = False
        for section in sections:
            for p in (principal, _ANY_USER):
                hosts = section.get(p)
                if hosts is None:
                    continue
                for h in (host, WILDCARD):
                    masks = hosts.get(h)
                    if masks is None:
                        continue
                    if masks[0] & refused:
                        return False
                    if masks[1] & wanted:
                        allowed = True
        return allowed
