"""Issue 17, item 2: the common credential shapes are redacted wherever text is exported (captured content, error
text, log bodies) and masked in `doctor` and logs; ordinary text that merely looks close is left alone.
The same shapes go through a real Hermes run in every capture mode: tests/integration/test_redaction_modes.py."""

from __future__ import annotations

import re

import pytest

from hermes_otel.redaction.content import redact_text, sanitize

# shape -> (text as it appears, the part that must never be exported)
SHAPES = {
    "openai key": ("sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX0123", "ABCDEFGHIJKLMNOPQRSTUVWX0123"),
    "aws access key id": ("AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    "aws secret key": ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "K7MDENG/bPxRfiCY"),
    "aws secret key, named": ("aws_secret_access_key = Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4cXV1eHE", "Zm9vYmFyYmF6"),
    "pem private key": ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAzSECRETPEMBODY\n-----END RSA PRIVATE KEY-----",
                        "SECRETPEMBODY"),
    "pem, no end line": ("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIOSECRETCUTOFF", "SECRETCUTOFF"),
    "pgp private key": ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBFSECRETPGPBODY\n=abcd\n"
                        "-----END PGP PRIVATE KEY BLOCK-----", "SECRETPGPBODY"),
    "gitlab token": ("glpat-AbCdEfGhIjKlMnOpQrSt", "AbCdEfGhIjKlMnOpQrSt"),
    "hugging face token": ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "AbCdEfGhIjKlMnOpQrStUvWxYz"),
    "github classic token": ("ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    "github fine-grained token": ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv", "11ABCDEFG0123456789"),
    "slack bot token": ("xoxb-1234567890-0987654321-AbCdEfGhIjKl", "0987654321-AbCdEfGhIjKl"),
    "slack user token": ("xoxp-1234567890-0987654321-ZyXwVuTsRqPo", "0987654321-ZyXwVuTsRqPo"),
    "jwt": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "eyJzdWIiOiIxMjM0NTY3ODkwIn0"),
    "access_token=": ("https://api.example/cb?access_token=ya29.SECRETACCESS&state=1", "SECRETACCESS"),
    "refresh_token=": ("refresh_token=1//0gSECRETREFRESH", "SECRETREFRESH"),
    "id_token=": ("id_token=idtok.SECRETIDTOKEN", "SECRETIDTOKEN"),
    "client_secret=": ("client_secret=GOCSPX-SECRETCLIENT", "SECRETCLIENT"),
    "password in free text": ("the admin password: hunter2SECRET, do not share", "hunter2SECRET"),
    "json token field": ('{"token": "tok-SECRETJSON"}', "SECRETJSON"),
    "bearer header": ("Authorization: Bearer abcdefSECRETBEARER", "SECRETBEARER"),
    "url user:password": ("https://bob:pa55SECRETword@example.invalid/x", "pa55SECRETword"),
    "url token as user": ("https://x0Y1z2SECRETUSERTOKEN@git.example/repo.git", "SECRETUSERTOKEN"),
    # issue 27, item 2: the shapes people really paste
    "url empty user": ("redis://:SECRETREDISPW@cache.internal:6379/0", "SECRETREDISPW"),
    "url password with a slash": ("https://deploy:SECRETpa/ssWORD@example.invalid/x", "SECRETpa/ssWORD"),
    "azure account key": ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=SECRETAZURE0123456789abcdefXY==;"
                          "EndpointSuffix=core.windows.net", "SECRETAZURE0123456789"),
    "sendgrid key": ("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", "ngeVfQFYQlKU0ufo8x5d1A"),
    "npm token": ("npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrStUvWx"),
    "pypi token": ("pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0", "AgEIcHlwaS5vcmcCJGFiY2Rl"),
    "telegram bot token": ("https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe",
                           "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"),
    "slack webhook": ("https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/SECRETSLACKHOOK0123456789",
                      "SECRETSLACKHOOK0123456789"),
    "discord webhook": ("https://discord.com/api/webhooks/123456789012345678/SECRETDISCORDHOOK-abcdefghijklmnop",
                        "SECRETDISCORDHOOK"),
    "x-amz-signature": ("https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature="
                        "5ec7e75ec7e75ec7e7abcdef0123456789&X-Amz-Expires=60", "5ec7e75ec7e75ec7e7"),
    "azure sas sig": ("https://acct.blob.core.windows.net/c/b?sv=2020-08-04&sig=SECRETSASSIG%2Babc%3D&se=2030",
                      "SECRETSASSIG"),
    "cookie header": ("Cookie: sessionid=SECRETSESSIONID123; csrftoken=abc", "SECRETSESSIONID123"),
    "passphrase=": ("passphrase=SECRETPASSPHRASE", "SECRETPASSPHRASE"),
    "docker auth": ('{"auths":{"registry.example":{"auth":"c2VjcmV0dXNlcjpTRUNSRVRET0NLRVI="}}}',
                    "c2VjcmV0dXNlcjpTRUNSRVRET0NLRVI"),
    "authorization token": ("Authorization: Token SECRETTOKENAUTH123", "SECRETTOKENAUTH123"),
    "authorization apikey": ("Authorization: ApiKey SECRETAPIKEYAUTH", "SECRETAPIKEYAUTH"),
    "authorization digest": ('Authorization: Digest username="bob", nonce="n1", response="SECRETDIGESTRESP"',
                             "SECRETDIGESTRESP"),
    "DB_PASS=": ("DB_PASS=SECRETDBPASS", "SECRETDBPASS"),
    "--password X": ("mysql -u root --password SECRETCLIPW -h db", "SECRETCLIPW"),
    "stripe webhook secret": ("whsec_SECRETWEBHOOKSIGNING0123456789", "SECRETWEBHOOKSIGNING"),
    # issue 40, item 7: files and command lines that hold a credential
    ".env MAPBOX_KEY=": ("MAPBOX_KEY=pk.SECRETMAPBOX0123", "SECRETMAPBOX0123"),
    ".env OPENAI_KEY=": ('OPENAI_KEY="SECRETOPENAIKEY0123"', "SECRETOPENAIKEY0123"),
    ".netrc": ("machine api.example.com login bob password SECRETNETRC", "SECRETNETRC"),
    ".netrc, password line": ("machine api.example.com\n  login bob\n  password SECRETNETRCLINE",
                              "SECRETNETRCLINE"),
    ".pgpass": ("db.internal:5432:app:bob:SECRETPGPASS", "SECRETPGPASS"),
    "kubeconfig client-key-data": ("client-key-data: LS0tLS1CRUdJTiBSU0EgU0VDUkVUS1VCRUtFWQ==",
                                   "LS0tLS1CRUdJTiBSU0EgU0VDUkVUS1VCRUtFWQ"),
    "curl -u user:pass": ("curl -u bob:SECRETCURLPW https://api.example", "SECRETCURLPW"),
    "mysql -pPASS": ("mysql -u root -pSECRETMYSQLPW app", "SECRETMYSQLPW"),
    "sshpass -p PASS": ("sshpass -p SECRETSSHPASS ssh deploy@host", "SECRETSSHPASS"),
    "docker login -p PASS": ("docker login -u bob -p SECRETDOCKERPW registry.example", "SECRETDOCKERPW"),
    "htpasswd line": ("alice:$apr1$r31.....$SECRETHTPASSWDHASH", "SECRETHTPASSWDHASH"),
    "wpa_supplicant psk": ('network={ ssid="home" psk="SECRETWIFIPSK" }', "SECRETWIFIPSK"),
    "?pwd= in free text": ("open https://nas.local/login?user=admin&pwd=SECRETNASPW now", "SECRETNASPW"),
}
NOT_SECRETS = [
    "usage: max_tokens=100 completion_tokens: 5 token_type=bearer",
    "bypass=1 compass: north, the pass rate",
    "https://host:8080/path/to?email=a@example.com",
    "git 3f786850e387550fdab836ed7e6dc881de23001b",
    "https://bob@example.invalid/x",
    "the key: value, a primary_key=5",
    "ssh://git@github.com/org/repo.git",
    "mysql -P3306 -p app",  # -p alone asks for the password
    "the password reset link expired",
    "listen on 0.0.0.0:5432 for app connections",
]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_credential_shape_is_redacted_in_text(shape):
    text, secret = SHAPES[shape]
    shown = redact_text(f"before {text} after")
    assert secret not in shown, shown
    # Our marker, or Hermes's where its own redactor (which runs after ours) masks the whole assignment (0.22 turns
    # `MAPBOX_KEY=<redacted>` into `MAPBOX_KEY=***`, as in its logs).
    assert shown.startswith("before ") and ("<redacted>" in shown or "=***" in shown or '="***"' in shown), shown


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_credential_shape_is_redacted_in_json_text(shape):
    """Tool results are often JSON text, newlines and quotes escaped: `\\nghp_...` still starts a token."""
    import json

    text, secret = SHAPES[shape]
    once = json.dumps({"output": f"line\n{text}\nnext", "exit_code": 0})
    assert secret not in redact_text(once)
    assert secret not in redact_text(repr({"arguments": once}))  # escaped twice: the repr of an object holding JSON


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_credential_shape_is_redacted_in_nested_content(shape):
    text, secret = SHAPES[shape]
    assert secret not in repr(sanitize({"messages": [{"role": "user", "content": f"x {text} y"}], "n": [text]}))


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_ordinary_text_is_left_alone(text):
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("url", "secret"),
    [("http://ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789@collector:4318", "AbCdEfGh"),
     ("http://x0Y1z2SECRETUSERTOKEN@collector:4318", "SECRETUSERTOKEN"),
     ("https://collector:4318/v1/traces?access_token=SECRETQUERY&tenant=a", "SECRETQUERY"),
     ("https://collector:4318/v1/traces?client_secret=SECRETCLIENT", "SECRETCLIENT"),
     ("http://u:pw-9999@h:1/v1/traces?api_key=abc123", "pw-9999")],
)
def test_doctor_masks_tokens_anywhere_in_a_url(url, secret):
    from hermes_otel.cli import main as cli

    shown = cli.masking.mask_url(url) if hasattr(cli, "masking") else cli.config._mask_url(url)
    assert secret not in shown and "****" in shown


