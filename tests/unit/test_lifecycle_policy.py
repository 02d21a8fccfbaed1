"""Lifecycle policy in isolation: decay, tiers, percentiles, the usage signal, contradiction detectors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memsvc.deadline import Deadline
from memsvc.domain.models import Memory, MemoryKind, Namespace, Role, Tier
from memsvc.pipeline.jobs.maintenance import MaintenancePolicy, decay_of, percentile, tier_of
from memsvc.pipeline.query.usage import usage_signal
from memsvc.pipeline.write.facts import ClaimCache
from memsvc.pipeline.write.review import LlmDetector, RuleDetector
from memsvc.pipeline.write.scoring import estimate_importance

DAY_S = 86_400.0
NS = Namespace("t", "p", "development", "u")


def test_decay_halves_every_half_life_without_recall() -> None:
    assert decay_of(0, 30) == 1.0
    assert decay_of(30 * DAY_S, 30) == pytest.approx(0.5)
    assert decay_of(60 * DAY_S, 30) == pytest.approx(0.25)
    assert decay_of(-5, 30) == 1.0  # a clock behind the row is "just now"
    assert decay_of(1e9, 0) == 1.0  # half-life 0 disables decay


@pytest.mark.parametrize(
    ("idle_days", "importance", "tier"),
    [(0, 0.5, Tier.HOT), (6.9, 0.5, Tier.HOT), (7, 0.5, Tier.WARM), (29, 0.5, Tier.WARM), (30, 0.5, Tier.COLD)],
)
def test_tiers_follow_idle_time(idle_days: float, importance: float, tier: Tier) -> None:
    assert tier_of(idle_days * DAY_S, importance, MaintenancePolicy()) is tier


def test_important_memories_stay_hot() -> None:
    assert tier_of(365 * DAY_S, 0.9, MaintenancePolicy()) is Tier.HOT
    assert tier_of(365 * DAY_S, 0.9, MaintenancePolicy(hot_importance=1.01)) is Tier.COLD


def test_percentiles_are_nearest_rank() -> None:
    values = sorted([0, 0, 0, 1, 1, 2, 3, 5, 8, 40])
    assert percentile(values, 0.5) == 1
    assert percentile(values, 0.9) == 8
    assert percentile(values, 0.99) == 40
    assert percentile([], 0.9) == 0


def test_usage_is_normalised_by_the_tenant_percentile() -> None:
    assert usage_signal(0, 8, 10) == 0
    assert usage_signal(8, 8, 10) == pytest.approx(1.0)
    assert usage_signal(80, 8, 10) == 1.0
    assert 0 < usage_signal(2, 8, 10) < usage_signal(4, 8, 10) < 1
    # The same count means more in a tenant whose memories are rarely recalled.
    assert usage_signal(3, 4, 10) > usage_signal(3, 40, 10)
    # Without percentiles (or when most memories were never recalled) the count saturates.
    assert usage_signal(10, None, 10) == pytest.approx(1 - 1 / 2.718281828, rel=1e-6)
    assert usage_signal(10, 0, 10) == usage_signal(10, None, 10)


def memory(content: str, memory_id: str = "a" * 32) -> Memory:
    return Memory(id=memory_id, namespace=NS, content=content)


def test_the_rule_detector_names_subject_and_attribute() -> None:
    found = asyncio.run(
        RuleDetector().contradicted(
            "I moved to Berlin",
            [memory("I live in Lisbon"), memory("I like tea", "b" * 32)],
            Deadline(None),
            ClaimCache(),
        )
    )
    assert [c.memory.content for c in found] == ["I live in Lisbon"]
    assert "residence" in found[0].reason
    assert "berlin" not in found[0].reason.lower() and "lisbon" not in found[0].reason.lower()  # stored unencrypted


def test_what_is_told_as_the_past_contradicts_nothing() -> None:
    said = "Back when I lived in Cork I walked everywhere"
    assert not RuleDetector().reads_candidates(said, ClaimCache())
    stored = [memory("I live in Manchester")]
    assert asyncio.run(RuleDetector().contradicted(said, stored, Deadline(None), ClaimCache())) == []


class FakeAsk:
    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.calls: list[dict[str, str]] = []

    async def __call__(self, prompt: str, deadline: Deadline, **values: str) -> Any:
        self.calls.append({"prompt": prompt, **values})
        return self.reply


def test_the_llm_detector_uses_the_model_answer() -> None:
    ask = FakeAsk({"contradicted": [{"index": 2, "reason": "diet: vegetarian -> vegan"}, {"index": 9}]})
    candidates = [memory("I like tea"), memory("I am vegetarian", "b" * 32)]
    found = asyncio.run(LlmDetector(ask).contradicted("I went vegan", candidates, Deadline(None), ClaimCache()))
    assert [c.memory.content for c in found] == ["I am vegetarian"]  # index 9 is out of range
    assert "LLM" in found[0].reason and "vegan" not in found[0].reason  # the model's words quote memories
    assert ask.calls[0]["prompt"] == "contradiction" and "2. I am vegetarian" in ask.calls[0]["memories"]


@pytest.mark.parametrize("reply", [None, "nonsense", {"contradicted": "2"}, {"contradicted": [{"why": 1}]}])
def test_the_llm_detector_falls_back_to_rules(reply: Any) -> None:
    found = asyncio.run(
        LlmDetector(FakeAsk(reply)).contradicted(
            "I moved to Berlin", [memory("I live in Lisbon")], Deadline(None), ClaimCache()
        )
    )
    assert [c.memory.content for c in found] == ["I live in Lisbon"]


def test_importance_rises_for_health_and_personal_facts_and_says_why() -> None:
    plain = estimate_importance("The meeting room has a green sofa", Role.USER, MemoryKind.FACT)
    allergy = estimate_importance("I am allergic to penicillin", Role.USER, MemoryKind.FACT)
    moved = estimate_importance("I moved to Berlin in March", Role.USER, MemoryKind.FACT)
    assert allergy.value > moved.value > plain.value
    assert "health or safety" in allergy.reason
    assert "personal fact (residence)" in moved.reason
    assert estimate_importance("ok thanks", Role.USER, MemoryKind.FACT).reason == "small talk"
