"""Varied synthetic memories and queries for the benchmarks, from templates and word lists."""

from __future__ import annotations

import random
from collections.abc import Iterator

_NAMES = (
    "Alice", "Bruno", "Chen", "Dara", "Emeka", "Farah", "Giulia", "Hiro", "Ines", "Jonas", "Kemal", "Lena",
    "Mateo", "Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Viktor", "Wen", "Yara",
)  # fmt: skip
_PLACES = (
    "Lisbon", "Kyoto", "Nairobi", "Oslo", "Montreal", "Hanoi", "Porto", "Cusco", "Tbilisi", "Seville",
    "Reykjavik", "Marrakesh", "Busan", "Tallinn", "Valparaiso", "Ljubljana", "Zanzibar", "Krakow",
)  # fmt: skip
_FOODS = (
    "ramen", "sourdough bread", "green curry", "tacos al pastor", "falafel", "mushroom risotto", "pho",
    "dark chocolate", "oat milk lattes", "spicy kimchi", "grilled sardines", "lentil soup", "dumplings",
    "blueberry pancakes", "paneer tikka", "ceviche", "miso salmon", "baklava",
)  # fmt: skip
_HOBBIES = (
    "bouldering", "watercolour painting", "trail running", "chess", "birdwatching", "pottery", "sailing",
    "playing the cello", "baking", "woodworking", "salsa dancing", "astronomy", "gardening", "kayaking",
    "knitting", "photography", "cycling", "learning Portuguese",
)  # fmt: skip
_THINGS = (
    "the quarterly report", "the kitchen renovation", "the team offsite", "a birthday party", "the tax return",
    "the conference talk", "a job interview", "the apartment move", "the wedding speech", "a dentist visit",
    "the product launch", "the marathon training plan", "the garden redesign", "a grant application",
)  # fmt: skip
_PEOPLE = ("sister", "manager", "neighbour", "best friend", "brother", "grandmother", "colleague", "landlord")
_ADJ = (
    "quiet", "sunny", "early", "cheap", "fast", "cosy", "vegetarian", "remote", "spacious", "reliable", "gentle",
    "busy", "formal", "relaxed", "detailed", "short",
)  # fmt: skip
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "March", "April", "June", "August", "September", "October", "December")

_MEMORY_TEMPLATES = (
    "I prefer {adj} places when I travel to {place}.",
    "My {person} {name} is visiting {place} in {month}.",
    "I have been really into {hobby} since {month}.",
    "Remind me that {thing} is due next {day}.",
    "I am allergic to {food}, so please never suggest it.",
    "{name} recommended trying {food} at a small place in {place}.",
    "We decided to postpone {thing} until {month}.",
    "I usually go {hobby} on {day} mornings with {name}.",
    "My favourite comfort food is {food}, especially on {adj} evenings.",
    "The assistant suggested a {adj} hotel near the old town of {place}.",
    "I promised my {person} to help with {thing} on {day}.",
    "Last {month} I spent two weeks in {place} and loved the {food}.",
    "I want {adj} answers without too much detail when I ask about {thing}.",
    "{name} from work is leading {thing} and needs my notes by {day}.",
    "I started {hobby} to relax after long days at work.",
    "My {person} lives in {place} and prefers {adj} restaurants.",
)
_QUERY_TEMPLATES = (
    "what food does the user like in {place}",
    "when is {thing} due",
    "who is visiting {place}",
    "what hobbies does the user enjoy on {day}",
    "is the user allergic to {food}",
    "what did {name} recommend",
    "what kind of hotel does the user prefer in {place}",
    "what did the user promise their {person}",
    "how does the user like answers about {thing}",
    "what happened with {thing} in {month}",
    "does the user like {hobby}",
    "where does the user's {person} live",
    "plans with {name} in {place} in {month}",
    "what does the user think about {food} and {hobby}",
    "who did the user meet in {place} on a {adj} {day}",
    "any notes on {thing} from {name}",
    "should I book a {adj} place in {place} for my {person}",
)


def _fill(template: str, rng: random.Random) -> str:
    return template.format(
        name=rng.choice(_NAMES),
        place=rng.choice(_PLACES),
        food=rng.choice(_FOODS),
        hobby=rng.choice(_HOBBIES),
        thing=rng.choice(_THINGS),
        person=rng.choice(_PEOPLE),
        adj=rng.choice(_ADJ),
        day=rng.choice(_DAYS),
        month=rng.choice(_MONTHS),
    )


def memory_texts(seed: int, count: int) -> list[str]:
    """`count` varied memory sentences; a seed gives the same list every time."""
    rng = random.Random(seed)
    return [_fill(rng.choice(_MEMORY_TEMPLATES), rng) for _ in range(count)]


def unique_queries(seed: int) -> Iterator[str]:
    """An endless stream of distinct query texts (so every one misses the embedding cache)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    while True:
        text = _fill(rng.choice(_QUERY_TEMPLATES), rng)
        for _ in range(20):
            if text not in seen:
                break
            text = _fill(rng.choice(_QUERY_TEMPLATES), rng)
        if text in seen:
            # The template space is finite; a suffix keeps the text natural and new.
            text = f"{text} ({rng.choice(_ADJ)} {rng.choice(_HOBBIES)}, {len(seen)})"
        seen.add(text)
        yield text
