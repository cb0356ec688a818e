"""Keep credentials out of everything a job writes: manifests, run records, reports, logs.

Credentials reach Tidemark only through the environment (AWS_*, HF_TOKEN, ...) or an instance profile / web
identity, which boto3 and huggingface_hub read themselves; no job takes a credential as an argument. Still, a user
may put one in a config (`--set source.aws_secret_access_key=...`), and a config is copied into the manifest. So:

- `redact(obj)` returns a copy of a config-like structure where
  - the text value of any key that names a credential (a key segment such as `key`, `secret`, `token`,
    `password`, `credential(s)`, `auth`; `max_tokens` and `tokenizer` are not credentials) becomes "[REDACTED]".
    Numbers and booleans are never credentials: run.json's `bias_token: 24576` and `biased_token_shown: true`
    (a served model's probe record) stay as they are;
  - any string that contains an AWS access key id, something shaped like an AWS secret key, a `user:pass@` URL,
    a signed URL's signature or token parameters, or the value of a credential-named environment variable has
    that part replaced. The shell's `PWD`/`OLDPWD` and variables whose value is a path on this machine (a
    credentials *file*, an agent socket) are not secrets: every path under the working directory would go too.
- `redact_text(s)` does the second half on free text; `credential_keys(cfg)` names what was redacted (for a
  warning that never shows the value).
- `install_log_redaction()` makes every log record, from any logger, pass through `redact_text`.
"""
from __future__ import annotations

import logging
import os
import re
from typing import Any, Iterable

REDACTED = "[REDACTED]"

# Key segments that mark a credential. Matching is per segment (split on _ - . and camelCase), so "max_tokens",
# "tokenizer", "monkey" and "keyword" are not credentials, while "aws_secret_access_key", "apiKey", "hf_token",
# "db-password" and "sessionToken" are.
_SECRET_SEGMENTS = {"key", "keys", "secret", "secrets", "token", "password", "passwd", "pwd", "passphrase",
                    "credential", "credentials", "auth", "authorization", "apikey", "accesskey", "privatekey",
                    "cookie", "signature"}
_NOT_SECRET_KEYS = {"key_field", "id_field", "sort_key", "group_key", "dedup_key", "exact_key", "key_column"}
# A credential word next to one of these describes something else: "token stats written", "token_budget",
# "RAY_AUTH_MODE" (whose value, "disabled", must not be scrubbed out of every log line), "key_count".
_DESCRIPTIVE_SEGMENTS = {"stats", "stat", "count", "counts", "freq", "freqs", "frequency", "frequencies", "len",
                         "length", "lengths", "budget", "mode", "type", "kind", "level", "limit", "written", "per",
                         "ids", "window", "windows", "rows", "file", "path", "dir", "sock", "socket"}
# The shell's own variables: the working directory is not a password, whatever "pwd" abbreviates elsewhere.
_NOT_SECRET_ENV = {"PWD", "OLDPWD"}

AWS_ACCESS_KEY_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AIDA|AROA|AGPA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Z0-9])")
# An AWS secret access key: 40 characters of base64 alphabet. Hex digests (sha1 is 40 hex chars) are excluded by
# requiring both cases and a digit or one of / +.
_B64_40 = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/\s:@]+):(?P<pw>[^/\s@]+)@")
# Query parameters that carry a signed URL's proof or a bearer token (S3/CloudFront/Azure SAS presigned URLs, ?token=)
SIGNED_QUERY = re.compile(r"(?i)([?&](?:x-amz-signature|x-amz-credential|x-amz-security-token|signature|sig|"
                          r"token|access_token|api_key|apikey|key|policy)=)[^&#\s\"']+")
_MIN_ENV_SECRET = 6


def _segments(key: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(key))
    return [s for s in re.split(r"[_\-.\s/]+", spaced.lower()) if s]


def is_secret_key(key: Any) -> bool:
    if not isinstance(key, str) or key.lower() in _NOT_SECRET_KEYS:
        return False
    segs = _segments(key)
    if any(s in _DESCRIPTIVE_SEGMENTS for s in segs):
        return False
    return any(s in _SECRET_SEGMENTS for s in segs) or "".join(segs) in _SECRET_SEGMENTS


