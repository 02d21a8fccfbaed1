"""The offline contradiction and duplicate heuristics of the write path."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsvc.pipeline.write import facts
from memsvc.pipeline.write.facts import Claim, category, content_terms, extract_claims, find_conflict, is_duplicate


def conflict(old: str, new: str) -> str | None:
    found = find_conflict(extract_claims(old), extract_claims(new))
    return None if found is None else found.attribute


@pytest.mark.parametrize(
    ("old", "new", "attribute"),
    [
        ("I live in Lisbon", "I moved to Berlin last year", "residence"),
        ("I live in Lisbon.", "I now live in Porto with my partner", "residence"),
        ("I live in Lisbon", "I no longer live in Lisbon", "residence"),
        ("I work at Acme Corp", "I joined Globex in March", "employer"),
        ("I work for the city council", "I now work at a bakery", "employer"),
        ("My favourite colour is blue", "My favourite colour is green now", "favourite colour"),
        ("I love olives", "I hate olives", "opinion of olives"),
        ("I like jazz", "I don't like jazz anymore", "opinion of jazz"),
        ("I prefer window seats on long flights", "I now prefer aisle seats on long flights", "preference"),
        ("My name is Sam", "My name is Samantha", "name"),
        ("I am 34 years old", "I'm 35", "age"),
        ("I am single", "I'm married", "marital status"),
        ("My wife is Ana", "My wife is Joana", "partner"),
        ("I am vegetarian", "I am vegan", "diet"),
        ("My sister lives in Lisbon", "My sister moved to Madrid", "residence"),
        ("My dog is called Biscuit", "My dog is called Pepper", "name of dog"),
        ("My phone number is 555-0100", "My phone number is 555-0199", "phone number"),
    ],
)
def test_contradictions_are_found(old: str, new: str, attribute: str) -> None:
    assert conflict(old, new) == attribute


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Lisbon", "I live in Lisbon"),
        ("I live in Lisbon", "My sister lives in Madrid"),
        ("I work at Acme Corp", "I live in Berlin"),
        ("I prefer window seats on long flights", "I prefer tea in the morning"),
        ("I love olives", "I love sushi"),
        ("I like jazz", "I love jazz"),
        ("Dave runs marathons every spring", "Dave ran a marathon in Boston"),
        ("My favourite colour is blue", "My favourite food is ramen"),
        ("My dog is called Biscuit", "My dog is a labrador"),
        ("My car is red", "My car is fast"),
        ("I joined Globex in March", "I joined a gym"),
        ("I work at Acme Corp", "I work at night"),
        ("My sister is a nurse", "My sister is an architect"),
    ],
)
def test_compatible_statements_do_not_conflict(old: str, new: str) -> None:
    assert conflict(old, new) is None


def test_claims_carry_subject_attribute_and_value() -> None:
    assert Claim("user", "residence", "berlin") in extract_claims("Last spring I moved to Berlin, and I love it.")
    assert Claim("sister", "employer", "google") in extract_claims("My sister works at Google in Zurich")
    assert Claim("user", "residence", "lisbon", negated=True) in extract_claims("I don't live in Lisbon anymore")
    assert extract_claims("hello there") == []
    # An amount's first digits are no age.
    assert not [c for c in extract_claims("rent is 1,250 for the one-bed in Clapton") if c.attribute == "age"]
    assert Claim("user", "age", "67") in extract_claims("Can I do it myself? I'm 67")


def test_duplicates_need_near_identical_meaning_and_the_same_terms() -> None:
    assert is_duplicate("I am allergic to peanuts", "I'm allergic to peanuts.", 0.97)
    assert is_duplicate("I prefer window seats on long flights", "I really prefer window seats on long flights", 0.96)
    assert not is_duplicate("I am allergic to peanuts", "I am allergic to peanuts", 0.90)  # below the threshold
    assert not is_duplicate("I am 34 years old", "I am 35 years old", 0.99)  # numbers differ
    assert not is_duplicate("I like jazz", "I don't like jazz", 0.96)  # negation differs
    assert not is_duplicate("I live in Lisbon", "I live in Porto", 0.96)  # a contradiction, not a repeat
    assert not is_duplicate("Alice keeps bees in her garden", "Alice keeps goats and bees in her garden", 0.96)


def test_content_terms_fold_plurals_and_drop_function_words() -> None:
    assert content_terms("I prefer the window seats") == {"prefer", "window", "seat"}


def test_possessive_owners_are_subjects() -> None:
    assert conflict("Ivy's favourite colour is blue", "Ivy's favourite colour is green now") == "favourite colour"
    assert conflict("My sister's husband is Tom", "My sister's husband is Luke") == "partner"
    assert conflict("Ivy's favourite colour is blue", "My favourite colour is green") is None


def test_conflict_descriptions_never_quote_the_memory() -> None:
    found = find_conflict(extract_claims("Ivy loves olives"), extract_claims("Ivy hates olives"))
    assert (
        found is not None
        and found.describe() == "same subject (another person) and attribute (opinion), a different value"
    )
    assert category("favourite colour") == "favourite" and category("phone number") == "attribute"


# Every pattern the claim parser runs, with the words it skips sentences without.
_GATED = {
    **{f"{rule.attribute} {i}": rule.pattern for i, rule in enumerate(facts._RULES)},
    "favourite": facts._FAVOURITE,
    "preference": facts._PREFER,
    "opinion": facts._OPINION,
    "generic": facts._GENERIC,
    "quantity": facts._QUANTITY,
    "raised": facts._RAISED,
    "measure": facts._MEASURE,
    "schedule": facts._SCHEDULE,
    "habit": facts._HABIT,
    "ongoing": facts._ONGOING,
    "stopped": facts._STOPPED,
}


@pytest.mark.parametrize("gated", _GATED.values(), ids=_GATED.keys())
@settings(max_examples=150, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_claim_pattern_matches_without_one_of_its_words(gated: facts._Gated, data: st.DataObject) -> None:
    # Strings the pattern itself generates: each of its alternatives gets drawn, so a word list
    # missing one (say "staying" for "I am staying in Porto") fails here.
    text = data.draw(st.from_regex(gated.regex, alphabet=st.characters(codec="ascii")))
    assert gated.regex.search(text)
    assert any(word in text.lower() for word in gated.words), text


def test_sentences_outside_ascii_run_every_pattern() -> None:
    # Case-blind matching pairs the long s (U+017F) with "s", and the Kelvin sign with "k", where
    # lower() keeps them apart.
    assert extract_claims("I moved to Zürich") == [Claim("user", "residence", "zürich")]
    assert extract_claims("I am \u017ftaying in Porto") == [Claim("user", "residence", "porto")]
