"""Content capture and redaction: bounded, cycle-safe, and never leaking a credential.

Used for every string we export that could carry user data: captured
content (opt-in), error messages and exception text (always). Credentials are
redacted by key name (api_key, authorization, token, secret, password, ...)
and by value pattern (bearer tokens, JWTs, `sk-...`, AWS access and secret
keys, GitHub, GitLab, Hugging Face, Slack and Google tokens, PEM and PGP
private key blocks, `user:password@` and token users in URLs, `name=value`
and `name: value` for credential names, webhook URLs, cookies, any Authorization
scheme; docs/privacy.md lists them) in every capture mode, then by Hermes's own
redactor (`agent/redact.py`) where Hermes is installed: never weaker than Hermes.
"""

from __future__ import annotations

import json
import math
import re
import threading
from typing import Any

from .. import hermes_compat

REDACTED = "<redacted>"

MODES = ("NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT")


class _Later:
    """A regular expression compiled on its first use: compiling the ~30 below at import cost every start-up some
    4 ms, and most never run in a process (a value pattern runs only when one of its needles is in the text)."""

    __slots__ = ("_args", "_pattern")

    def __init__(self, *args: Any) -> None:
        self._args: tuple[Any, ...] = args
        self._pattern: re.Pattern[str] | None = None

    def _compiled(self) -> re.Pattern[str]:
        if self._pattern is None:
            self._pattern = re.compile(*self._args)
        return self._pattern

    def search(self, string: str) -> re.Match[str] | None:
        return self._compiled().search(string)

    def sub(self, repl: Any, string: str) -> str:
        return self._compiled().sub(repl, string)


_SECRET_KEY = _Later(
    r"(api[_-]?key|apikey|authorization|auth[_-]?token|access[_-]?token|refresh[_-]?token|id[_-]?token|"
    r"bearer|token|secret|passw(or)?d|passwd|pwd|cookie|set-cookie|credential|private[_-]?key|"
    r"access[_-]?key|session[_-]?key|client[_-]?secret|signature|passphrase|account[_-]?key|^auth$|^sig$|"
    r"(?:^|[_-])pass$|^psk$|client[_-]key[_-]data|(?-i:^[A-Z][A-Z0-9_]*_KEY$))",
    re.IGNORECASE,
)
# Keys that contain a secret-looking word but are not secrets (token counts, ...).
_NOT_SECRET_KEY = _Later(r"(tokens?_?(count|used|usage)|_tokens$|^tokens$|max_tokens|token_type)", re.IGNORECASE)

# The start of a token: no letter or digit before it, or an escaped newline or tab: tool results are often JSON
# text whose newlines are escaped, so a token right after `\n` starts fresh.
_B = r"(?:(?<=\\[nrt])|(?<![A-Za-z0-9_]))"
# Words that name a credential in free text (`password: x`, `access_token=...`, `"client_secret": "..."`).
# Only the word itself is matched (`access_token=` matches at `token=`): what precedes it stays as it is.
# `pass` alone only after a non-letter (`DB_PASS=`, not `bypass=`).
_SECRET_WORD = (r"(?:api[_-]?key|apikey|token|secret|passw(?:or)?d|credentials?|private[_-]?key|access[_-]?key|"
                r"account[_-]?key|signature|passphrase|(?<![a-z])pass)")

_CREDENTIAL_WORDS = ("apikey", "api_key", "api-key", "token", "secret", "pass", "credential", "private_key",
                     "private-key", "privatekey", "access_key", "access-key", "accesskey", "accountkey",
                     "account_key", "signature")
# Authorization schemes besides Bearer and Basic (a bare value of 16 characters or more counts too).
_AUTH_SCHEMES = (r"token|api-?key|key|digest|negotiate|ntlm|oauth|hoba|mutual|scram-sha-1|scram-sha-256|vapid|"
                 r"aws4-hmac-sha256|dpop|ssws|splunk|gitlab|sso-key")
# The end of a value in text: blanks, quotes, separators, or an escaped quote or newline of JSON text.
_VALUE = r"[^\s\"'&,;\\]+"
_FRESH = r"(?!<redacted>)"  # not a value some earlier pattern redacted already
_W = r"(?:(?<=\\[nrt])|\b)"  # a word's start, also right after an escaped newline of JSON text