def _looks_like_aws_secret(s: str) -> bool:
    return (any(c.islower() for c in s) and any(c.isupper() for c in s)
            and (any(c.isdigit() for c in s) or "/" in s or "+" in s)
            and s.count("/") <= 2  # not a path: a random 40-char key holds fewer than one "/" on average
            and not re.fullmatch(r"[0-9a-fA-F]{40}", s))


def env_secrets(environ: dict | None = None) -> list[str]:
    """Values of credential-named environment variables (AWS_SECRET_ACCESS_KEY, HF_TOKEN, ...), longest first."""
    environ = os.environ if environ is None else environ
    vals = {v for k, v in environ.items() if k not in _NOT_SECRET_ENV and is_secret_key(k) and isinstance(v, str)
            and len(v) >= _MIN_ENV_SECRET and not _is_local_path(v)}
    vals |= {v for k, v in environ.items() if k in ("AWS_ACCESS_KEY_ID",) and len(v or "") >= _MIN_ENV_SECRET}
    return sorted(vals, key=len, reverse=True)


def _is_local_path(value: str) -> bool:
    return os.path.isabs(value) and os.path.exists(value)


def redact_text(text: str, extra_secrets: Iterable[str] = ()) -> str:
    if not isinstance(text, str) or not text:
        return text
    for secret in [*extra_secrets, *env_secrets()]:
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    text = AWS_ACCESS_KEY_ID.sub(REDACTED, text)
    text = _B64_40.sub(lambda m: REDACTED if _looks_like_aws_secret(m.group(0)) else m.group(0), text)
    text = URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:{REDACTED}@", text)
    return SIGNED_QUERY.sub(lambda m: f"{m.group(1)}{REDACTED}", text)


def _holds_credential(key: Any, value: Any) -> bool:
    """A credential is text (or a structure of it) under a credential-named key; a count or a flag is not."""
    return is_secret_key(key) and value not in (None, "") and not isinstance(value, (bool, int, float))


def _override_key(item: str) -> str | None:
    key, sep, _ = item.partition("=")
    return key.strip() if sep else None


def redact(obj: Any, extra_secrets: Iterable[str] = ()) -> Any:
    """A redacted deep copy of dicts / lists / tuples / strings (other values pass through)."""
    extra = list(extra_secrets)
    if isinstance(obj, dict):
        return {k: (REDACTED if _holds_credential(k, v) else redact(v, extra)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact(v, extra) for v in obj)
    if isinstance(obj, str):
        key = _override_key(obj)  # a `--set dotted.key=value` override
        if key and " " not in key and is_secret_key(key.split(".")[-1]):
            return f"{key}={REDACTED}"
        return redact_text(obj, extra)
    return obj


def credential_keys(obj: Any, prefix: str = "") -> list[str]:
    """Dotted names of credential-named keys that hold a value (never the values)."""
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            dotted = f"{prefix}{k}"
            if _holds_credential(k, v):
                found.append(dotted)
            else:
                found.extend(credential_keys(v, dotted + "."))
    return found


def secret_values(obj: Any) -> list[str]:
    """The string values held under credential-named keys, to scrub from free text made from the same config."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if is_secret_key(k) and isinstance(v, str) and len(v) >= _MIN_ENV_SECRET:
                out.append(v)
            else:
                out.extend(secret_values(v))
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            out.extend(secret_values(v))
    return out


class _RedactingFactory:
    """A LogRecord factory: format each record once and redact the result, whatever logger it comes from."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, *args, **kwargs):
        record = self.inner(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is the caller's problem; leave the record as is
            return record
        clean = redact_text(message)
        if clean != message or record.args:
            record.msg, record.args = clean, ()
        return record


def install_log_redaction() -> None:
    """Idempotent: wrap the process's LogRecord factory so no log line carries a credential."""
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _RedactingFactory):
        logging.setLogRecordFactory(_RedactingFactory(factory))
