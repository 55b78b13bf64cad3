"""StandardAuthorizer (Kafka's StandardAuthorizer / StandardAuthorizerData): the rules (super users, DENY before
ALLOW, implied DESCRIBE / DESCRIBE_CONFIGS, literal / prefixed / wildcard patterns, User:* and host matching,
allow.everyone.if.no.acl.found), checked against a plain linear reading of those rules on random ACL sets, and
at scale: with 100,000 ACLs the decisions are right and cost what they cost with 10."""

from __future__ import annotations

import random
import time
import uuid

import pytest

from pykbroker.metadata.standard_authorizer import StandardAuthorizer
from pykbroker.protocol.acl import AclOperation as Op
from pykbroker.protocol.acl import AclPermissionType as Perm
from pykbroker.protocol.resource import PatternType as Pat
from pykbroker.protocol.resource import ResourceType as Res

ALLOW, DENY = Perm.ALLOW, Perm.DENY
LIT, PRE = Pat.LITERAL, Pat.PREFIXED
T, G = Res.TOPIC, Res.GROUP
IP = "10.0.0.1"


def acl(name, principal, op, perm=ALLOW, rtype=T, pattern=LIT, host="*") -> tuple:
    return (rtype, name, pattern, principal, host, op, perm)


class Image:
    """The part of a metadata image the authorizer reads: ``acls`` ({id: binding}), replaced on change."""

    def __init__(self, bindings=()):
        self.acls = {uuid.uuid4(): b for b in bindings}

    def add(self, *bindings) -> None:
        self.acls = {**self.acls, **{uuid.uuid4(): b for b in bindings}}


def authorizer(image: Image, super_users: str = "", allow_if_no_acl: bool = False) -> StandardAuthorizer:
    return StandardAuthorizer(lambda: image, super_users, allow_if_no_acl)


_IMPLIES = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}, Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS}}


def reference(bindings, super_users, allow_if_no_acl, principal, host, op, rtype, name) -> bool:
    """The rules read literally, one ACL after the other."""
    if principal in super_users:
        return True
    applicable = [
        b
        for b in bindings
        if b[0] == rtype and ((b[2] == LIT and b[1] in (name, "*")) or (b[2] == PRE and name.startswith(b[1])))
    ]
    if not applicable:
        return allow_if_no_acl
    mine = [b for b in applicable if b[3] in (principal, "User:*") and b[4] in (host, "*")]
    if any(b[6] == DENY and b[5] in (op, Op.ALL) for b in mine):
        return False
    return any(b[6] == ALLOW and (b[5] in (op, Op.ALL) or b[5] in _IMPLIES.get(op, ())) for b in mine)


def test_rules():
    image = Image(
        [
            acl("orders", "User:alice", Op.READ),
            acl("orders", "User:bob", Op.ALL),
            acl("orders", "User:bob", Op.WRITE, DENY),
            acl("fin-", "User:carol", Op.ALTER_CONFIGS, pattern=PRE),
            acl("*", "User:dave", Op.DESCRIBE),
            acl("*", "User:*", Op.READ, rtype=G),
            acl("fin-secret", "User:*", Op.ALL, DENY, host="10.9.9.9"),
            acl("fin-", "User:erin", Op.WRITE, pattern=PRE, host=IP),
        ]
    )
    a = authorizer(image, super_users="User:admin")
    assert a.authorize("User:alice", IP, Op.READ, T, "orders")
    assert a.authorize("User:alice", IP, Op.DESCRIBE, T, "orders")  # READ implies DESCRIBE
    assert not a.authorize("User:alice", IP, Op.WRITE, T, "orders")
    assert a.authorize("User:bob", IP, Op.READ, T, "orders")  # ALL
    assert not a.authorize("User:bob", IP, Op.WRITE, T, "orders")  # DENY beats ALL
    assert a.authorize("User:carol", IP, Op.DESCRIBE_CONFIGS, T, "fin-x")  # ALTER_CONFIGS implies it
    assert not a.authorize("User:carol", IP, Op.DESCRIBE, T, "fin-x")
    assert not a.authorize("User:carol", IP, Op.ALTER_CONFIGS, T, "fin")  # not a prefix match
    assert a.authorize("User:dave", IP, Op.DESCRIBE, T, "anything")  # wildcard
    assert a.authorize("User:zed", IP, Op.READ, G, "any-group")  # User:* on the wildcard
    assert not a.authorize("User:zed", IP, Op.WRITE, G, "any-group")
    assert a.authorize("User:erin", IP, Op.WRITE, T, "fin-secret")
    assert not a.authorize("User:erin", "10.0.0.2", Op.WRITE, T, "fin-other")  # host
    assert not a.authorize("User:erin", "10.9.9.9", Op.WRITE, T, "fin-secret")  # DENY for everyone there
    assert a.authorize("User:admin", IP, Op.DELETE, T, "fin-secret")  # super user
    # Some ACL matches every topic (the wildcard): no "no ACL found" path for topics here.
    assert not authorizer(image, allow_if_no_acl=True).authorize("User:x", IP, Op.READ, T, "other")
    assert authorizer(image, allow_if_no_acl=True).authorize("User:x", IP, Op.READ, Res.CLUSTER, "kafka-cluster")
    assert not authorizer(image).authorize("User:x", IP, Op.READ, Res.CLUSTER, "kafka-cluster")
    assert a.authorize_any("User:carol", IP, Op.DESCRIBE_CONFIGS, T)
    assert not a.authorize_any("User:carol", IP, Op.WRITE, T)
    assert a.authorize_any("User:zed", IP, Op.READ, G)
    assert authorizer(image, allow_if_no_acl=True).authorize_any("User:x", IP, Op.READ, Res.TRANSACTIONAL_ID)