# (needles, pattern, replacement): a pattern runs only when one of its needles is in the text (in lower case for
# the case-insensitive ones), so ordinary text costs a few substring checks, not a dozen regex scans.
_VALUE_PATTERNS: tuple[tuple[tuple[str, ...], bool, _Later, Any], ...] = (
    # PEM and PGP private key blocks (to the end of the text when the END line is missing).
    (("PRIVATE KEY",), False,
     _Later(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
                r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)",
                re.S), REDACTED),
    (("bearer", "basic"), True, _Later(r"(?i)" + _B + r"(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
     r"\1 " + REDACTED),
    (("eyJ",), False, _Later(_B + r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED),  # JWT
    (("sk-",), False, _Later(_B + r"sk-[A-Za-z0-9_-]{16,}"), REDACTED),  # OpenAI / Anthropic style
    (("AKIA", "ASIA", "ABIA", "ACCA"), False, _Later(_B + r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
     REDACTED),  # AWS access key id
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), False, _Later(_B + r"gh[pousr]_[A-Za-z0-9]{30,}"), REDACTED),
    (("github_pat_",), False, _Later(_B + r"github_pat_[A-Za-z0-9_]{22,}"), REDACTED),  # GitHub fine-grained
    (("glpat-",), False, _Later(_B + r"glpat-[A-Za-z0-9_-]{20,}"), REDACTED),  # GitLab personal access token
    (("hf_",), False, _Later(_B + r"hf_[A-Za-z0-9]{30,}"), REDACTED),  # Hugging Face
    (("xox",), False, _Later(_B + r"xox[abprse]-[A-Za-z0-9-]{10,}"), REDACTED),  # Slack
    (("AIza",), False, _Later(_B + r"AIza[0-9A-Za-z_-]{35}"), REDACTED),  # Google API key
    (("k_live_", "k_test_"), False, _Later(_B + r"[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"), REDACTED),  # Stripe
    (("whsec_",), False, _Later(_B + r"whsec_[A-Za-z0-9+/=]{16,}"), REDACTED),  # Stripe webhook signing secret
    (("SG.",), False, _Later(_B + r"SG\.[A-Za-z0-9_-]{16,}(?:\.[A-Za-z0-9_-]{16,})?"), REDACTED),  # SendGrid
    (("npm_",), False, _Later(_B + r"npm_[A-Za-z0-9]{30,}"), REDACTED),  # npm access token
    (("pypi-",), False, _Later(_B + r"pypi-[A-Za-z0-9_-]{16,}"), REDACTED),  # PyPI API token
    # Telegram bot token: `<bot id>:A<34 characters>`, often in a `/bot<token>/` URL (`:A` is a cheap gate).
    ((":A",), False, _Later(r"(?<![0-9])\d{8,10}:A[A-Za-z0-9_-]{33,}"), REDACTED),
    # Webhook URLs: the path after the fixed prefix is the credential.
    (("hooks.slack.com",), True, _Later(r"(?i)(hooks\.slack\.com/(?:services|workflows|triggers)/)[\w/-]+"),
     r"\1" + REDACTED),
    (("/api/webhooks/",), True, _Later(r"(?i)(discord(?:app)?\.com/api/webhooks/\d+/)[\w-]+"), r"\1" + REDACTED),
    # A shared access signature's `sig=` query parameter (Azure SAS).
    (("sig=",), True, _Later(r"(?i)([?&;]sig=)" + _VALUE), r"\1" + REDACTED),
    # Authorization with any scheme (`Token`, `ApiKey`, `Digest` ...); a Digest's parameters to the end of the line.
    (("authorization",), True,
     _Later(r"(?i)(authorization(?:\\*[\"'])?\s*[:=]\s*(?:\\*[\"'])?)(digest\s+)(?:[^\r\n\\]|\\(?![nrt]))+"),
     r"\1\2" + REDACTED),
    (("authorization",), True,
     _Later(r"(?i)(authorization(?:\\*[\"'])?\s*[:=]\s*(?:\\*[\"'])?)(?:((?:" + _AUTH_SCHEMES + r")\s+)"
                r"(?!<redacted>)" + _VALUE + r"|[A-Za-z0-9._~+/=-]{16,})"),
     r"\1\2" + REDACTED),
    # A cookie header's whole value (every cookie of a session is a credential).
    (("cookie",), True, _Later(r"(?i)" + _B + r"((?:set-)?cookie\s*:\s*)(?:[^\r\n\"'\\]|\\(?![nrt\"']))+"),
     r"\1" + REDACTED),
    # Docker's config.json: `"auth": "<base64 user:password>"`.
    (("auth",), True, _Later(r"(?i)((?:\\*[\"'])auth(?:\\*[\"'])\s*:\s*(?:\\*[\"']))(?!<redacted>)([^\"'\\]+)"),
     r"\1" + REDACTED),
    # A command line's `--password X` / `--token=X`.
    (("--",), False,
     _Later(r"(?i)(?<![\w-])(--?(?:password|passwd|pass|passphrase|token|secret|api-key|apikey)(?:\s+|=))"
                r"(?!<redacted>)(?!-)" + _VALUE), r"\1" + REDACTED),
    # user:password@ in a URL (the user may be empty, the password may hold a `/`); a long user alone
    # (`https://<token>@host`) is a token too.
    (("@",), False, _Later(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/\s:@]*):([^@\s/?#]+(?:/[^@\s/?#]+)*)@"
                               r"(?=[\w.\[\]-]+(?:[:/?#\s\"'\\]|$))"), r"\1\2:" + REDACTED + "@"),
    (("@",), False, _Later(r"(?i)\b([a-z][a-z0-9+.-]*://)[A-Za-z0-9._~-]{16,}@"), r"\1" + REDACTED + "@"),
    # Shapes of files and command lines that hold a credential (issue 40, item 7). `_LINE` starts a value's line
    # in plain text or in JSON text (an escaped newline).
    # `.env` lines: `MAPBOX_KEY=...`, `OPENAI_KEY=...` (an upper-case variable whose name ends in _KEY).
    (("_KEY",), False, _Later(_B + r"([A-Z][A-Z0-9_]*_KEY\s*=\s*(?:\\*[\"'])?)" + _FRESH + _VALUE), r"\1" + REDACTED),
    # .netrc: `machine host login user password SECRET`, and `password SECRET` on a line of its own.
    (("machine",), True, _Later(r"(?i)(" + _W + r"machine\s+\S+\s+(?:login\s+\S+\s+)?password\s+)" + _FRESH + _VALUE),
     r"\1" + REDACTED),
    (("password",), True, _Later(r"(?i)((?:^|\n|\\n)[ \t]*password[ \t]+)" + _FRESH + _VALUE), r"\1" + REDACTED),
    # .pgpass: `host:port:database:user:password` (the usual Postgres ports, or `*`).
    ((":5432:", ":5433:", ":6432:", ":*:"), False,
     _Later(r"(?:(?<=\\[nrt])|(?<![\w.:-]))([\w.*-]+:(?:5432|5433|6432|\*):[\w.*-]+:[\w.*-]+:)" + _FRESH + _VALUE),
     r"\1" + REDACTED),
    # htpasswd: `user:$apr1$...`, bcrypt `$2y$...`, crypt `$6$...`, `{SHA}...`.
    (("$apr1$", "$2y$", "$2a$", "$2b$", "{SHA}", "$6$", "$5$", "$1$"), False,
     _Later(r"(?:(?<=\\[nrt])|(?<![\w.-]))([\w.-]+:)(?:\$(?:apr1|2[aby]|[156])\$|\{SHA\})" + _VALUE), r"\1" + REDACTED),
    # kubeconfig: `client-key-data: <base64 of a private key>`.
    (("client-key",), True, _Later(r"(?i)(client-key(?:-data)?\s*:\s*(?:\\*[\"'])?)" + _FRESH + _VALUE),
     r"\1" + REDACTED),
    # wpa_supplicant: `psk="..."` (or 64 hex digits).
    (("psk",), True, _Later(r"(?i)(\bpsk\s*=\s*(?:\\*[\"'])?)" + _FRESH + _VALUE), r"\1" + REDACTED),
    # Command lines: `curl -u user:pass`, `mysql -pPASS`, `sshpass -p PASS`, `docker login -p PASS`. The flag is
    # looked for within 256 characters of the command's name: an unbounded scan made a line of many `mysql` words
    # quadratic (0.8 s for 16 KiB), and a real command line puts its flags nearer than that.
    (("-u", "--user"), False,
     _Later(r"(?<![\w-])((?:-u|--user)(?:\s+|=)(?:\\*[\"'])?[^\s:\"'\\]+:)" + _FRESH + _VALUE), r"\1" + REDACTED),
    (("mysql",), True,
     _Later(r"(" + _W + r"(?i:mysql(?:dump|admin|import|show|check)?)\b[^\n\\]{0,256}?\s-p)" + _FRESH + _VALUE),
     r"\1" + REDACTED),
    (("sshpass",), True, _Later(r"(" + _W + r"(?i:sshpass)\b[^\n\\]{0,256}?\s-p\s*)" + _FRESH + _VALUE),
     r"\1" + REDACTED),
    (("docker",), True, _Later(r"(" + _W + r"(?i:docker\s+login)\b[^\n\\]{0,256}?\s-p\s+)" + _FRESH + _VALUE),
     r"\1" + REDACTED),
    # A password in a URL's query: `?pwd=...`.
    (("pwd=",), True, _Later(r"(?i)([?&;]pwd=)" + _FRESH + _VALUE), r"\1" + REDACTED),
    # name=value, name: value, "name": "value" where the name is a credential's (access_token, client_secret, ...);
    # quotes may be escaped (JSON text inside JSON). The lookahead is a cheap first-letter filter.
    (_CREDENTIAL_WORDS, True,
     _Later(r"(?i)(?=[aptsc])(" + _SECRET_WORD + r")"
                r"((?:\\*[\"'])?\s*[=:]\s*(?:\\*[\"'])?)(?!<redacted>)([^\s\"'&,;\\]+)"),
     r"\1\2" + REDACTED),
)
# An AWS secret access key standing alone: 40 base64 characters mixing upper case, lower case and digits.
_LONG_RUN = _Later(r"[A-Za-z0-9/+]{40}")
_AWS_SECRET = _Later(_B.replace("A-Za-z0-9_", "A-Za-z0-9/+=") + r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")


def _aws_secret(match: re.Match[str]) -> str:
    text = match.group(0)
    mixed = any(c.islower() for c in text) and any(c.isupper() for c in text) and any(c.isdigit() for c in text)
    return REDACTED if mixed else text


# -- the secrets the configuration resolved ----------------------------------------------------------------------
# Header values, URL user info, a preset's credentials: one store for every pass (captured content, free-text
# attributes, log lines), so a collector's key a tool happens to print is redacted like any other credential.

_MIN_SECRET = 4  # shorter values would mask ordinary words
_MAX_SECRETS = 512  # bounded: the oldest are forgotten first (a reload re-reads the configuration)
_secrets: dict[str, None] = {}  # insertion-ordered
_lock = threading.Lock()
_longest_first: list[str] | None = None  # rebuilt when needed after a change


def remember(value: str) -> None:
    """A secret value from the configuration: never shown from now on (its lines and escaped forms too)."""
    if not isinstance(value, str):
        return
    forms = {value, value.strip(), repr(value)[1:-1], repr(value.encode("utf-8", "replace"))[2:-1]}
    forms.update(line.strip() for line in value.splitlines())
    forms = {form for form in forms if len(form) >= _MIN_SECRET}
    global _longest_first
    with _lock:
        for form in forms:
            _secrets.pop(form, None)
            _secrets[form] = None
        while len(_secrets) > _MAX_SECRETS:
            del _secrets[next(iter(_secrets))]
        _longest_first = None
        _forget_redacted()  # a text redacted before may hold the new secret


def replace_known(text: str, marker: str) -> str:
    """Every remembered secret in `text` replaced by `marker` (a secret's longest form first)."""
    global _longest_first
    known = _longest_first
    if known is None:
        with _lock:
            known = _longest_first = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, marker)
    return text


