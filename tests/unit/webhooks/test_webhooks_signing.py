"""Standard Webhooks signatures and the retry schedule."""

from __future__ import annotations

import base64

import pytest

from tether.webhooks.backoff import RetryPolicy
from tether.webhooks.signing import SECRET_PREFIX, new_secret, signature, signed_headers


def test_signature_matches_the_standard_webhooks_test_vector() -> None:
    # The vector published with the Standard Webhooks reference libraries.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = '{"test": 2432232314}'
    got = signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
    assert got == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_headers_carry_id_timestamp_and_signature() -> None:
    secret = new_secret()
    headers = signed_headers(secret, "msg_1", 1700000000, "{}")
    assert headers["webhook-id"] == "msg_1"
    assert headers["webhook-timestamp"] == "1700000000"
    assert headers["webhook-signature"] == signature(secret, "msg_1", 1700000000, "{}")
    assert signature(secret, "msg_1", 1700000001, "{}") != headers["webhook-signature"]


def test_new_secrets_are_random_and_well_formed() -> None:
    first, second = new_secret(), new_secret()
    assert first != second
    assert first.startswith(SECRET_PREFIX)
    assert len(base64.b64decode(first.removeprefix(SECRET_PREFIX))) == 32


def test_default_retries_come_quickly_then_grow_for_up_to_a_day() -> None:
    policy = RetryPolicy()
    delays = [policy.delay(n) for n in range(1, 40)]
    assert sum(delays[:3]) < 60  # at least three retries within the first minute
    assert delays == sorted(delays)
    assert delays[3] > delays[2]
    assert max(delays) == policy.max_delay
    assert policy.delay(10_000) == policy.max_delay  # no overflow for a long failure


@pytest.mark.parametrize(("age", "retries"), [(0.0, True), (86_395.0, True), (86_396.0, False)])
def test_next_attempt_gives_up_after_a_day(age: float, retries: bool) -> None:
    policy = RetryPolicy()  # the first retry comes 5 s after the first failure
    now = 100.0 + age
    got = policy.next_attempt(created_at=100.0, now=now, attempts=1)
    assert got == (now + 5.0 if retries else None)