def test_an_acl_change_is_seen_by_the_next_decision():
    image = Image([acl("t", "User:alice", Op.READ)])
    a = authorizer(image)
    assert not a.authorize("User:alice", IP, Op.READ, T, "t2")
    image.add(acl("t2", "User:alice", Op.READ))
    assert a.authorize("User:alice", IP, Op.READ, T, "t2")
    image.add(acl("t", "User:alice", Op.ALL, DENY, pattern=PRE))
    assert not a.authorize("User:alice", IP, Op.READ, T, "t2")


@pytest.mark.parametrize("seed", range(20))
def test_same_decisions_as_the_rules_read_literally(seed):
    rng = random.Random(seed)
    names = ["a", "ab", "abc", "abd", "b", "ba", "*", "x-1", "x-"]
    principals = ["User:alice", "User:bob", "User:*", "User:admin"]
    hosts = ["*", IP, "10.0.0.2"]
    ops = [Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.DELETE]
    bindings = [
        acl(
            rng.choice(names[:-3] + ["x-"]) if pattern == PRE else rng.choice(names),
            rng.choice(principals),
            rng.choice(ops),
            rng.choice([ALLOW, ALLOW, DENY]),
            rtype=rng.choice([T, G]),
            pattern=pattern,
            host=rng.choice(hosts),
        )
        for pattern in (rng.choice([LIT, PRE]) for _ in range(rng.randint(0, 25)))
    ]
    image = Image(bindings)
    for allow_if_no_acl in (False, True):
        a = authorizer(image, "User:admin", allow_if_no_acl)
        for _ in range(300):
            query = (
                rng.choice(principals[:2] + ["User:carol", "User:admin"]),
                rng.choice(hosts[1:]),
                rng.choice(ops[1:]),
                rng.choice([T, G]),
                rng.choice(names + ["abcd", "x-12", "c", ""]),
            )
            want = reference(bindings, {"User:admin"}, allow_if_no_acl, *query)
            assert a.authorize(*query) == want, (query, bindings)


def test_acl_changes_update_the_index_as_a_rebuild_would():
    """ACLs come and go over successive images: each index is derived from the previous one and decides as the
    rules read literally, and holds what a full build of the same ACLs holds."""
    from pykbroker.metadata.authorizer_data import AclIndex

    rng = random.Random(3)
    names = ["a", "ab", "abc", "b", "*"]
    image = Image([acl(f"base{i}", "User:bob", Op.READ) for i in range(40)])  # updates, not rebuilds
    a = authorizer(image, allow_if_no_acl=True)
    for step in range(60):
        acls = dict(image.acls)
        for acl_id in rng.sample(sorted(acls, key=str), k=min(len(acls), rng.randint(0, 3))):
            del acls[acl_id]
        for _ in range(rng.randint(0, 4)):
            principal, op = rng.choice(["User:alice", "User:*"]), rng.choice([Op.READ, Op.ALL])
            perm, rtype, pattern = rng.choice([ALLOW, DENY]), rng.choice([T, G]), rng.choice([LIT, PRE])
            acls[uuid.UUID(int=rng.getrandbits(128))] = acl(
                rng.choice(names), principal, op, perm, rtype=rtype, pattern=pattern
            )
        image.acls = acls
        for name in names + ["abcd", "c"]:
            for rtype in (T, G):
                query = ("User:alice", IP, Op.READ, rtype, name)
                assert a.authorize(*query) == reference(acls.values(), (), True, *query), (step, query)
        built = AclIndex.build(acls)
        current = a._index()
        assert (current.literal, current.prefixed, current.allow_by_type) == (
            built.literal,
            built.prefixed,
            built.allow_by_type,
        )
        assert (current.prefix_lengths, current.length_counts) == (built.prefix_lengths, built.length_counts)
        assert current.type_counts == built.type_counts


