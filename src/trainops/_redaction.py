"""Keeping credentials out of what trainops shows: the masking rule (docs/api.md, docs/security.md).

Shared by the server (describe, log pages, failure reasons) and the host agent (its own log
lines and the failure reason it reports), so a secret is masked before it leaves the host.

A value is masked when its **name** looks like a credential, and a credential is cut out of any
text when its **value** looks like one:

- Names are split into words at ``_``, ``-``, ``.``, ``:`` and lower-to-upper case changes
  (``DB_PASS`` -> DB, PASS; ``apiKey`` -> API, KEY). A name is secret when one of its words is a
  credential word (PASS, PASSWORD, PASSWD, PASSPHRASE, SECRET, TOKEN, KEY, APIKEY, AUTH,
  AUTHORIZATION, CREDENTIAL, CREDS, PRIVATE, SESSION, COOKIE, SIGNATURE, SALT, PAT, DSN; plural
  forms too) or ends with a long one (``DBPASSWORD``, ``MYSECRET``, ``GITTOKEN``). ``MONKEY``
  is one word that is not a credential word, so it stays visible.
- Values: the password of a URL's userinfo (``postgres://user:***@host/db``); tokens with a
  well-known prefix (``github_pat_``, ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``, ``glpat-``,
  ``AKIA``/``ASIA`` key ids, Slack ``xox?-``, ``sk-``, ``hf_``, PEM private keys).
- A job's own secrets (:meth:`Masker.for_job`): the value of every secret-named variable of its
  environment and of every secret-named hyperparameter, wherever it appears (values of at least
  6 characters: a shorter one would mask common words), any other value equal to one of them,
  and whatever follows a secret-named hyperparameter's flag (``--db_password VALUE``,
  ``--db_password=VALUE``), whatever its length.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASK", "Masker", "hyperparameter_text", "is_secret_name", "mask_text", "redact"]

MASK = "***"

_WORDS = frozenset(
    {
        "PASS", "PASSWORD", "PASSWD", "PASSPHRASE", "SECRET", "TOKEN", "KEY", "APIKEY", "AUTH",
        "AUTHORIZATION", "CREDENTIAL", "CREDS", "PRIVATE", "SESSION", "COOKIE", "SIGNATURE",
        "SALT", "PAT", "DSN",
    }
)  # fmt: skip
_LONG_ENDINGS = ("PASSWORD", "PASSWD", "PASSPHRASE", "SECRET", "TOKEN", "APIKEY", "CREDENTIAL")
_SPLIT = re.compile(r"[_\-.:\s]+|(?<=[a-z0-9])(?=[A-Z])")

_USERINFO = re.compile(r"(?P<keep>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@]*:)[^\s/@]+(?=@)")
_TOKENS = re.compile(
    r"\b(?:"
    r"github_pat_[A-Za-z0-9_]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
    r"|sk-[A-Za-z0-9_\-]{16,}"
    r"|hf_[A-Za-z0-9]{20,}"
    r")"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
)
# Text every match of _TOKENS contains: where none of these occur, there is nothing to search.
_TOKEN_HINTS = (
    "github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "glpat-", "AKIA", "ASIA", "xox",
    "sk-", "hf_", "-----BEGIN ",
)  # fmt: skip
# A secret value shorter than this is not searched for in log text (it would mask everything).
_MIN_SEARCHED_VALUE = 6


def is_secret_name(name: str) -> bool:
    """True if ``name`` (an environment variable, a hyperparameter) names a credential."""
    words = [w.upper() for w in _SPLIT.split(name) if w]
    return any(_is_secret_word(w) for w in words)


def _is_secret_word(word: str) -> bool:
    singular = word[:-1] if word.endswith("S") else word
    return word in _WORDS or singular in _WORDS or word.endswith(_LONG_ENDINGS)


def mask_text(text: str) -> str:
    """``text`` with URL passwords and well-known tokens replaced by ``***``."""
    if "://" in text:
        text = _USERINFO.sub(lambda m: m.group("keep") + MASK, text)
    return _TOKENS.sub(MASK, text)


def redact(values: Mapping[str, str]) -> dict[str, str]:
    """``values`` (an environment) with secret-named values masked and credentials cut out."""
    return {k: MASK if is_secret_name(k) else mask_text(v) for k, v in values.items()}


def hyperparameter_text(value: Any) -> str:
    """A hyperparameter as the script gets it: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _may_hold_token(text: str) -> bool:
    """False only where :data:`_TOKENS` cannot match: each hint but two has a ``_`` or ``-``."""
    if "_" not in text and "-" not in text:
        return "AKIA" in text or "ASIA" in text
    return any(hint in text for hint in _TOKEN_HINTS)


class Masker:
    """Masks text: the rule's value patterns plus a job's own secret values and flags."""

    def __init__(self, secrets: Iterable[str] = (), flags: Iterable[str] = ()) -> None:
        self._secrets = frozenset(s for s in secrets if s)
        values = sorted(
            {s for s in self._secrets if len(s) >= _MIN_SEARCHED_VALUE}, key=len, reverse=True
        )
        self._values = re.compile("|".join(map(re.escape, values))) if values else None
        self._value_list = values
        self._flag_list = sorted({f"--{name}" for name in flags}, key=len, reverse=True)
        self._flags = (
            re.compile(
                "(?P<flag>(?:" + "|".join(map(re.escape, self._flag_list)) + r")(?:=|\s+))"
                r"(?P<value>\S+)"
            )
            if self._flag_list
            else None
        )

    @classmethod
    def for_job(cls, environment: Mapping[str, str], hyperparameters: Mapping[str, Any]) -> Masker:
        """The masker of a job: its secret-named environment and hyperparameter values."""
        secret_hps = [k for k in hyperparameters if is_secret_name(k)]
        values = [v for k, v in environment.items() if is_secret_name(k)]
        values += [hyperparameter_text(hyperparameters[k]) for k in secret_hps]
        return cls(values, secret_hps)

    def __call__(self, text: str) -> str:
        if self._flags is not None and any(flag in text for flag in self._flag_list):
            text = self._flags.sub(lambda m: m.group("flag") + MASK, text)
        if self._values is not None:
            text = self._values.sub(MASK, text)
        return mask_text(text)

    def mapping(self, values: Mapping[str, str]) -> dict[str, str]:
        """``values`` (an environment, hyperparameters) with secret-named values, values equal
        to one of the job's secrets and credentials in any value masked."""
        return {
            k: MASK if is_secret_name(k) or v in self._secrets else self(v)
            for k, v in values.items()
        }

    def lines(self, texts: list[str]) -> list[str]:
        """Each of ``texts`` masked. A page of log lines usually holds nothing to mask: the
        patterns are first searched once in all of it (anything they find in one line they
        find there too), and only a page where they find something is masked line by line."""
        joined = "\n".join(texts)
        if (
            not any(value in joined for value in self._value_list)
            and not any(flag in joined for flag in self._flag_list)
            and ("://" not in joined or _USERINFO.search(joined) is None)
            and not (_may_hold_token(joined) and _TOKENS.search(joined))
        ):
            return texts
        return [self(text) for text in texts]