# -- redaction by key name alone (issue 30): values that no value pattern knows -------------------------------------

# name -> a value that is plain text to every value pattern, so only the key's name can redact it.
BY_NAME = {
    "api_key": "abcd1234xyz",
    "x-api-key": "plainsecretvalue",
    "password": "hunter2",
    "client_secret": "s3cr3tvalue9",
    "authorization": "opaque-value-42",
    "refresh-token": "zzzplainvalue",
    "cookie": "sessionplain77",
}
CASES = {"lower": str.lower, "upper": str.upper, "title": lambda k: "-".join(p.title() for p in k.split("-")),
         "camel": lambda k: k[:1].upper() + k[1:].replace("_", "").replace("-", "")}


def _nest(value: object, depth: int) -> object:
    for n in range(depth):
        value = {"level": [value]} if n % 2 else {"inner": value}
    return value


def test_the_by_name_values_are_plain_text_to_the_value_patterns():
    """Precondition of the tests below: drop the key-name rule and these values would be exported as they are."""
    for value in BY_NAME.values():
        assert redact_text(value) == value


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("depth", [0, 1, 2])
def test_a_secret_key_is_redacted_by_its_name_in_any_letter_case_and_nesting(case, depth):
    keys = {CASES[case](name): value for name, value in BY_NAME.items()}
    payload = _nest({**keys, "max_tokens": 100, "note": "plain"}, depth)
    expected = _nest({**dict.fromkeys(keys, "<redacted>"), "max_tokens": 100, "note": "plain"}, depth)
    assert sanitize(payload) == expected


