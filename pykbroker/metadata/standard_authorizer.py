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

The ACLs are read from the current metadata image (indexed per image). Threading: ``authorize`` is called
from request handler threads; the index is swapped whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pykbroker.metadata.acls import WILDCARD
from pykbroker.protocol.acl import AclOperation, AclPermissionType
from pykbroker.protocol.resource import PatternType

CLASS_NAMES = frozenset(
    {"org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer"}
)
_O = AclOperation
_ALL, _ALLOW, _DENY = AclOperation.ALL, AclPermissionType.ALLOW, AclPermissionType.DENY
_LITERAL, _PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
_IMPLIES: dict[int, tuple[AclOperation, ...]] = {
    _O.DESCRIBE: (_O.READ, _O.WRITE, _O.DELETE, _O.ALTER),
    _O.DESCRIBE_CONFIGS: (_O.ALTER_CONFIGS,),
}


class StandardAuthorizer:
    def __init__(
        self, image_fn: Callable[[], Any], super_users: str = "", allow_everyone_if_no_acl_found: bool = False
    ):
        self.image_fn = image_fn
        self.super_users = {u.strip() for u in str(super_users or "").split(";") if u.strip()}
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self._indexed_for = None
        self._by_type: dict[int, list[tuple]] = {}

    def _index(self) -> dict[int, list[tuple]]:
        acls = self.image_fn().acls
        if acls is not self._indexed_for:
            by_type: dict[int, list[tuple]] = {}
            for binding in acls.values():
                by_type.setdefault(binding[0], []).append(binding)
            self._by_type, self._indexed_for = by_type, acls
        return self._by_type

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Kafka's authorizeByResourceType (simplified): some ALLOW ACL of ``resource_type`` grants the
        operation to the principal (super users always), or no ACL of that type exists and everyone is allowed."""
        if principal in self.super_users:
            return True
        acls = self._index().get(resource_type, ())
        if not acls:
            return self.allow_if_no_acl
        wanted = (operation, _ALL, *_IMPLIES.get(operation, ()))
        return any(
            permission == _ALLOW
            and acl_op in wanted
            and acl_principal in (principal, "User:*")
            and acl_host in (host, WILDCARD)
            for _, _, _, acl_principal, acl_host, acl_op, permission in acls
        )

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        applicable_resource = False
        allowed = False
        wanted = (operation, _ALL, *_IMPLIES.get(operation, ()))
        for _, acl_name, pattern, acl_principal, acl_host, acl_op, permission in self._index().get(resource_type, ()):
            if pattern == _LITERAL:
                if acl_name != name and acl_name != WILDCARD:
                    continue
            elif pattern == _PREFIXED:
                if not name.startswith(acl_name):
                    continue
            else:
                continue
            applicable_resource = True
            if acl_principal != principal and acl_principal != "User:*":
                continue
            if acl_host != host and acl_host != WILDCARD:
                continue
            if permission == _DENY and acl_op in (operation, _ALL):
                return False
            if permission == _ALLOW and acl_op in wanted:
                allowed = True
        if not applicable_resource:
            return self.allow_if_no_acl
        return allowed
