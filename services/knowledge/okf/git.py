"""Native ``git`` for Git custody: one runner, and a bound Git base read through a private cache.

The workbench never keeps a working tree of the operator's repository and never commits on one of
its branches. Each Git base has a private bare cache under the state dir, ``<stateDir>/git/<alias>.git``,
guarded by the cooperative lock ``<stateDir>/git/<alias>.lock``. Reading the accepted knowledge
fetches the accepted branch into ``refs/okf/accepted`` and reads the files under ``root`` at that
commit (``ls-tree`` and ``cat-file``): nothing is checked out.

Credentials are git's own: the repository URL is passed to ``git`` without user information, and
HTTPS credential helpers, the SSH agent and ``~/.gitconfig`` apply as for any ``git fetch`` (a URL
bound with a token has it handed over from memory: ``git_urls``). ``GIT_TERMINAL_PROMPT=0`` keeps
a missing credential from waiting on a prompt nobody sees; the workbench stores none. A failed
command raises ``GitCommandError`` carrying git's own words, with user information taken out of
any URL in them.

No value reaches ``git`` as an option: every positional argument follows ``--`` (or
``--end-of-options`` for the commands where ``--`` starts paths), object ids from the state dir are
checked to be hexadecimal, and the binding's values were checked when it was bound
(``git_urls``). ``run_git`` gives git a controlled environment: no inherited ``GIT_*`` variable
that could redirect it to another repository, index, object store or configuration
(``GIT_DIR``, ``GIT_INDEX_FILE``, ``GIT_CONFIG_PARAMETERS`` ...) reaches it, only the operator's
own transport and identity settings (``KEPT_GIT_ENV``); transports other than ``file``, ``https``
and ``ssh`` (``ext::``, remote helpers, ``git://``, ``http://``) are refused by
``GIT_ALLOW_PROTOCOL``, and pathspecs are literal.

A kill mid-fetch can leave git's ``*.lock`` files in the cache; the cache is written only under
its lock, so any ``*.lock`` found while holding it is stale and ``GitBase.locked`` removes it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from ...files import FileLock, json_deeper_than, name_problem
from .descriptors import BaseDescriptor, GitBinding, parse_base_descriptor
from ...text import redact_urls
from .errors import OkfConfigError, OkfError, OkfPathError, RecoveryError
from .git_urls import ALLOWED_PROTOCOLS, check_option_free, check_repository, credential_config
from .tree import Tree

__all__ = ["GitBase", "GitCommandError", "GIT_TIMEOUT_S", "ACCEPTED_REF", "git_available", "run_git",
           "repository_locator", "descriptor_of", "seed_repository", "git_env", "object_id", "check_branch_name",
           "KEPT_GIT_ENV"]

GIT_TIMEOUT_S = 300.0
"""The longest one ``git`` command may run (a fetch or push over a slow network)."""
ACCEPTED_REF = "refs/okf/accepted"
"""Where the cache keeps the accepted branch's head as last fetched."""
LOCK_WAIT_S = 30.0
DESCRIPTOR_BYTES = 1024 * 1024
"""The largest ``okf-base.json`` a repository's tree may hold (it names a base: a few fields)."""
DESCRIPTOR_DEPTH = 16
"""How deep it may nest."""
"""How long a Git operation waits for another one on the same base."""
_SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[^:/]+:")
_OBJECT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
KEPT_GIT_ENV = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM", "GIT_ASKPASS", "GIT_SSH",
                "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_SSL_", "GIT_HTTP_", "GIT_AUTHOR_", "GIT_COMMITTER_")
"""The inherited ``GIT_*`` variables git is given (names, or prefixes ending in ``_``): the operator's own
configuration files, credentials, SSH, TLS, proxy and identity settings. Every other ``GIT_*`` is dropped."""
_POLICY = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_ALLOW_PROTOCOL": ":".join(ALLOWED_PROTOCOLS),
           "GIT_PROTOCOL_FROM_USER": "0", "GIT_LITERAL_PATHSPECS": "1", "GIT_NO_REPLACE_OBJECTS": "1"}
