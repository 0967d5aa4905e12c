"""What a Git binding may say, and where a credential written into its URL goes.

A Git base's settings reach ``git`` as arguments, so each is checked when the base is bound (and
when a bindings file is read) before any ``git`` runs:

- no value starts with ``-`` (``--upload-pack=...``, ``-c core.sshCommand=...`` would be options);
- no value holds a control character;
- the repository is an ``https://``, ``ssh://`` or ``file://`` URL, an ``[user@]host:path`` SSH
  address or a local path: a remote helper (``ext::sh -c ...``, ``file::...``, any
  ``<transport>::<address>``) and every other scheme (``http``, ``git``, ``ftp`` ...) are refused.
  ``git`` is run with the same protocols only (``git.run_git``), so a redirect or a submodule
  cannot reach another one.

**Credentials.** A repository URL written with user information (``https://user:TOKEN@host/...``)
is bound without it: the binding, the bindings file, every source's frozen descriptor, receipt,
error and change event hold ``https://host/...``. The user and password are kept in this
process's memory only (``remember``) and handed to ``git`` through a credential helper that reads
them from its environment (``credential_config``): never on a command line, never in a file. A
later session has them only if the operator's own credential helper or SSH agent does (the
fetch error says so); that is where credentials belong.
"""

from __future__ import annotations

import re
import threading

from ...text import public_url, url_userinfo
from .errors import OkfConfigError

__all__ = ["ALLOWED_PROTOCOLS", "check_option_free", "check_repository", "split_credentials", "remember",
           "credential_config", "forget_all"]

ALLOWED_PROTOCOLS = ("file", "https", "ssh")
"""The transports git may use for a Git base (``file`` is a local repository, which OKF supports)."""
_SCHEMES = {"https": "https", "ssh": "ssh", "git+ssh": "ssh", "ssh+git": "ssh", "file": "file"}
_HELPER_SYNTAX = re.compile(r"^[A-Za-z0-9+.-]+::")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_USER_ENV, _PASSWORD_ENV = "WORKBENCH_GIT_USERNAME", "WORKBENCH_GIT_PASSWORD"
_HELPER = (f"!f() {{ test \"$1\" = get || exit 0; printf 'username=%s\\npassword=%s\\n' \"${_USER_ENV}\" "
           f"\"${_PASSWORD_ENV}\"; }}; f")
_lock = threading.Lock()
_credentials: dict[str, tuple[str, str]] = {}


def check_option_free(value: str, where: str) -> str:
    """``value`` when it cannot be read as an option nor hide a line break; else ``OkfConfigError``."""
    if value.startswith("-"):
        raise OkfConfigError(f"{where}: {public_url(value)!r} starts with '-', so git would read it as an option; "
                             "refused")
    if _CONTROL.search(value):
        raise OkfConfigError(f"{where}: {public_url(value)!r} holds a control character; refused")
    return value


def check_repository(value: str, where: str) -> str:
    """A repository value git may be given (see the module docstring); ``OkfConfigError`` naming why not."""
    check_option_free(value, where)
    if _HELPER_SYNTAX.match(value):
        raise OkfConfigError(f"{where}: {public_url(value)!r} asks git for a remote helper "
                             f"({value.split('::', 1)[0]}::); only {', '.join(ALLOWED_PROTOCOLS)} are allowed")
    scheme = _SCHEME.match(value)
    if scheme is not None and scheme.group(1).lower() not in _SCHEMES:
        raise OkfConfigError(f"{where}: the {scheme.group(1)}:// transport is not allowed for a Git base; use an "
                             "https:// or ssh:// URL, user@host:path, or a local repository")
    return value


def split_credentials(repository: str) -> tuple[str, tuple[str, str] | None]:
    """``(the repository without user information, (user, password) or None)``.

    An ``ssh://`` URL keeps its user (the account SSH logs in as; SSH takes no password from a URL).
    """
    public = public_url(repository)
    if public == repository:
        return repository, None
    scheme = _SCHEME.match(repository)
    if scheme is not None and _SCHEMES.get(scheme.group(1).lower()) == "ssh":
        return public, None
    return public, url_userinfo(repository)


def remember(public: str, credentials: tuple[str, str] | None) -> None:
    """Keep ``credentials`` for ``public`` in this process's memory (None: nothing to keep)."""
    if credentials is not None:
        with _lock:
            _credentials[public] = credentials


def forget_all() -> None:
    """Drop every credential kept in memory."""
    with _lock:
        _credentials.clear()


def credential_config(public: str) -> tuple[list[str], dict[str, str]]:
    """``(git -c arguments, environment)`` that answer git's credential request for ``public`` from
    memory; empty when none is kept (git's own helpers and SSH agent apply as usual)."""
    with _lock:
        found = _credentials.get(public)
    if found is None:
        return [], {}
    return (["-c", "credential.helper=", "-c", f"credential.helper={_HELPER}"],
            {_USER_ENV: found[0], _PASSWORD_ENV: found[1]})