def is_secret_key(key: Any) -> bool:
    if not isinstance(key, str):
        return False
    return bool(_SECRET_KEY.search(key)) and not _NOT_SECRET_KEY.search(key)


_hermes_redactor: Any = None  # Hermes's own `agent.redact.redact_sensitive_text`; False where there is none
# Our marker as Hermes's redactor sees it: long enough that Hermes masks it as `<redac...000>` (head and tail kept)
# when it sits where Hermes masks a value (`Authorization: Token <redacted>`), so it comes back as ours.
_MARK = "<redacted-000000000>"
_MARK_MASKED = "<redac...000>"


def _hermes_redact(text: str) -> str:
    """Hermes's redactor (kept current by Hermes for its own logs, applied as Hermes applies it there) after ours,
    so we are never weaker than Hermes. Imported on first use (the `agent` package is light); anything it does
    wrong leaves our result as it is."""
    global _hermes_redactor
    if _hermes_redactor is None:
        _hermes_redactor = hermes_compat.hermes_redactor() or False
    if not _hermes_redactor:
        return text
    try:
        redacted = _hermes_redactor(text.replace(REDACTED, _MARK), force=True)
    except Exception:  # noqa: BLE001 - fail-open: ours already ran
        return text
    if not isinstance(redacted, str):
        return text
    return redacted.replace(_MARK, REDACTED).replace(_MARK_MASKED, REDACTED)


