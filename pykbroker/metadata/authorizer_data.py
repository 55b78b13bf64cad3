"""The StandardAuthorizer's index of the ACLs (Kafka's ``StandardAuthorizerData`` / ``AclCache``): built once
per set of ACLs, so that a decision costs the same with 10 ACLs or 100,000 unrelated ones.

Shape (all immutable once built; ops and permissions are Kafka's codes from :mod:`pykbroker.protocol.acl`):

* ``literal[(resource type, name)]`` and ``prefixed[(resource type, prefix)]`` are *sections*: the ACLs of one
  resource pattern, as ``{principal: {host: (deny mask, allow mask)}}`` where a mask has bit ``1 << op`` set for
  each operation an ACL of that principal and host denies / allows. The wildcard ``*`` is the literal section
  ``(resource type, "*")``.
* ``prefix_lengths[resource type]``: the distinct lengths of that type's prefixed names, so the prefixed
  sections that apply to a name are found by looking up ``name[:n]`` for each such length (Kafka walks a sorted
  set for the same purpose; at most one lookup per distinct length, bounded by the longest resource name).
* ``allow_by_type[resource type]``: ``{principal: {host: allow mask}}`` over every pattern of that type, for
  ``authorize_any`` (Kafka's ``authorizeByResourceType``).

:meth:`AclIndex.sections` returns the sections that apply to a resource; :class:`~pykbroker.metadata.
standard_authorizer.StandardAuthorizer` decides on them. :meth:`AclIndex.build` takes the image's
``{id: binding}`` mapping (bindings as in :mod:`pykbroker.metadata.acls`), O(ACLs); :meth:`AclIndex.updated`
derives the next image's index from the previous one, recomputing only the sections of the ACLs that changed
(plus an O(ACLs) comparison of the two id sets, done in C). An index is never changed once returned, so any
thread may read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pykbroker.protocol.acl import AclPermissionType
from pykbroker.protocol.resource import PatternType

WILDCARD = "*"

#: principal -> host -> (deny mask, allow mask)
Section = dict[str, dict[str, tuple[int, int]]]

_DENY = AclPermissionType.DENY
_LITERAL, _PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def _section(bindings: Iterable[tuple]) -> Section:
    section: Section = {}
    for _, _, _, principal, host, operation, permission in bindings:
        hosts = section.setdefault(principal, {})
        deny, allow = hosts.get(host, (0, 0))
        if permission == _DENY:
            deny |= 1 << operation
        else:
            allow |= 1 << operation
        hosts[host] = (deny, allow)
    return section


class AclIndex:
    """The ACLs of one metadata image, indexed by resource type and name (see the module docstring).
    ``members`` keeps each pattern's bindings (``{(pattern, type, name): {binding: count}}``) and
    ``allow_members`` each ``(type, principal, host)``'s ALLOW operations (``{operation: count}``), so that
    :meth:`updated` re-derives only the sections an ACL change touches (copy on write: the index it starts
    from stays valid)."""

    __slots__ = (
        "acls",
        "members",
        "literal",
        "prefixed",
        "prefix_lengths",
        "length_counts",
        "allow_members",
        "allow_by_type",
        "type_counts",
    )

    def __init__(self) -> None:
        self.acls: Mapping[Any, tuple] = {}
        self.members: dict[tuple[int, int, str], dict[tuple, int]] = {}
        self.literal: dict[tuple[int, str], Section] = {}
        self.prefixed: dict[tuple[int, str], Section] = {}
        self.prefix_lengths: dict[int, tuple[int, ...]] = {}
        self.length_counts: dict[int, dict[int, int]] = {}
        self.allow_members: dict[tuple[int, str, str], dict[int, int]] = {}
        self.allow_by_type: dict[int, dict[str, dict[str, int]]] = {}
        self.type_counts: dict[int, int] = {}

    @classmethod
    def build(cls, acls: Mapping[Any, tuple]) -> AclIndex:
        """The index of ``acls`` (``{id: binding}``), O(ACLs)."""
        index = cls()
        index.acls = acls
        members_of, allow_of = index.members, index.allow_members
        type_counts, length_counts = index.type_counts, index.length_counts
        for binding in acls.values():
            rtype, name, pattern, principal, host, operation, permission = binding
            if pattern != _LITERAL and pattern != _PREFIXED:
                continue
            key = (pattern, rtype, name)
            members = members_of.get(key)
            if members is None:
                members_of[key] = {binding: 1}
            else:
                members[binding] = members.get(binding, 0) + 1
            type_counts[rtype] = type_counts.get(rtype, 0) + 1
            if pattern == _PREFIXED:
                counts = length_counts.setdefault(rtype, {})
                counts[len(name)] = counts.get(len(name), 0) + 1
            if permission != _DENY:
                allowed = allow_of.setdefault((rtype, principal, host), {})
                allowed[operation] = allowed.get(operation, 0) + 1
        for (pattern, rtype, name), members in index.members.items():
            (index.literal if pattern == _LITERAL else index.prefixed)[(rtype, name)] = _section(members)
        index.prefix_lengths = {rtype: tuple(sorted(counts)) for rtype, counts in index.length_counts.items()}
        for (rtype, principal, host), operations in index.allow_members.items():
            mask = 0
            for operation in operations:
                mask |= 1 << operation
            index.allow_by_type.setdefault(rtype, {}).setdefault(principal, {})[host] = mask
        return index

    def updated(self, acls: Mapping[Any, tuple]) -> AclIndex:
        """The index of ``acls``, derived from this one (the index of ``self.acls``): the ids that left or
        came are found by comparing the two mappings' keys, and only their sections are recomputed. Bindings
        with a pattern type other than LITERAL/PREFIXED (never written by the controller) are ignored."""
        old = self.acls
        removed = [old[acl_id] for acl_id in old.keys() - acls.keys()]
        added = [acls[acl_id] for acl_id in acls.keys() - old.keys()]
        if 2 * (len(removed) + len(added)) > len(acls):
            return AclIndex.build(acls)
        new = AclIndex()
        new.acls = acls
        new.members, new.literal, new.prefixed = dict(self.members), dict(self.literal), dict(self.prefixed)
        new.length_counts, new.type_counts = dict(self.length_counts), dict(self.type_counts)
        new.prefix_lengths = dict(self.prefix_lengths)
        new.allow_members, new.allow_by_type = dict(self.allow_members), dict(self.allow_by_type)
        copied: set = set()  # the mutable containers this update already copied

        def own(container: dict, key) -> Any:
            if (id(container), key) not in copied:
                copied.add((id(container), key))
                container[key] = dict(container.get(key, ()))
            return container[key]

        touched_sections, touched_lengths, touched_allow = set(), set(), set()
        for delta, changes in ((-1, removed), (1, added)):
            for binding in changes:
                rtype, name, pattern, principal, host, operation, permission = binding
                if pattern != _LITERAL and pattern != _PREFIXED:
                    continue
                members = own(new.members, (pattern, rtype, name))
                if members.get(binding, 0) + delta > 0:
                    members[binding] = members.get(binding, 0) + delta
                else:
                    members.pop(binding, None)
                touched_sections.add((pattern, rtype, name))
                new.type_counts[rtype] = new.type_counts.get(rtype, 0) + delta
                if pattern == _PREFIXED:
                    counts = own(new.length_counts, rtype)
                    counts[len(name)] = counts.get(len(name), 0) + delta
                    touched_lengths.add(rtype)
                if permission != _DENY:
                    allowed = own(new.allow_members, (rtype, principal, host))
                    if allowed.get(operation, 0) + delta > 0:
                        allowed[operation] = allowed.get(operation, 0) + delta
                    else:
                        allowed.pop(operation, None)
                    touched_allow.add((rtype, principal, host))
        for key in touched_sections:
            pattern, rtype, name = key
            sections = new.literal if pattern == _LITERAL else new.prefixed
            if new.members[key]:
                sections[(rtype, name)] = _section(new.members[key])
            else:
                del new.members[key]
                sections.pop((rtype, name), None)
        for rtype in touched_lengths:
            counts = {n: c for n, c in new.length_counts[rtype].items() if c > 0}
            if counts:
                new.length_counts[rtype] = counts
                new.prefix_lengths[rtype] = tuple(sorted(counts))
            else:  # the type's last prefixed ACL left: no entry, as a full build would hold
                del new.length_counts[rtype]
                new.prefix_lengths.pop(rtype, None)
        for rtype, count in list(new.type_counts.items()):
            if count <= 0:
                del new.type_counts[rtype]
        for key in touched_allow:
            rtype, principal, host = key
            by_principal = own(new.allow_by_type, rtype)
            hosts = own(by_principal, principal)
            mask = 0
            for operation in new.allow_members[key]:
                mask |= 1 << operation
            if mask:
                hosts[host] = mask
            else:
                del new.allow_members[key]
                hosts.pop(host, None)
                if not hosts:
                    del by_principal[principal]
                    if not by_principal:
                        del new.allow_by_type[rtype]
        return new

    def sections(self, resource_type: int, name: str) -> list[Section]:
        """The sections whose pattern matches ``name``: the literal name, the literal wildcard ``*`` and every
        prefixed name that ``name`` starts with. Cost: two lookups plus one per distinct prefix length."""
        found = []
        literal = self.literal.get((resource_type, name))
        if literal is not None:
            found.append(literal)
        if name != WILDCARD:
            wildcard = self.literal.get((resource_type, WILDCARD))
            if wildcard is not None:
                found.append(wildcard)
        size = len(name)
        prefixed = self.prefixed
        for length in self.prefix_lengths.get(resource_type, ()):
            if length > size:
                break
            section = prefixed.get((resource_type, name[:length]))
            if section is not None:
                found.append(section)
        return found

    def has_type(self, resource_type: int) -> bool:
        """Whether any ACL (allow or deny, any pattern) of ``resource_type`` exists."""
        return resource_type in self.type_counts


EMPTY = AclIndex()