_PROTOCOL_ARGS = ["-c", "protocol.allow=never", "-c", "protocol.ext.allow=never"] + [
    arg for name in ALLOWED_PROTOCOLS for arg in ("-c", f"protocol.{name}.allow=always")]


class GitCommandError(OkfError):
    """A ``git`` command failed; ``output`` is what git said (stderr, then stdout)."""

    code = "E_GIT"

    def __init__(self, message: str, *, output: str = "", code: str | None = None, remedy: str | None = None) -> None:
        self.output = output
        super().__init__(message, code=code, remedy=remedy)


def git_available() -> bool:
    """True when a ``git`` executable is on ``PATH``."""
    return shutil.which("git") is not None


def git_words(proc: subprocess.CompletedProcess[bytes]) -> str:
    """What git said on a failure: stderr then stdout, decoded, without URL user information,
    trimmed to 2,000 characters."""
    words = (proc.stderr or b"").decode("utf-8", "replace").strip()
    out = (proc.stdout or b"").decode("utf-8", "replace").strip()
    text = "\n".join(part for part in (words, out) if part)
    return redact_urls(text)[:2000]


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment git runs with: this process's, less every ``GIT_*`` not in ``KEPT_GIT_ENV``,
    plus ``extra``, plus the fixed policy (no prompt, C locale, allowed transports, literal pathspecs)."""
    def kept(name: str) -> bool:
        return not name.startswith("GIT_") or any(
            name.startswith(k) if k.endswith("_") else name == k for k in KEPT_GIT_ENV)

    return {**{k: v for k, v in os.environ.items() if kept(k)}, **(extra or {}), **_POLICY}


def object_id(value: object, what: str = "object id") -> str:
    """``value`` when it is a full hexadecimal object id (as the state dir records them); else ``OkfError``."""
    if not isinstance(value, str) or not _OBJECT_ID.match(value):
        raise OkfError(f"{what} {str(value)[:80]!r} is not a git object id", code="E_RECOVERY")
    return value


def check_branch_name(name: str, what: str) -> str:
    """``name`` when git accepts it as a branch name (``git check-ref-format --branch``); else
    ``OkfConfigError`` with git's verdict.

    ``--branch`` itself would expand ``@{-1}`` in whatever repository the process stands in, so the
    same rule is applied as git applies it, without that expansion: a name starting with ``-`` and
    ``HEAD`` are refused, and ``refs/heads/<name>`` must pass ``git check-ref-format``.
    """
    if name.startswith("-") or name == "HEAD":
        raise OkfConfigError(f"{what}: git refuses {name!r} as a branch name (git check-ref-format --branch)")
    proc = run_git(["check-ref-format", f"refs/heads/{name}"], check=False, what="git check-ref-format")
    if proc.returncode != 0:
        raise OkfConfigError(f"{what}: git refuses {name!r} as a branch name (git check-ref-format --branch "
                             f"exits {proc.returncode}: a name may not hold '..', '@{{', a control character, "
                             "space, ~ ^ : ? * [ or \\, nor end in '.', '/' or '.lock', nor have a part that "
                             "starts with '.')")
    return name


def run_git(args: Sequence[str], *, cwd: Path | None = None, git_dir: Path | None = None, input: bytes | None = None,
            env: Mapping[str, str] | None = None, config: Sequence[str] = (), check: bool = True,
            what: str = "git") -> subprocess.CompletedProcess[bytes]:
    """Run ``git args`` (with ``--git-dir`` when given, ``config`` as ``-c`` arguments before the command) in
    the controlled environment ``git_env(env)``; ``GitCommandError`` with git's words when it fails."""
    if not git_available():
        raise GitCommandError("git is not installed; Git custody needs the git command on PATH",
                              remedy="install git (Debian: apt-get install git), then retry")
    command = ["git", *_PROTOCOL_ARGS, *(config or ())] + ([f"--git-dir={git_dir}"] if git_dir is not None else [])
    command += list(args)
    try:
        proc = subprocess.run(command, cwd=cwd, input=input, capture_output=True, env=git_env(env),
                              timeout=GIT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise GitCommandError(f"{what} did not finish within {GIT_TIMEOUT_S:.0f} s",
                              remedy="check the network and the repository, then retry") from None
    if check and proc.returncode != 0:
        words = git_words(proc)
        raise GitCommandError(f"{what} failed: {words or f'git exited {proc.returncode}'}", output=words)
    return proc


def repository_locator(binding: GitBinding, bindings_dir: Path) -> str:
    """The repository as git is given it: URLs and ``user@host:path`` as written, a local path made absolute.

    A local repository must be durable: a linked worktree (its ``.git`` is a file) is refused.
    """
    repo = binding.repository
    if "://" in repo or _SCP_LIKE.match(repo):
        return repo
    path = Path(repo) if os.path.isabs(repo) else bindings_dir / repo
    path = Path(os.path.normpath(path))
    if (path / ".git").is_file():
        raise OkfPathError(f"base {binding.alias!r}: {path} is a linked worktree; bind the durable repository")
    return str(path)


def descriptor_of(alias: str, bound_id: str, tree: Mapping[str, bytes], where: str) -> BaseDescriptor:
    """The base descriptor ``okf-base.json`` of a tree; its id must equal the binding's."""
    import json

    raw = tree.get("okf-base.json")
    if raw is None:
        raise OkfConfigError(f"base {alias!r}: {where} has no okf-base.json")
    if len(raw) > DESCRIPTOR_BYTES or json_deeper_than(raw, DESCRIPTOR_DEPTH):  # a repository's file: bound it
        raise OkfConfigError(f"base {alias!r}: {where}/okf-base.json is larger than {DESCRIPTOR_BYTES} bytes "
                             f"or nested deeper than {DESCRIPTOR_DEPTH} levels")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        raise OkfConfigError(f"base {alias!r}: {where}/okf-base.json is not JSON") from None
    descriptor = parse_base_descriptor(doc, f"{where}/okf-base.json")
    if descriptor.id != bound_id:
        raise OkfConfigError(f"base {alias!r}: okf-base.json id {descriptor.id!r} != bound id {bound_id!r}")
    return descriptor


class GitBase:
    """One bound Git base: its repository, root, accepted branch and private bare cache."""

    def __init__(self, binding: GitBinding, state_dir: Path, bindings_dir: Path) -> None:
        self.binding = binding
        self.alias = binding.alias
        check_repository(binding.repository, f"base {binding.alias!r} repository")  # however the binding was made
        check_option_free(binding.accepted_branch, f"base {binding.alias!r} acceptedBranch")
        self.repository = repository_locator(binding, bindings_dir)
        self.accepted_branch = binding.accepted_branch
        root = binding.root.strip("/")
        self.prefix = "" if root in ("", ".") else root + "/"
        """The root as a path prefix inside the repository ('' for a dedicated repository)."""
        self.cache = Path(state_dir) / "git" / f"{binding.alias}.git"
        self.lock_path = Path(state_dir) / "git" / f"{binding.alias}.lock"
        self.head: str | None = None
        """The accepted head the last ``fetch`` saw."""
        self.tree: Tree | None = None
        """The knowledge files at ``head`` (after ``snapshot``)."""

    def git(self, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None, check: bool = True,
            what: str = "git") -> subprocess.CompletedProcess[bytes]:
        """Run git on the cache."""
        return run_git(args, git_dir=self.cache, input=input, env=env, check=check, what=what)

    def remote_git(self, *args: str, git_dir: bool = True, check: bool = True,
                   what: str = "git") -> subprocess.CompletedProcess[bytes]:
        """Run git on the cache (``git_dir``) for a command that reaches the repository: with the
        credentials a URL was bound with, when this process keeps them (``git_urls``)."""
        config, env = credential_config(self.binding.repository)
        return run_git(args, git_dir=self.cache if git_dir else None, env=env, config=config, check=check, what=what)

    # -- the cache and its lock --------------------------------------------------------------------

    def ensure_cache(self) -> None:
        """Create the bare cache when missing (built beside it and renamed into place)."""
        if (self.cache / "HEAD").is_file():
            return
        self.cache.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(self.cache):  # a cache a kill left half made
            shutil.rmtree(self.cache)
        temp = Path(tempfile.mkdtemp(prefix=f".{self.alias}.", suffix=".tmp", dir=self.cache.parent))
        run_git(["init", "--bare", "--quiet", "--", str(temp)], what="git init")
        os.replace(temp, self.cache)

    def clear_stale_locks(self) -> list[str]:
        """Remove git ``*.lock`` files a killed command left in the cache (the caller holds the lock)."""
        removed: list[str] = []
        if not self.cache.is_dir():
            return removed
        for folder, _dirs, files in os.walk(self.cache):
            for name in files:
                if name.endswith(".lock"):
                    path = Path(folder) / name
                    path.unlink(missing_ok=True)
                    removed.append(str(path.relative_to(self.cache)))
        return removed

    @contextmanager
    def locked(self, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
        """Hold this base's Git lock (``RecoveryError`` after ``wait_s``), with a ready, clean cache."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(self.lock_path)
        deadline = time.monotonic() + wait_s
        while not lock.try_acquire():
            if time.monotonic() >= deadline:
                raise RecoveryError(f"base {self.alias!r} is busy with another Git operation")
            time.sleep(0.05)
        try:
            self.ensure_cache()
            self.clear_stale_locks()
            yield
        finally:
            lock.release()

    # -- reading the accepted branch -------------------------------------------------------------------

    def fetch(self) -> str:
        """Fetch the accepted branch into ``ACCEPTED_REF``; its head (the caller holds the lock)."""
        try:
            self.remote_git("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", self.repository,
                            f"+refs/heads/{self.accepted_branch}:{ACCEPTED_REF}", what="git fetch")
        except GitCommandError as exc:
            raise GitCommandError(f"base {self.alias!r}: the accepted branch {self.accepted_branch!r} of "
                                  f"{self.repository} cannot be fetched: {exc.output or exc.detail}",
                                  output=exc.output, code="E_BASE_UNAVAILABLE",
                                  remedy="check the repository address, the network and your git credentials "
                                         "(credential helper or SSH agent), then retry") from None
        shallow = self.git("rev-parse", "--is-shallow-repository").stdout.strip()
        if shallow == b"true":
            raise OkfError(f"base {self.alias!r}: the cache is shallow", code="E_BASE_SHALLOW")
        self.head = self.rev(ACCEPTED_REF)
        return self.head

    def rev(self, ref: str) -> str:
        """The commit ``ref`` names."""
        return self.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}",
                        what=f"git rev-parse {ref}").stdout.decode().strip()

    def has_ref(self, ref: str) -> str | None:
        """The commit ``ref`` names, or None when there is no such ref."""
        proc = self.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def entries(self, commit: str) -> dict[str, tuple[str, str]]:
        """``{path under root: (mode, blob)}`` at ``commit``; links and submodules are refused."""
        args = ["ls-tree", "-r", "-z", "--full-tree", "--", commit]
        if self.prefix:
            args.append(self.prefix.rstrip("/"))
        out = self.git(*args, what="git ls-tree").stdout
        found = {}
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, raw_path = record.partition(b"\t")
            mode, kind, sha = meta.decode().split(" ")
            path = raw_path.decode("utf-8", "surrogateescape")
            if not path.startswith(self.prefix):
                continue
            rel = path[len(self.prefix):]
            if kind != "blob" or mode not in ("100644", "100755"):
                raise OkfPathError(f"base {self.alias!r}: {path} at {commit[:12]} is a "
                                   f"{'symlink' if mode == '120000' else 'submodule' if kind == 'commit' else kind}; "
                                   "knowledge files must be plain files")
            problem = name_problem(rel) or (f"{rel!r} appears twice in the tree" if rel in found else None)
            if problem is not None:
                raise OkfPathError(f"base {self.alias!r}: the tree at {commit[:12]} holds an entry no knowledge file "
                                   f"may have ({problem}); nothing of it is written",
                                   remedy="remove the entry from the accepted branch (a repository that fscks its "
                                          "pushes refuses such trees), then retry")
            found[rel] = (mode, sha)
        return found

    def read_tree(self, commit: str) -> Tree:
        """The knowledge files under ``root`` at ``commit``."""
        entries = self.entries(commit)
        if not entries:
            return {}
        order = sorted(entries)
        request = b"".join(entries[p][1].encode() + b"\n" for p in order)
        out = self.git("cat-file", "--batch", input=request, what="git cat-file").stdout
        tree: Tree = {}
        at = 0
        for path in order:
            header_end = out.index(b"\n", at)
            size = int(out[at:header_end].split(b" ")[2])
            tree[path] = out[header_end + 1:header_end + 1 + size]
            at = header_end + 1 + size + 1
        return tree

    def descriptor(self) -> BaseDescriptor:
        """The base's ``okf-base.json`` at the accepted head (fetched when not yet read)."""
        if self.tree is None:
            with self.locked():
                self.tree = self.read_tree(self.fetch())
        return descriptor_of(self.alias, self.binding.id, self.tree, f"{self.repository}#{self.accepted_branch}")

    def check_plain(self) -> None:
        """A Git base has no folder of its own to check (the proposal paths are checked at delivery)."""

    def remote_branch(self, branch: str) -> str | None:
        """The commit ``branch`` names on the repository, or None when it has no such branch."""
        try:
            out = self.remote_git("ls-remote", "--heads", "--", self.repository, f"refs/heads/{branch}",
                                  git_dir=False, what="git ls-remote").stdout.decode()
        except GitCommandError as exc:
            raise GitCommandError(f"base {self.alias!r}: {self.repository} cannot be reached: {exc.output or exc.detail}",
                                  output=exc.output, code="E_BASE_UNAVAILABLE",
                                  remedy="check the network and your git credentials, then retry") from None
        for line in out.splitlines():
            sha, _, ref = line.partition("\t")
            if ref == f"refs/heads/{branch}":
                return sha
        return None


def seed_repository(path: Path, files: Mapping[str, bytes], *, branch: str, message: str, at: float) -> str:
    """Create the bare repository ``path`` whose ``branch`` holds ``files`` in one commit; the commit id.

    For sample worlds and demos: it stands for a repository a team already keeps (its knowledge
    base reviewed and merged long ago). It is never used on an operator's repository.
    """
    if os.path.lexists(path):
        raise OkfPathError(f"{path} already exists")
    path.parent.mkdir(parents=True, exist_ok=True)
    run_git(["init", "--quiet", "--bare", "--", str(path)], what="git init")
    when = f"@{int(at)} +0000"
    identity = {"GIT_AUTHOR_NAME": "Sample team", "GIT_AUTHOR_EMAIL": "team@localhost", "GIT_AUTHOR_DATE": when,
                "GIT_COMMITTER_NAME": "Sample team", "GIT_COMMITTER_EMAIL": "team@localhost", "GIT_COMMITTER_DATE": when}
    fd, index = tempfile.mkstemp(prefix="seed-index.", suffix=".tmp", dir=path)
    os.close(fd)
    os.unlink(index)
    try:
        lines = []
        for rel, data in sorted(files.items()):
            blob = run_git(["hash-object", "-w", "--stdin"], git_dir=path, input=data).stdout.decode().strip()
            lines.append(f"100644 {blob}\t{rel}\n")
        env = {"GIT_INDEX_FILE": index}
        run_git(["update-index", "--add", "--index-info"], git_dir=path, input="".join(lines).encode(), env=env)
        tree = run_git(["write-tree"], git_dir=path, env=env).stdout.decode().strip()
    finally:
        Path(index).unlink(missing_ok=True)
    commit = run_git(["commit-tree", "--no-gpg-sign", "-m", message, "--", tree], git_dir=path,
                     env=identity).stdout.decode().strip()
    run_git(["update-ref", "--", f"refs/heads/{branch}", commit], git_dir=path)
    run_git(["symbolic-ref", "--", "HEAD", f"refs/heads/{branch}"], git_dir=path)
    return commit