# What was redacted once is not redacted again: each chat span carries the history before it, so without this every
# tool result and message would be redacted again for every later model call of the session (benchmarks/history.py
# measures it). Keyed by the text itself (the history's strings are the same objects call after call, whose hash
# Python keeps), bounded by the characters held, forgotten whenever a new secret is learned.
_MEMO_MIN = 1  # a text of a few characters costs tens of µs to redact (every pattern's trigger words are looked for)
_MEMO_CHARS = 8 * 1024 * 1024  # of texts held, at most (the oldest are forgotten first)
_MEMO_ENTRIES = 65536  # and of texts, however short
_memo: dict[tuple[str, int | None, bool], str] = {}
_memo_chars = 0


def redact_text(text: str, cap: int | None = None, *, hermes: bool = True, memo: bool = True) -> str:
    """Value-pattern redaction (ours, then Hermes's unless `hermes` is false: Hermes's own log formatter applies it
    to log lines already), then a size cap that says how much was cut. A text redacted before is not redacted again
    (`memo` false: a text seen once, such as a log line, is not remembered)."""
    if not memo or len(text) < _MEMO_MIN:
        return _redact(text, cap, hermes)
    key = (text, cap, hermes)
    done = _memo.get(key)
    if done is None:
        done = _redact(text, cap, hermes)
        _keep(key, done)
    return done