def test_the_original_failing_case_of_issue_30():
    assert sanitize({"API_KEY": "abcd1234xyz", "X-Api-Key": "plainsecretvalue", "Password": "hunter2"}) == {
        "API_KEY": "<redacted>", "X-Api-Key": "<redacted>", "Password": "<redacted>"}


# Shapes only Hermes's own redactor (agent/redact.py) knows: applied after ours, so we are never weaker than Hermes.
HERMES_ONLY = {
    "tavily key": ("tvly-SECRETTAVILYKEY0123456789", "SECRETTAVILYKEY"),
    "groq key": ("gsk_SECRETGROQKEY0123456789abcd", "SECRETGROQKEY"),
    "replicate token": ("r8_SECRETREPLICATE0123456789", "SECRETREPLICATE"),
    "x-api-key header": ("x-api-key: SECRETXAPIKEYVALUE0123", "SECRETXAPIKEYVALUE"),
}


@pytest.mark.parametrize("shape", list(HERMES_ONLY))
def test_what_hermes_own_redactor_hides_is_hidden_too(shape):
    from agent.redact import redact_sensitive_text

    text, secret = HERMES_ONLY[shape]
    assert secret not in redact_sensitive_text(f"before {text} after", force=True)  # Hermes knows it
    shown = redact_text(f"before {text} after")
    assert secret not in shown and shown.startswith("before ") and shown.endswith(" after")