def test_removing_a_types_last_prefixed_acl_leaves_no_length_entry():
    """When the last prefixed ACL of a resource type goes, the derived index holds no prefix-length entry for
    that type, as a full build of the remaining ACLs would (an emptied entry was left behind before)."""
    from pykbroker.metadata.authorizer_data import AclIndex

    base = {uuid.UUID(int=i): acl(f"base{i}", "User:bob", Op.READ) for i in range(40)}
    prefixed_id = uuid.UUID(int=1000)
    with_prefixed = {**base, prefixed_id: acl("ab", "User:alice", Op.READ, rtype=T, pattern=PRE)}
    index = AclIndex.build(base).updated(with_prefixed)
    assert index.prefix_lengths == {T: (2,)}
    after = index.updated(base)
    built = AclIndex.build(base)
    assert (after.prefix_lengths, after.length_counts) == (built.prefix_lengths, built.length_counts) == ({}, {})


def unrelated(count: int, rng: random.Random) -> list[tuple]:
    """``count`` ACLs on other resources: literal and prefixed, topics and groups, many principals."""
    out = []
    for i in range(count):
        pattern = PRE if i % 3 == 0 else LIT
        name = f"team{i % 997}-svc{i}" + ("-" if pattern == PRE else "")
        op, perm, rtype = rng.choice([Op.READ, Op.WRITE, Op.DESCRIBE]), rng.choice([ALLOW, DENY]), rng.choice([T, G])
        out.append(acl(name, f"User:u{i % 5000}", op, perm, rtype=rtype, pattern=pattern))
    return out


SCALE_ACLS = [
    acl("payments-", "User:eve", Op.ALL, DENY, pattern=PRE),
    acl("payments-", "User:*", Op.READ, pattern=PRE),
    acl("payments-ledger", "User:frank", Op.WRITE),
    acl("*", "User:ops", Op.DESCRIBE),
    acl("pay", "User:gina", Op.WRITE, pattern=PRE),
    acl("payments-ledger", "User:gina", Op.WRITE, DENY, host="10.6.6.6"),
]


@pytest.fixture(scope="module")
def large() -> StandardAuthorizer:
    """An authorizer over 100,000 unrelated ACLs plus SCALE_ACLS, its index built."""
    a = authorizer(Image(unrelated(100_000, random.Random(7)) + SCALE_ACLS), "User:admin")
    a.authorize("User:eve", IP, Op.READ, T, "payments-ledger")
    return a


def test_prefix_wildcard_and_deny_at_scale(large):
    decide = large.authorize
    assert not decide("User:eve", IP, Op.READ, T, "payments-ledger")  # prefixed DENY beats User:* READ
    assert decide("User:zoe", IP, Op.READ, T, "payments-ledger")  # prefixed User:*
    assert decide("User:zoe", IP, Op.DESCRIBE, T, "payments-x")  # implied by READ
    assert not decide("User:zoe", IP, Op.WRITE, T, "payments-ledger")
    assert decide("User:frank", IP, Op.WRITE, T, "payments-ledger")  # literal
    assert not decide("User:frank", IP, Op.WRITE, T, "payments-ledger2")
    assert decide("User:ops", IP, Op.DESCRIBE, T, "team3-svc3")  # wildcard
    assert decide("User:gina", IP, Op.WRITE, T, "payments-ledger")  # prefix "pay"
    assert not decide("User:gina", "10.6.6.6", Op.WRITE, T, "payments-ledger")  # DENY from that host
    assert decide("User:admin", IP, Op.DELETE, T, "payments-ledger")
    assert not decide("User:u1", IP, Op.READ, T, "unknown-topic")  # wildcard matches: no allow-if-no-acl path
    assert not decide("User:u1", IP, Op.READ, G, "no-such-group")


def _fastest_call(a: StandardAuthorizer, calls: int = 300) -> float:
    a.authorize("User:eve", IP, Op.READ, T, "payments-ledger")  # builds the index
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        a.authorize("User:zoe", IP, Op.READ, T, "payments-ledger")
        best = min(best, time.perf_counter() - start)
    return best


def test_a_decision_costs_the_same_with_100000_unrelated_acls(large):
    small = _fastest_call(authorizer(Image(unrelated(10, random.Random(1)) + SCALE_ACLS)))
    big = _fastest_call(large)
    # The fastest of many calls is stable under load; a scan of the ACLs would be thousands of times slower.
    assert big < 10 * small + 20e-6, (small, big)