def _keep(key: tuple[str, int | None, bool], done: str) -> None:
    global _memo_chars
    with _lock:
        if key in _memo:
            return
        _memo[key] = done
        _memo_chars += len(key[0])
        while _memo_chars > _MEMO_CHARS or len(_memo) > _MEMO_ENTRIES:
            oldest = next(iter(_memo))
            _memo_chars -= len(oldest[0])
            del _memo[oldest]


def _forget_redacted() -> None:
    global _memo_chars
    _memo.clear()
    _memo_chars = 0


def _redact(text: str, cap: int | None, hermes: bool) -> str:
    if cap is not None and len(text) > cap * 4:
        text = text[: cap * 4]  # bound the regex work on huge inputs first
    text = replace_known(text, REDACTED)
    lower = text.lower()
    for needles, folded, pattern, replacement in _VALUE_PATTERNS:
        haystack = lower if folded else text
        if any(needle in haystack for needle in needles):
            text = pattern.sub(replacement, text)
    if _LONG_RUN.search(text):
        text = _AWS_SECRET.sub(_aws_secret, text)
    if hermes:
        text = _hermes_redact(text)
    if cap is not None and len(text) > cap:
        text = f"{text[:cap]}…[truncated]"
    return text


class Held:
    """Content taken on the agent's thread, not yet redacted: a bounded copy of its containers, holding the
    (immutable) strings themselves. :func:`sanitize` and :func:`to_json` redact it later, on our records thread:
    the redaction (ours and Hermes's) is most of what capturing costs."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def hold(value: Any, *, cap: int = 4096, depth: int = 6, items: int = 50) -> Held:
    """Content as it is now (the objects behind it may change once the hook returns), to be redacted later."""
    return Held(_sanitize(value, cap, depth, items, set(), redact=False))


def sanitize(value: Any, *, cap: int = 4096, depth: int = 6, items: int = 50) -> Any:
    """A JSON-ready, redacted, bounded copy of any value (cycles, bytes, NaN, broken repr included)."""
    if type(value) is Held:  # already bounded: its "… more" markers are kept as they are
        return _sanitize(value.value, cap, depth, items + 1, set())
    return _sanitize(value, cap, depth, items, set())


def _sanitize(value: Any, cap: int, depth: int, items: int, seen: set[int], redact: bool = True) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        if not redact:
            return str.__str__(value)  # a subclass's plain text: nothing of it runs later
        return redact_text(value, cap)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if depth <= 0:
        return "<nested too deep>"
    if id(value) in seen:
        return "<cycle>"
    if isinstance(value, dict):
        seen.add(id(value))
        out: dict[str, Any] = {}
        for n, (key, item) in enumerate(value.items()):
            if n >= items:
                out["…"] = f"{len(value) - items} more keys"
                break
            name = key if isinstance(key, str) else _safe_repr(key, 64)
            out[name] = REDACTED if is_secret_key(name) else _sanitize(item, cap, depth - 1, items, seen, redact)
        seen.discard(id(value))
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        seen.add(id(value))
        seq = list(value)[: items + 1] if not isinstance(value, (list, tuple)) else value
        out_list = [_sanitize(item, cap, depth - 1, items, seen, redact) for item in seq[:items]]
        if len(seq) > items:
            out_list.append(f"… {len(value) - items} more items")
        seen.discard(id(value))
        return out_list
    text = _safe_repr(value, cap)
    return redact_text(text, cap) if redact else text


def _safe_repr(value: Any, cap: int) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - hostile objects: describe, don't fail
        return f"<unrepresentable {type(value).__name__}>"
    return text if len(text) <= cap else f"{text[:cap]}…[truncated]"


def to_json(value: Any, *, cap: int = 4096) -> str:
    """Sanitized JSON text for a span attribute or a log body string, at most `2 * cap` characters and always valid
    JSON: what does not fit is shortened string by string (each says `…[truncated]`), never cut mid-document."""
    limit = cap * 2
    try:
        held = sanitize(value, cap=cap)
        text = _dumps(held)
        size = cap
        while len(text) > limit and size > 16:  # the redacted value, shortened: nothing is redacted again
            size //= 2
            text = _dumps(_shortened(held, size))
    except (TypeError, ValueError):
        text = json.dumps(_safe_repr(value, cap))
    if len(text) > limit:  # more items than fit even short: the document as a string, cut
        text = json.dumps(text[: limit // 2] + "…[truncated]", ensure_ascii=False)
    return text


def to_value(value: Any, *, cap: int = 4096) -> str:
    """A tool's arguments or result for its span, encoded once as the conventions type them (any): a structure, or a
    string holding a JSON object or array (as Hermes's tool results are), as JSON text a viewer shows as a structure;
    any other text as itself. Redacted and capped either way (JSON at most `2 * cap` characters, still valid)."""
    raw = value.value if type(value) is Held else value
    if not isinstance(raw, str):
        return to_json(value, cap=cap)
    if raw.lstrip()[:1] in ("{", "[") and len(raw) <= 16 * cap:  # larger: not parsed, cut as text
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, (dict, list)):
            return to_json(parsed, cap=cap)
    return redact_text(raw, 2 * cap)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _shortened(value: Any, size: int) -> Any:
    """`value` (sanitized: plain JSON data) with every string longer than `size` cut there and marked."""
    if isinstance(value, str):
        return value if len(value) <= size else f"{value[:size]}…[truncated]"
    if isinstance(value, list):
        return [_shortened(item, size) for item in value]
    if isinstance(value, dict):
        return {key: _shortened(item, size) for key, item in value.items()}
    return value


def on_spans(mode: str) -> bool:
    return mode in ("SPAN_ONLY", "SPAN_AND_EVENT")


def in_events(mode: str) -> bool:
    return mode in ("EVENT_ONLY", "SPAN_AND_EVENT")
