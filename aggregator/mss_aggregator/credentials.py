"""Secrets off the command line: the broker password and the HTTP token.

Anything in argv is readable by every local user (``/proc/<pid>/cmdline``,
``ps``), so both can come from a file or an environment variable instead, as
the fleet key does (``mss_protocol.sealed.load_key``: a file, else
``$MSS_FLEET_KEY``):

* the broker password: ``--broker-password-file PATH``, else
  ``$MSS_BROKER_PASSWORD``; it fills in the password of the ``--broker`` URL,
  which must then name the user and no password (given twice is an error);
* the HTTP token: ``--http-token-file PATH``, else ``--http-token`` or
  ``$MSS_HTTP_TOKEN`` (the flag and the file together are an error).

A file holds the secret alone; one final newline (LF or CRLF) is dropped, so
``echo secret > file`` works; nothing else is stripped.  Errors are
:class:`SecretError` naming the flag or variable, never the secret.
"""
import os
from urllib.parse import quote, urlsplit, urlunsplit

PASSWORD_ENV = "MSS_BROKER_PASSWORD"
TOKEN_ENV = "MSS_HTTP_TOKEN"


class SecretError(ValueError):
    pass


def read_secret(path, flag):
    """The secret in file ``path`` (one final newline dropped); SecretError naming ``flag``."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretError(f"{flag} {path}: cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise SecretError(f"{flag} {path}: the file is empty")
    return text


def broker_password(url, password_file=None, environ=os.environ, flag="--broker"):
    """``url`` (the ``flag`` URL, or None) with the password of ``password_file`` (its
    ``flag``-password-file), else of ``$MSS_BROKER_PASSWORD``, filled in; ``url`` unchanged when
    neither is given (and when there is no URL but only the variable)."""
    if password_file is not None:
        source, password = f"{flag}-password-file {password_file}", read_secret(
            password_file, f"{flag}-password-file")
        if url is None:
            raise SecretError(f"{source}: the password is for the {flag} connection; give {flag}")
    elif environ.get(PASSWORD_ENV):
        source, password = f"${PASSWORD_ENV}", environ[PASSWORD_ENV]
        if url is None:
            return None
    else:
        return url
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if ":" in userinfo:
        raise SecretError(f"{source}: the password is also in the {flag} URL; give it once "
                          f"(the URL without it: {parts.scheme}://{userinfo.partition(':')[0]}@{hostport})")
    if not at or not userinfo:
        raise SecretError(f"{source}: a password needs a user in the {flag} URL "
                          f"(mqtt://USER@{hostport or 'host:port'})")
    return urlunsplit(parts._replace(netloc=f"{userinfo}:{quote(password, safe='')}@{hostport}"))