NEW_SHAPES = [shape for shape in SHAPES if list(SHAPES).index(shape) >= list(SHAPES).index(".env MAPBOX_KEY=")]


@pytest.mark.parametrize("shape", NEW_SHAPES)
def test_each_new_shape_is_masked_in_our_log_lines_too(shape):
    """Both redaction passes: captured content (above) and log lines (masking, which runs ours without Hermes's)."""
    from hermes_otel.redaction.masking import mask_text

    text, secret = SHAPES[shape]
    assert secret not in mask_text(f"before {text} after")


@pytest.mark.parametrize("key", ["MAPBOX_KEY", "psk", "client-key-data"])
def test_the_new_credential_names_are_secret_keys_and_lowercase_key_names_are_not(key):
    from hermes_otel.redaction.content import is_secret_key

    assert is_secret_key(key) and not is_secret_key("primary_key") and not is_secret_key("sort_key")


def _documented_secret_key_names() -> list[str]:
    """The key names docs/privacy.md lists under "By key name" (before the token counts it says are kept)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "privacy.md").read_text()
    bullet = text[text.index("* **By key name**"):]
    bullet = bullet[:bullet.index("(token *counts*")]
    return [name for name in re.findall(r"`([^`]+)`", bullet) if not name.startswith("<")]


def test_every_key_name_the_privacy_page_lists_is_redacted_by_name():
    names = _documented_secret_key_names()
    assert len(names) >= 10, names
    for name in names:
        value = f"v-{name}-9f8e7d"  # no value shape of its own: only the name can redact it
        assert repr(sanitize({name: value, "nested": [{name.upper(): value}]})).count("<redacted>") == 2, name
    assert sanitize({"input_tokens": 12, "max_tokens": 100}) == {"input_tokens": 12, "max_tokens": 100}


def test_no_value_pattern_scans_without_a_bound():
    """Every value pattern runs in time linear in its input: no lazy scan without an upper bound (`*?`, `+?`),
    which retried from every trigger word made a 16 KiB line of `mysql` words cost 0.8 s. The PEM block's is the one
    exception: anchored to its END line or the text's end, it matches once. benchmarks/redaction.py times each
    pattern on inputs built to make it work hard (µs per KiB at 16 KiB and 1 MiB)."""
    from hermes_otel.redaction import content

    unbounded = [(needles[0], pattern._args[0]) for needles, _folded, pattern, _ in content._VALUE_PATTERNS
                 if needles != ("PRIVATE KEY",) and re.search(r"[*+]\?", pattern._args[0])]
    assert unbounded == []
