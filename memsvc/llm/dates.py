"""Date phrases to time windows: "last month", "in March", "two weeks ago", "8 May 2023"."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memsvc.llm.text import MONTHS, WEEKDAYS

_DAY = timedelta(days=1)
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}
_UNIT_DAYS = {"day": 1.0, "week": 7.0, "fortnight": 14.0, "month": 30.44, "year": 365.25}
_MONTH = r"(?P<month>" + "|".join(MONTHS) + "|" + "|".join(m[:3] for m in MONTHS if m != "may") + r")\.?"
_ORD = r"(?:st|nd|rd|th)?"
_NUM = r"(?P<n>\d+|" + "|".join(sorted((re.escape(k) for k in _NUMBER_WORDS), key=len, reverse=True)) + ")"
_UNIT = r"(?P<unit>day|week|fortnight|month|year)s?"

_ISO = re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})\b")
_DAY_MONTH_YEAR = re.compile(rf"\b(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?{_MONTH},?\s+(?P<y>\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(?P<d>\d{{1,2}}){_ORD},?\s+(?P<y>\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\s+(?:of\s+)?(?P<y>\d{{4}})\b", re.I)
_IN_MONTH = re.compile(rf"\b(?:in|during|since|throughout|early|late|mid|this|last)\s+-?{_MONTH}\b", re.I)
_IN_YEAR = re.compile(r"\b(?:in|during|since|throughout)\s+(?P<y>(?:19|20)\d{2})\b", re.I)
_AGO = re.compile(rf"\b{_NUM}\s+{_UNIT}\s+ago\b", re.I)
_PAST_N = re.compile(rf"\b(?:last|past|previous)\s+{_NUM}\s+{_UNIT}\b", re.I)
_LAST_UNIT = re.compile(r"\b(?P<which>last|this|past|previous)\s+(?P<unit>week|weekend|month|year)\b", re.I)
_WEEKDAY = re.compile(r"\b(?:last|on|this|past)\s+(?P<wd>" + "|".join(WEEKDAYS) + r")\b", re.I)
_SIMPLE = re.compile(r"\b(?P<w>today|yesterday|tonight|this morning|last night|recently|lately)\b", re.I)
_RELATIVE_TO = re.compile(
    rf"\b(?:(?:the\s+)?{_NUM}\s+{_UNIT}|the\s+(?P<unit1>day|week|weekend|month|year))\s+"
    r"(?P<dir>before|after|prior to|following)\s+",
    re.I,
)


@dataclass(frozen=True)
class TimeWindow:
    """A created_at range in UNIX seconds, with the phrase it came from."""

    start: float
    end: float
    phrase: str

    def contains(self, ts: float) -> bool:
        return self.start <= ts < self.end

    def describe(self) -> str:
        fmt = "%Y-%m-%d"
        a = datetime.fromtimestamp(self.start, UTC).strftime(fmt)
        b = datetime.fromtimestamp(self.end, UTC).strftime(fmt)
        return f"{a}..{b} from {self.phrase!r}"


def _month_number(name: str) -> int:
    name = name.lower().rstrip(".")
    for i, m in enumerate(MONTHS, start=1):
        if m == name or m[:3] == name:
            return i
    raise ValueError(name)


def _count(text: str) -> int:
    text = text.lower()
    return int(text) if text.isdigit() else _NUMBER_WORDS.get(text, 1)


def _window(start: datetime, end: datetime, phrase: str) -> TimeWindow:
    return TimeWindow(start.timestamp(), end.timestamp(), phrase)


def _month_window(year: int, month: int, phrase: str) -> TimeWindow:
    days = calendar.monthrange(year, month)[1]
    start = datetime(year, month, 1, tzinfo=UTC)
    return _window(start, start + days * _DAY, phrase)


def _explicit(text: str) -> tuple[TimeWindow, re.Match[str]] | None:
    """The first explicit calendar date or month in the text."""
    for pattern in (_ISO, _DAY_MONTH_YEAR, _MONTH_DAY_YEAR):
        m = pattern.search(text)
        if m:
            try:
                month = int(m.group("m")) if pattern is _ISO else _month_number(m.group("month"))
                day = datetime(int(m.group("y")), month, int(m.group("d")), tzinfo=UTC)
            except ValueError:
                continue
            return _window(day, day + _DAY, m.group(0)), m
    m = _MONTH_YEAR.search(text)
    if m and not (m.group("month").lower() == "may" and not m.group(0)[0].isupper()):
        return _month_window(int(m.group("y")), _month_number(m.group("month")), m.group(0)), m
    return None


def parse_time_window(text: str, now: float) -> TimeWindow | None:
    """The time window a text refers to, relative to `now` or to an explicit date; None if none.
    "Since" a year or a month runs from its start to `now`."""
    window = _time_window(text, now)
    if window is not None and window.phrase.lower().startswith("since") and window.start < now:
        return TimeWindow(window.start, max(window.end, now + _DAY.total_seconds()), window.phrase)
    return window


def _time_window(text: str, now: float) -> TimeWindow | None:
    today = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    now_dt = datetime.fromtimestamp(now, UTC)

    rel = _RELATIVE_TO.search(text)
    if rel:
        anchor = _explicit(text[rel.end() :])
        if anchor is not None:
            base, _ = anchor
            unit = (rel.group("unit") or rel.group("unit1")).lower()
            span = timedelta(days=_UNIT_DAYS.get(unit, 2.0 if unit == "weekend" else 7.0))
            span *= _count(rel.group("n")) if rel.group("n") else 1
            phrase = text[rel.start() : rel.end()] + base.phrase
            start = datetime.fromtimestamp(base.start, UTC)
            end = datetime.fromtimestamp(base.end, UTC)
            if rel.group("dir").lower() in ("before", "prior to"):
                return _window(start - span - _DAY, start, phrase)
            return _window(end, end + span + _DAY, phrase)

    explicit = _explicit(text)
    if explicit is not None:
        return explicit[0]

    m = _IN_YEAR.search(text)
    if m:
        year = int(m.group("y"))
        return _window(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC), m.group(0))

    m = _AGO.search(text)
    if m:
        n, unit = _count(m.group("n")), m.group("unit").lower()
        days = n * _UNIT_DAYS[unit]
        slack = max(1.0, 0.5 * _UNIT_DAYS[unit])
        centre = now_dt - timedelta(days=days)
        return _window(centre - timedelta(days=slack), centre + timedelta(days=slack), m.group(0))

    m = _PAST_N.search(text)
    if m:
        days = _count(m.group("n")) * _UNIT_DAYS[m.group("unit").lower()]
        return _window(now_dt - timedelta(days=days), now_dt + _DAY, m.group(0))

    m = _LAST_UNIT.search(text)
    if m:
        which, unit = m.group("which").lower(), m.group("unit").lower()
        this = which == "this"
        if unit == "week":
            start = today - timedelta(days=today.weekday())
            return (
                _window(start, start + 7 * _DAY, m.group(0)) if this else _window(start - 7 * _DAY, start, m.group(0))
            )
        if unit == "weekend":
            saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
            if this and today.weekday() >= 5:
                saturday = today - timedelta(days=today.weekday() - 5)
            return _window(saturday, saturday + 2 * _DAY, m.group(0))
        if unit == "month":
            year, month = today.year, today.month
            if not this:
                year, month = (year - 1, 12) if month == 1 else (year, month - 1)
            return _month_window(year, month, m.group(0))
        year = today.year if this else today.year - 1
        return _window(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC), m.group(0))

    m = _IN_MONTH.search(text)
    if m and not (m.group("month").lower() == "may" and not m.group("month")[0].isupper()):
        month = _month_number(m.group("month"))
        # The most recent such month that has started: "in March" said in January is last March.
        year = today.year if month <= today.month else today.year - 1
        return _month_window(year, month, m.group(0))

    m = _WEEKDAY.search(text)
    if m:
        wd = WEEKDAYS.index(m.group("wd").lower())
        back = (today.weekday() - wd) % 7 or 7
        day = today - timedelta(days=back)
        return _window(day, day + _DAY, m.group(0))

    m = _SIMPLE.search(text)
    if m:
        w = m.group("w").lower()
        if w in ("today", "tonight", "this morning"):
            return _window(today, today + _DAY, m.group(0))
        if w in ("yesterday", "last night"):
            return _window(today - _DAY, today, m.group(0))
        return _window(now_dt - timedelta(days=30), now_dt + _DAY, m.group(0))
    return None


_NEXT = re.compile(r"\b(?P<w>tomorrow|next\s+(?:week|weekend|month|year))\b", re.I)
# A statement about what is to come: its "on Saturday" is the next Saturday, not the last one.
_FUTURE = re.compile(r"\b(?:will|shall|going to|gonna|plan(?:ning)? to|about to)\b|\w'll\b", re.I)
_COMING_WEEKDAY = re.compile(r"\b(?:on|this|coming)\s+(?P<wd>" + "|".join(WEEKDAYS) + r")\b", re.I)
_VAGUE = frozenset({"recently", "lately"})


def named_time(text: str, reference: float) -> TimeWindow | None:
    """The time a question names ("in June", "on 7 July", "the week before a date",
    "yesterday"), relative to `reference`; None when it names none or only says "recently" or
    "lately", which say no more than recency does."""
    window = parse_time_window(text, reference)
    return None if window is None or window.phrase.lower() in _VAGUE else window


def _in_words(start: datetime, end: datetime) -> str:
    days = round((end - start) / _DAY)
    if days <= 1:
        return f"{start.day} {start:%B} {start.year}"
    if start.day == 1 and 28 <= days <= 31:
        return f"{start:%B} {start.year}"
    if start.month == 1 and start.day == 1 and days >= 365:
        return str(start.year)
    last = end - _DAY
    return f"{start.day} {start:%B} {start.year} to {last.day} {last:%B} {last.year}"


def resolve_date_phrase(text: str, said_at: float) -> tuple[str, str] | None:
    """The first relative date phrase of a text said at `said_at`, and the dates it means in words.

    "yesterday" said on 8 May 2023 -> ("yesterday", "7 May 2023"); "next month" -> ("next
    month", "June 2023"). Explicit dates and vague words ("recently") give None: nothing to add.
    """
    today = datetime.fromtimestamp(said_at, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    m = _NEXT.search(text)
    if m:
        w = " ".join(m.group("w").lower().split())
        if w == "tomorrow":
            start, end = today + _DAY, today + 2 * _DAY
        elif w == "next week":
            start = today - timedelta(days=today.weekday()) + 7 * _DAY
            end = start + 7 * _DAY
        elif w == "next weekend":
            start = today + timedelta(days=(5 - today.weekday()) % 7 or 7)
            end = start + 2 * _DAY
        elif w == "next month":
            year, month = (today.year + 1, 1) if today.month == 12 else (today.year, today.month + 1)
            start = datetime(year, month, 1, tzinfo=UTC)
            end = start + timedelta(days=calendar.monthrange(year, month)[1])
        else:
            start = datetime(today.year + 1, 1, 1, tzinfo=UTC)
            end = datetime(today.year + 2, 1, 1, tzinfo=UTC)
        return m.group(0), _in_words(start, end)
    m = _COMING_WEEKDAY.search(text)
    if m and _FUTURE.search(text):
        ahead = (WEEKDAYS.index(m.group("wd").lower()) - today.weekday()) % 7
        if ahead == 0 and not m.group(0).lower().startswith("this"):
            ahead = 7  # "on Friday" said on a Friday is a week away; "this Friday" is today
        day = today + timedelta(days=ahead)
        return m.group(0), _in_words(day, day + _DAY)
    window = parse_time_window(text, said_at)
    if window is None or window.phrase.lower() in _VAGUE or _explicit(window.phrase) is not None:
        return None
    if _AGO.fullmatch(window.phrase):  # "two weeks ago" is a point with slack around it
        centre = datetime.fromtimestamp((window.start + window.end) / 2, UTC)
        return window.phrase, f"about {centre.day} {centre:%B} {centre.year}"
    return window.phrase, _in_words(datetime.fromtimestamp(window.start, UTC), datetime.fromtimestamp(window.end, UTC))
