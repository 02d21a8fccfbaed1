"""Requests per tenant per second: token buckets, in-process or shared by every replica through Redis."""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from threading import Lock
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from memsvc.stores.caches.redis import RedisGuard

log = logging.getLogger(__name__)


class RateLimiter(Protocol):
    async def acquire(self, tenant: str) -> float:
        """Take one token: 0.0 when the call may proceed, else the seconds until a token is due."""
        ...


class LocalTokenBuckets:
    """One bucket per tenant in this process: `rate_per_s` tokens a second, at most `burst` saved up."""

    def __init__(
        self,
        rate_per_s: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        max_tenants: int = 100_000,
    ) -> None:
        self._rate = rate_per_s
        self._burst = float(max(burst, 1))
        self._clock = clock
        self._max_tenants = max_tenants
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = Lock()

    def take(self, tenant: str) -> float:
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.pop(tenant, (self._burst, now))
            tokens = min(self._burst, tokens + max(0.0, now - last) * self._rate)
            wait = 0.0
            if tokens >= 1.0:
                tokens -= 1.0
            else:
                wait = (1.0 - tokens) / self._rate
            self._buckets[tenant] = (tokens, now)
            # A forgotten bucket is a full one, so evicting the least recently seen tenant is safe.
            while len(self._buckets) > self._max_tenants:
                self._buckets.popitem(last=False)
        return wait

    async def acquire(self, tenant: str) -> float:
        return self.take(tenant)


# The bucket lives in one Redis hash per tenant; Redis' own clock (TIME) keeps replicas consistent.
# The wait is returned as a string because Redis truncates Lua numbers to integers.
_TAKE_SCRIPT = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(saved[1]) or burst
local ts = tonumber(saved[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 1)
return tostring(wait)
"""


class RedisTokenBuckets:
    """Buckets shared by every replica; while Redis is down each replica limits on its own."""

    def __init__(self, guard: RedisGuard, prefix: str, rate_per_s: float, burst: int) -> None:
        self._guard = guard
        self._prefix = prefix
        self._rate = rate_per_s
        self._burst = max(burst, 1)
        self._fallback = LocalTokenBuckets(rate_per_s, burst)
        self._script = guard.client.register_script(_TAKE_SCRIPT)

    async def acquire(self, tenant: str) -> float:
        key = f"{self._prefix}:rl:{tenant}"
        result = await self._guard.call(lambda: self._script(keys=[key], args=[self._rate, self._burst]), "rate limit")
        if result is None:
            return self._fallback.take(tenant)
        wait = float(result.decode() if isinstance(result, bytes) else result)
        return wait if math.isfinite(wait) else 1.0


def build_rate_limiter(rate_per_s: float, burst: int, guard: RedisGuard | None, prefix: str) -> RateLimiter | None:
    """The configured limiter, or None when the limit is off (rate 0)."""
    if rate_per_s <= 0:
        return None
    size = burst if burst > 0 else max(1, math.ceil(rate_per_s))
    if guard is not None:
        return RedisTokenBuckets(guard, prefix, rate_per_s, size)
    return LocalTokenBuckets(rate_per_s, size)
