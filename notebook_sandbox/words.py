"""What a student reads from the checks, in their notebook's language (gettext domain ``feedback``).

Messages are English in the code (``_("...")``, ``N_`` where defined before shown) and in the catalogues;
`_` looks each up in ``locales/<language>/LC_MESSAGES/feedback.po`` (English where missing), placeholders filled
after. The language is that of `speaking`, else ``$AUTOGRADE_LANGUAGE`` (a translated notebook's setup cell sets
it, and the sandbox passes it to each runner), else English. The grader's side of it (a notebook's language, the
catalogue's template) is `autograde.messages`.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["DOMAIN", "ENGLISH", "ENVIRONMENT", "LOCALES", "N_", "_", "language", "speaking", "languages",
           "known_language", "translations"]

DOMAIN = "feedback"
"""The gettext domain of the checks' messages: ``locales/<language>/LC_MESSAGES/feedback.po``."""
ENGLISH = "en"
ENVIRONMENT = "AUTOGRADE_LANGUAGE"
"""The environment variable a translated notebook's setup cell sets: the language of the checks in a kernel."""
LOCALES = Path(__file__).resolve().parent.parent / "locales"

_SPEAKING: contextvars.ContextVar[str | None] = contextvars.ContextVar("autograde_language", default=None)


def N_(message: str) -> str:
    """Mark ``message`` for the catalogue where it is defined; `_` translates it where it is shown."""
    return message


@functools.cache
def languages() -> list[str]:
    """The languages the checks speak besides English: those with a ``feedback`` catalogue."""
    return sorted(p.parent.parent.name for p in LOCALES.glob(f"*/LC_MESSAGES/{DOMAIN}.po"))


def known_language(name: object) -> str:
    """``name`` as a language the checks speak (``zh-CN`` → ``zh_CN``), else English."""
    if not isinstance(name, str) or not name.strip():
        return ENGLISH
    name = name.strip().replace("-", "_")
    return name if name in languages() else ENGLISH


def language() -> str:
    """The language in use: that of `speaking`, else ``$AUTOGRADE_LANGUAGE``, else English."""
    chosen = _SPEAKING.get()
    return chosen if chosen is not None else known_language(os.environ.get(ENVIRONMENT))


@contextlib.contextmanager
def speaking(name: str | None) -> Iterator[str]:
    """What is said inside is in ``name`` (a language without a catalogue: English), whatever the environment."""
    token = _SPEAKING.set(known_language(name))
    try:
        yield _SPEAKING.get()
    finally:
        _SPEAKING.reset(token)


@functools.cache
def translations(name: str, domain: str = DOMAIN) -> dict[str, str]:
    """The non-fuzzy translations of ``locales/<name>/LC_MESSAGES/<domain>.po``; empty for English or none."""
    path = LOCALES / name / "LC_MESSAGES" / f"{domain}.po"
    if name == ENGLISH or not path.is_file():
        return {}
    from babel.messages.pofile import read_po  # only where a language other than English is spoken

    with path.open("rb") as file:
        return {m.id: m.string for m in read_po(file) if m.id and m.string and not m.fuzzy}


def _(message: str) -> str:
    """``message`` in the language in use; the English where the catalogue lacks it."""
    name = language()
    if name == ENGLISH or not message:
        return message
    return translations(name).get(message, message)
