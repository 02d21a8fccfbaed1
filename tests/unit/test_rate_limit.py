"""The per-tenant token bucket, on a fake clock."""

from __future__ import annotations

import pytest

from memsvc.api.ratelimit import LocalTokenBuckets, build_rate_limiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_one_token_per_interval() -> None:
    clock = Clock()
    buckets = LocalTokenBuckets(rate_per_s=2.0, burst=3, clock=clock)
    assert [buckets.take("acme") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("acme") == pytest.approx(0.5)
    assert buckets.take("globex") == 0.0  # tenants do not share a bucket
    clock.now += 0.5
    assert buckets.take("acme") == 0.0
    assert buckets.take("acme") == pytest.approx(0.5)
    clock.now += 60
    assert [buckets.take("acme") for _ in range(4)][-1] > 0  # saved tokens never exceed the burst


def test_refused_calls_do_not_consume_tokens() -> None:
    clock = Clock()
    buckets = LocalTokenBuckets(rate_per_s=1.0, burst=1, clock=clock)
    assert buckets.take("t") == 0.0
    for _ in range(5):
        assert buckets.take("t") == pytest.approx(1.0)
    clock.now += 1.0
    assert buckets.take("t") == 0.0


def test_forgotten_tenants_start_full() -> None:
    buckets = LocalTokenBuckets(rate_per_s=1.0, burst=1, clock=Clock(), max_tenants=2)
    for tenant in ("a", "b", "c"):
        assert buckets.take(tenant) == 0.0
    assert buckets.take("a") == 0.0  # evicted, so full again: eviction errs on the caller's side


def test_zero_rate_disables_the_limit() -> None:
    assert build_rate_limiter(0.0, 10, None, "memsvc") is None
    assert isinstance(build_rate_limiter(5.0, 0, None, "memsvc"), LocalTokenBuckets)
