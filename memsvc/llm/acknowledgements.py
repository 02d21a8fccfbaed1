"""Turns that only acknowledge or react ("Good to know!", "Haha yes", "Congrats on the move!").

Such a turn states nothing of its own. Returned as a result it spends a place, and an
assistant's prompt tokens, on nothing, so it is kept as context of the turn it answers instead.
These shapes are told apart by rules:

- every word is a reaction, a courtesy, a word of agreement, a function word, or one of a word
  or two echoing the turn it answers ("Berlin, nice!") or naming its speaker;
- a short reply led by a reaction ("Congrats on the promotion!", "Oof, that's a big jump.") that
  says nothing of its speaker's own (no "I", "we"), names nobody new and holds no number;
- an assistant's remark of a few words on what the user just told it, not asked ("Easy win.",
  "Cheaper than a new bike!", "I'm really sorry. That's hard.") that does not advise: the
  assistant's own feelings are no fact about the user;
- a wish, a cheer or a greeting passed on, whatever it names ("Have a great trip!", "Enjoy the
  BBQ!", "Congrats on Clearpath!", "Go Brewers!", "Give Biscuit a scratch from me!"), and an
  assistant's one-word judgement of what it was told ("Sensible."); beside anything else, a
  wish leaves the rest to decide;
- what a reply calls the one it answers ("you're a treasure");
- an assistant's question, alone or after such a remark ("Happy to help. What are your monthly
  costs?"): the user's answer states what it asks about;
- the user taking up what the assistant said, not asked: one word ("bet", "sold"), or only
  what they do with it ("found it", "ok ordering", "I'll report back"); and the answer to an
  offer of the assistant's ("Want me to draft it?" "nah im good").

A user who picks one of the assistant's words is choosing ("pinot noir it is", "the blue one
then", "malbec!"), unless they only say what the thing is like ("cinnamon sticks is wild but ok")
or say a clause of it back ("lol he def thinks he wins"); whoever answers a question answers it,
however short ("Nope!", "Stanage. Thanks."); anything that names something new ("Luna and
Oliver!", "Tuesdays at 7.", a number the answered turn does not hold) or says something of the
speaker's own ("im vegan tho") states something too.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from lemminflect import getAllLemmas

from memsvc.domain.models import Role
from memsvc.llm.text import STOPWORDS, named_entities, normalise, sentences, tokens
from memsvc.stores.lexical.analysis import Analyzer

# What people say to react, agree or be polite, as opposed to what they say about anything.
_INTERJECTIONS = frozenset(
    """
    oh ooh ah aah aw aww awww wow whoa woah yay yey hooray haha hahaha hahahaha hehe heh ha lol lmao rofl omg gosh
    goodness god heavens omigod
    geez jeez hmm hm mm mmm uh um huh yikes ugh phew oops ouch oof yum yummy hah ok okay k kk alright allright cool
    nice neat sweet wowza gee golly dang damn darn boy ohh ahh brill ace righto bingo woohoo whew yass yay
    sorted cracking lush grand stoked buzzing swell dandy fr frfr
    eish ag yoh haibo aiyo aiyoh aiya aiyah alamak wah wahh lah leh lor shiok arre arey yaar abeg ehen haba
    ayy ayyy och ach hala naks chur oya o paiseh paisey grabe poa okie dokie roger aight jubbly
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_COURTESIES = frozenset(
    """
    thanks thank thx ty tysm ta u cheers please welcome sorry apologies pleasure appreciate appreciated bye goodbye
    later day night morning evening afternoon hi hello hey care soon luck congrats congratulations kudos bravo enjoy
    fun wishes wish hope hoping xoxo safe travels np anytime
    gracias merci danke grazie obrigado obrigada arigato arigatou spasibo shukran asante salamat dhanyavaad
    shukriya thanx thnx tq po sana wahala million ton tons bunch heaps dhanyavad dhanyawad muchly needful
    beaucoup muchas mille schön schoen terima kasih xie tusen takk kiitos khob khun cảm ơn jazeelan raba
    ngiyabonga dankie efcharisto teşekkürler tesekkurler gamsahamnida
    """.split()  # noqa: SIM905 - a word list reads better as text
)
# Words that answer a yes/no question: a reaction after a statement, an answer after a question.
_ASSENT = frozenset(
    """
    yes yeah yep yup ya yah sure right true indeed exactly totally absolutely definitely certainly agreed agree
    fair same precisely correct course no nope nah not don't do does did def defo deffo
    ja nee aye haan yebo sawa sige ji achha acha accha theek thik hai
    """.split()  # noqa: SIM905 - a word list reads better as text
)
# How a reply judges what it reacts to, and the words such judgements are made of.
_EVALUATIONS = frozenset(
    """
    good great nice awesome amazing wonderful lovely fantastic excellent perfect brilliant super terrific
    incredible impressive beautiful gorgeous cute adorable funny hilarious interesting exciting sad unfortunate
    terrible awful tough rough crazy wild insane glad happy proud jealous envious thrilled delighted excited wise
    smart clever helpful useful kind thoughtful fascinating inspiring solid noted understood understandable
    gotcha got see know hear heard sounds sound seems seem looks look feel mean love loved like fine well better
    best lot bit sense makes fabulous marvellous marvelous splendid stellar epic dope rad legit lucky touching
    relief relieved bummer shame pity huge big relatable deserved done enough worth poor genius
    pleased chuffed stoked overjoyed ecstatic grateful thankful
    """.split()  # noqa: SIM905 - a word list reads better as text
)
# Nouns a reaction names what it reacts to with ("Great idea!", "Thanks for the tip").
_REACTION_NOUNS = frozenset(
    """
    idea ideas plan news update tip tips advice suggestion suggestions info information help point question
    reminder choice call pick chat talk note shout explanation explanations patience
    """.split()  # noqa: SIM905 - a word list reads better as text
)
# How people address whoever they reply to without naming them ("cheers mate", "thanks guys").
_ADDRESS = frozenset(
    """
    mate mates dude man buddy pal bro bruv bru boet bhai bhaiya didi oga guys folks fam friend love luv hun hen babe
    sir madam ma dear legend
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_PHATIC = _INTERJECTIONS | _COURTESIES | _EVALUATIONS | _REACTION_NOUNS | _ADDRESS
_LEADS = _INTERJECTIONS | _COURTESIES | _EVALUATIONS
# A number: something told, unless it is one of the answered turn's ("lol not cooking at 4am").
_NUMBER = re.compile(r"\w*\d(?:[\w:.,/-]*\w)?")
# Whoever a reply calls by name, title and all, at a sentence's end ("Happy running, Dr. Okafor.").
_VOCATIVE = re.compile(r",\s+((?:[A-Z][\w'.-]*\s+){0,2}[A-Z][\w'.-]*)\s*[!.?]+(?:\s|$)")
# The speaker saying something of their own.
_OWN = re.compile(r"\b(?:I|I'm|im|I've|ive|I'll|I'd|my|mine|we|we're|we've|our)\b", re.IGNORECASE)
# The speaker saying what they will do with what they were told ("I'll report back", "I will
# look into it"): no fact of theirs.
_INTENT = re.compile(r"\bI(?:['\u2019]ll| will| shall|['\u2019]m going to| am going to)\s+(?=\w)", re.IGNORECASE)
# ... or measuring what they were told against what they expected ("cheaper than i thought").
_EXPECTED = re.compile(r"\bthan I (?:thought|expected|imagined|feared|hoped)\b", re.IGNORECASE)
# A reply that picks one of the options it was given ("pinot noir it is", "the blue one then").
_CHOICE = re.compile(
    r"(?:\bit is|\bthen|\bplease|\bpls|\bfor sure)\W*$|\b(?:go|going|goin|gonna go) with\b|"
    r"\bI(?:'ll|\u2019ll| will)\s+(?:take|have|get|go for)\b|\blet'?s (?:do|go with|go for)\b",
    re.IGNORECASE,
)
# An assistant's question that offers its own help ("Want me to draft it?", "Shall I list
# them?", "Anything else?"): what answers it tells nothing of the user.
_OFFER = re.compile(
    r"\b(?:want|like|need)\s+(?:me\s+to|my\s+help|help|a\s+hand|more|another|any\s*(?:thing|more))\b|"
    r"\b(?:shall|should|can|could|may)\s+(?:I|we)\b|\banything else\b",
    re.IGNORECASE,
)
# "What a leap." exclaims, whatever its punctuation.
_EXCLAIMS = re.compile(r"^what\s+an?\b", re.IGNORECASE)
# How an assistant says what it feels about the news ("I'm so sorry", "I am glad"): courtesy.
_FEELING = re.compile(
    r"\bI(?:'m|\u2019m| am)\s+(?:\w+\s+)?(?:sorry|glad|happy|thrilled|delighted|pleased)\b", re.IGNORECASE
)
# A reaction names what it reacts to in a word or two ("Berlin, nice!", "Congrats on the new
# job!"); a turn that takes up more of the other's words says something about them.
_MAX_ECHOES = 2
# The longest reply that is still a reaction when it names a thing or two of its own.
_MAX_REACTION_WORDS = 10
_MAX_OTHER_WORDS = 2
# The longest reply in which the user only says what they do with what they were told, and the
# words that only say when or how far ("I'll report back", "will look into it this week").
_MAX_UPTAKE_WORDS = 8
_WHEN = frozenset("back up out off over again later soon today tonight tomorrow week weekend asap first".split())  # noqa: SIM905
# A quotation in a turn (a drafted message): its questions are not asked of the reader.
_QUOTED = re.compile(r"\"[^\"]*\"|\u201c[^\u201d]*\u201d")
# An assistant's remark this short, on a statement of the user's, is a reaction to it.
_MAX_REMARK_WORDS = 8
_WH = re.compile(r"\b(?:what|which|who|whom|whose|where|when|why|how)\b", re.IGNORECASE)
# A question typed without its question mark ("what's a good soup").
_WH_LEAD = re.compile(r"^(?:what|which|who|where|when|why|how)(?:'s|\b)", re.IGNORECASE)
# A request without a question mark ("recommend a book", "give me a word for happy"): what
# follows answers it.
_REQUEST = re.compile(
    r"\b(?:recommend|suggest|tell|give|find|name|list|show|explain|translate|remind|any)\b", re.IGNORECASE
)
# Words that open advice ("Try the blue one."): an assistant's recommendation, however short.
_ADVICE_LEAD = re.compile(
    r"^(?:try|consider|use|take|get|make|add|avoid|keep|check|look|go|start|stop|remember|don't|do|book|call|ask|"
    r"set|put|bring|pack|switch|skip|drink|eat|wear|maybe|perhaps|you should|you could|you might)\b",
    re.IGNORECASE,
)


# A wish ("Have a great trip!", "Enjoy the BBQ!", "Happy Thanksgiving!", "Good luck with it",
# "Congrats on the new job!", "Say hi to your mum!", "God bless"): courtesy, whatever it names.
# The second list: what a wish wishes ("Have a safe flight"); the third, what a good one is
# wished for ("Have a spooky fun time!").
_WISHED = (
    "good great nice lovely wonderful fantastic brilliant super terrific amazing awesome fabulous marvellous best "
    "splendid safe relaxing restful smooth happy productive fun blast blessed"
)
_WISHED_FOR = "time day night evening weekend week trip holiday vacation visit flight journey ride party one"
_WISH = re.compile(
    rf"^(?:enjoy|have\s+(?:(?:a|an|the)\s+)?(?:(?:really|very|so|super)\s+)?(?:{_WISHED.replace(' ', '|')})|"
    rf"have\s+(?:a|an)\s+(?:[\w-]+\s+){{1,2}}(?:{_WISHED_FOR.replace(' ', '|')})(?=\W*$)|"
    r"(?:happy|merry)\s+\w+|(?:good|best of)\s+luck|safe\s+(?:travels|trip|flight|journey)|congrat\w*|"
    r"(?:bon|buen|buon|guten|bonne|buena|viel)\s+\w+|de\s+(?:nada|rien)|"
    # Greetings passed on ("Say hi to your mum!", "Give Biscuit a scratch from me!").
    r"(?:say|send)\s+(?:hi|hello|hey)|(?:send|give)\s+(?:my|our)\s+love|"
    r"give\s+(?:[\w']+\s+){1,2}(?:a\s+|some\s+)?(?:hugs?|scratch(?:es)?|pats?|cuddles?|kiss(?:es)?|squeeze)\s+"
    r"(?:for|from)\s+(?:me|us)|take\s+it\s+easy|"
    # Blessings, in whatever faith ("God bless", "stay blessed", "Eid Mubarak", "inshallah it goes well").
    r"(?:god\s+)?bless(?:\s+you)?|(?:stay|be)\s+blessed|amen|(?:\w+\s+)?mubarak|"
    r"in\s?sha?'?\s?a?llah|ma\s?sha?'?\s?a?llah|alhamdulillah)\b",
    re.IGNORECASE,
)
# Cheering somebody on ("Go Brewers!", "Go team!").
_CHEER = re.compile(r"^[Gg]o\s+(?:team|[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?)\s*!")
# What a reply calls the one it answers ("you're a star", "you are amazing"): about the assistant,
# nothing of the user's.
_ABOUT_YOU = re.compile(r"\b(?:you(?:['\u2019]re|\s+are)|youre|ur)\b[^.!?,;]*", re.IGNORECASE)
# Words before a comma that only react or greet ("My pleasure, enjoy it!", "That sounds lovely,").
_LEAD_RUN = re.compile(r"^((?:[\w']+\s+){0,3}[\w']+),\s+")
# What only the assistant says as a courtesy: its hopes for the user ("I hope the bridge club
# loves them!") and its asking to hear back ("Let me know how it goes.").
_ASSISTANT_COURTESY = re.compile(
    r"^(?:(?:I|we)\s+(?:really\s+|do\s+)?hope\b|hope\s+(?:you|it|they|that|the|your)\b|let\s+me\s+know\b|"
    r"keep\s+me\s+posted\b|please\s+do\W*$)",
    re.IGNORECASE,
)


def is_acknowledgement(
    text: str,
    answered: str = "",
    addressee: str = "",
    analyzer: Analyzer | None = None,
    role: Role = Role.USER,
    answered_role: Role = Role.USER,
) -> bool:
    """Whether `text`, said in `role`, only acknowledges or reacts to `answered` (the turn it
    follows, said in `answered_role` by `addressee`, if named)."""
    if not {n.lower() for n in _NUMBER.findall(text)} <= {n.lower() for n in _NUMBER.findall(answered)}:
        return False
    said = sentences(text)
    if said and all(_courteous(s, role) for s in said) and (len(said) > 1 or len(text.split()) <= _MAX_REACTION_WORDS):
        return True
    wishes = [s for s in said if _wish(s)]
    if wishes and len(wishes) < len(said):
        # A wish beside a remark ("Happy early birthday to her!") says nothing either way: the
        # rest decides.
        rest = " ".join(s for s in said if s not in wishes)
        return is_acknowledgement(rest, answered, addressee, analyzer, role, answered_role)
    stems = (analyzer or Analyzer()).terms
    # Whoever the assistant asked answers it; the assistant's reply to a question is judged as
    # any of its remarks (an answer states something).
    unquoted = _QUOTED.sub("", answered)
    asked = "?" in unquoted and role is not Role.ASSISTANT and not _only_offers(unquoted)
    # What the reply may say again: the answered turn's words and numbers, its speaker's name.
    echoed = (
        set(stems(answered)) | {normalise(w) for w in addressee.split()} | {w for w in tokens(answered) if w.isdigit()}
    )
    # Whoever a reply calls by name at a sentence's end ("Congratulations, Mrs!") is addressed.
    vocatives = {normalise(w.rstrip(".")) for m in _VOCATIVE.finditer(text) for w in m.group(1).split()}
    # Told something, an assistant's one-word reply judges it ("Sensible.", "Bingo."), capitalised
    # or not; answering a question, it may name the answer.
    told = not ("?" in unquoted or _WH_LEAD.match(answered.strip()) or _REQUEST.search(unquoted))
    if role is Role.ASSISTANT and answered_role is Role.USER and told and len(tokens(text)) == 1:
        return True
    names = {normalise(w) for e in named_entities(text) if _may_name(e, text) for w in e.split()}
    names -= _PHATIC | _ASSENT | STOPWORDS | vocatives
    if {n for n in names if not set(stems(n)) <= echoed}:
        return False  # it names somebody or something new
    # The user replying to what the assistant said, not asked; picking from it, or answering.
    replying = role is Role.USER and answered_role is Role.ASSISTANT and not asked
    choosing = replying and bool(_CHOICE.search(text.strip()))
    echoes = 0
    picked = False
    other: list[str] = []
    led = False
    for sentence in said:
        # A question asked back is a reaction only in reaction words ("Really?", "Right?").
        # "What a leap!" exclaims.
        question = sentence.endswith("?") or (
            bool(_WH_LEAD.match(sentence)) and not sentence.endswith("!") and not _EXCLAIMS.match(sentence)
        )
        if question and role is Role.ASSISTANT:
            continue  # what the assistant asks states nothing of the user's; the answer will
        if question and _WH.search(sentence):
            return False
        judged = _ABOUT_YOU.sub("", sentence) if replying else sentence
        for word in map(_as_written, tokens(judged)):
            if word in _ASSENT:
                if asked:
                    return False  # "Nope!" to "Still vegetarian?" answers it
                continue
            if word in _LEADS:
                led = True
            if word in STOPWORDS or word in _PHATIC or word in vocatives:
                continue
            if question:
                return False
            held = {word} if word.isdigit() else set(stems(word))  # a number here is the answered turn's
            if held and held <= echoed:
                if replying:
                    picked = True  # in the assistant's words: the user picks from what it offered
                elif not asked and echoes < _MAX_ECHOES:
                    echoes += 1
                    continue
            other.append(word)
    if not other:
        return True
    if picked and not choosing and not asked and _reacts_to_what_it_echoes(text, other, answered, echoed, stems):
        return True  # "the glove thing is genius", "omg the photo idea": of what it was told, not a choice
    if asked or choosing or picked:
        return False  # a reply naming anything answers or chooses ("pinot noir it is", "malbec!")
    if replying and len(tokens(text)) == 1:
        return True  # "bet", "sold", "lifesaver": the user's one word on what they were told
    words = len(text.split())
    remark = role is Role.ASSISTANT and answered_role is Role.USER
    own = _FEELING.sub("", text) if remark else _EXPECTED.sub("", _INTENT.sub("", text)) if replying else text
    if _OWN.search(own):
        return False
    if replying:
        # "found it", "ok ordering": what the user does with it; anything else states something.
        doing = [w for w in other if w not in _WHEN]
        return (
            # Thanks may run long ("Thank you so much for the detailed explanation, it was very
            # helpful."): what decides is the little else it says.
            (words <= _MAX_UPTAKE_WORDS or (led and words <= 2 * _MAX_REACTION_WORDS))
            and len(doing) <= _MAX_OTHER_WORDS
            and (_only_doing(doing, text) or (len(answered.split()) > _MAX_REMARK_WORDS and _only_judging(doing, text)))
        )
    if role is Role.ASSISTANT and _advises(text):
        return False
    if led and len(other) <= _MAX_OTHER_WORDS and words <= _MAX_REACTION_WORDS:
        return True
    # The assistant remarking on what it was told, not asked for, states nothing of the user's.
    return (
        role is Role.ASSISTANT and words <= _MAX_REMARK_WORDS and (len(other) <= _MAX_OTHER_WORDS or (remark and told))
    )


_CLAUSE = re.compile(r"[^;:,.!?]+")
# A judgement of a thing: "<the thing> is <how it is>" ("cinnamon sticks is wild", "the glove
# thing is genius", "that app looks really handy").
_JUDGEMENT = re.compile(
    r"^(?P<thing>.+?)\s+(?:is|are|was|were|sounds?|looks?|seems?)\s+"
    r"(?:(?:so|really|pretty|actually|kinda|kind of|lowkey|honestly|super|too|very)\s+)*(?P<quality>[\w'-]+)",
    re.IGNORECASE,
)


# Saying that what one was told is understood ("vovó, got it").
_UNDERSTOOD = re.compile(r"\b(?:got it|noted|makes sense|understood|gotcha)\b", re.IGNORECASE)
# What names a suggestion as one ("the photo idea", "the freezer trick").
_SUGGESTION = re.compile(r"\b(?:idea|ideas|tip|tips|trick|tricks|hack|hacks|suggestion|advice)\b", re.IGNORECASE)


def _reacts_to_what_it_echoes(
    text: str, words: list[str], answered: str, echoed: set[str], stems: Callable[[str], list[str]]
) -> bool:
    """Whether a reply whose `words` (other than reactions) take up the assistant's (`answered`,
    its stems `echoed`) only reacts to the thing they name, rather than choosing it ("pinot noir
    it is") or saying something of the user's own ("my kids are wild"): it judges the thing
    ("cinnamon sticks is wild but ok"), or, in the assistant's words alone, calls it a suggestion
    ("omg the photo idea"), says it is understood ("vovó, got it. thanks") or says a clause of
    the assistant's back ("lol he def thinks he wins")."""
    if _OWN.search(text):
        return False
    if all(w.isdigit() or (set(stems(w)) and set(stems(w)) <= echoed) for w in words) and (
        _UNDERSTOOD.search(text) or _SUGGESTION.search(text) or _repeats_a_clause(text, answered)
    ):
        return True
    for clause in _CLAUSE.findall(text):
        judged = _JUDGEMENT.match(clause.strip())
        if judged is None:
            continue
        thing = tokens(judged.group("thing"))
        quality = judged.group("quality").lower()
        readings = getAllLemmas(quality)
        if quality not in _EVALUATIONS and not ({"ADJ"} & set(readings) and "NOUN" not in readings):
            continue
        if not any(set(stems(w)) and set(stems(w)) <= echoed for w in thing):
            continue
        if all(w in thing or w == quality for w in words):
            return True
    return False


# A clause said back holds a subject or a negation: an option picked is a thing ("the blue one").
_CLAUSE_WORDS = frozenset("he she they it you we not no never".split())  # noqa: SIM905
# How many of the assistant's words in a row a reply says back to repeat a clause of it.
_MIN_REPEATED_WORDS = 3


def _repeats_a_clause(text: str, answered: str) -> bool:
    """Whether `text` says back a clause of `answered`: a run of its words in the same order that
    holds a subject or a negation ("thinks he wins", "not cooking at 4am")."""
    said = [w.lower() for w in re.findall(r"[\w']+", text)]
    heard = " ".join(w.lower() for w in re.findall(r"[\w']+", answered))
    for start in range(len(said) - _MIN_REPEATED_WORDS + 1):
        end = start + _MIN_REPEATED_WORDS
        while end <= len(said) and f" {' '.join(said[start:end])} " in f" {heard} ":
            end += 1
        run = said[start : end - 1]
        if len(run) >= _MIN_REPEATED_WORDS and _CLAUSE_WORDS & set(run):
            return True
    return False


def _as_written(word: str) -> str:
    """`word` as a dictionary writes it: stretched letters squeezed ("yesss", "lmaooo"), a
    contraction typed without its apostrophe restored ("thats", "im")."""
    if re.search(r"(.)\1\1", word):
        word = re.sub(r"(.)\1{2,}", r"\1", word)
    if word in STOPWORDS or "'" in word or getAllLemmas(word):
        return word
    return next((c for i in range(1, len(word)) if (c := f"{word[:i]}'{word[i:]}") in STOPWORDS), word)


def _courteous(sentence: str, role: Role) -> bool:
    """Whether `sentence` is a wish, or, said by the assistant, only courtesy: its hopes for the
    user, its asking to hear back, or words of reaction and assent ("Of course.")."""
    if _wish(sentence):
        return True
    if role is not Role.ASSISTANT:
        return False
    bare = _after_reaction(sentence)
    return bool(_ASSISTANT_COURTESY.match(bare)) or all(
        w in STOPWORDS or w in _PHATIC or w in _ASSENT for w in tokens(bare)
    )


def _after_reaction(sentence: str) -> str:
    """`sentence` past its opening quotes and words of reaction ("Wonderful, I hope you have a
    great visit!", "My pleasure, enjoy the planting!")."""
    bare = sentence.lstrip(" \"'(¡¿")
    lead = _LEAD_RUN.match(bare)
    if lead and all(w in STOPWORDS or w in _PHATIC for w in tokens(lead.group(1))):
        return bare[lead.end() :]
    return bare


def _wish(sentence: str) -> bool:
    """Whether `sentence` wishes or cheers, after any words of reaction."""
    bare = sentence.lstrip(" \"'(¡¿")
    return any(_WISH.match(s) or _CHEER.match(s) for s in (bare, _after_reaction(bare)))


def _only_offers(text: str) -> bool:
    """Whether every question of `text` offers the asker's help ("Want me to draft it?")."""
    asked = [s for s in sentences(text) if s.endswith("?")]
    return bool(asked) and all(_OFFER.search(s) for s in asked)


# A feeling, a habit ("never again") or somebody's quality is news, not a judgement of advice.
_NEWS_OF_SOMEBODY = re.compile(r"\b(?:feel\w*|felt|never|always|he|she|they|he's|she's|they're|hes|shes|theyre)\b")


def _a_thing(word: str, text: str) -> bool:
    """Whether `word` follows an article in `text` (lower case): a thing ("a chair", "a sick day")."""
    return re.search(rf"\b(?:a|an|the)\s+{re.escape(word)}\b", text) is not None


def _only_judging(words: list[str], text: str) -> bool:
    """Whether `words`, of `text`, only judge what the user was told ("not bad", "sick ty",
    "pricey but ok"): qualities, none of them a thing ("a sick day")."""
    low = text.lower()
    if _NEWS_OF_SOMEBODY.search(low):
        return False
    return all({"ADJ", "ADV"} & set(getAllLemmas(w)) and not _a_thing(w, low) for w in words)


def _only_doing(words: list[str], text: str) -> bool:
    """Whether `words`, of `text`, are verb forms of doing ("found", "ordering", "check"): not
    only a thing ("a chair"), a quality ("fake", "better") or a feeling ("feeling better" is the
    speaker's news)."""
    low = text.lower()
    for word in words:
        readings = getAllLemmas(word)
        if "VERB" not in readings or "ADJ" in readings or "feel" in readings["VERB"]:
            return False
        if _a_thing(word, low):
            return False
    return True


def _advises(text: str) -> bool:
    """Whether `text` gives advice: it opens with an advising phrase, or a clause of it opens with a
    verb in its base form and a function word and names something ("Cheap fix; replace them before
    the test.", "Serve with rice."), unlike a courtesy ("Have a great day!", "Take care")."""
    if _ADVICE_LEAD.search(text.strip()) and not _courtesy(text):
        return True
    for clause in _CLAUSE.findall(text):
        words = [w.lower().strip("\"'(¡¿") for w in clause.split()]
        if len(words) < 2 or words[0] in _PHATIC or words[1] not in STOPWORDS or _courtesy(clause):
            continue
        readings = getAllLemmas(words[0])
        if words[0] in readings.get("VERB", ()) and "ADJ" not in readings:
            return True
    return False


def _courtesy(text: str) -> bool:
    """Whether every word of `text` after its first is a function word or a courtesy."""
    return all(w in STOPWORDS or w in _PHATIC for w in tokens(text)[1:])


def _may_name(entity: str, text: str) -> bool:
    """Whether `entity`, found capitalised in `text`, can name somebody or something: a single word
    that opens a sentence is no name when the lexicon knows it as a word ("Works well!", "Easy
    win.", "Beagles are famous for it!", "Soccer mom hacks!"); names ("Luna", "Costco") are not in it."""
    opening = re.sub(r"^\W+", "", text)  # past quotes, brackets and emoji
    if " " in entity or not any(opening.startswith(entity) or f"{p} {entity}" in text for p in ".!?"):
        return True
    word = re.split(r"['\u2019]", entity.lower())[0]  # "That'll" is "that"
    return word not in STOPWORDS and not getAllLemmas(word)
