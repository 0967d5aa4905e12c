"""The README and the guide run as written: every fenced ``python``, ``sh``/``bash``/``console`` and ``toml`` block.

The pages are read in the order a reader meets them: the README, then the guide's pages in the
order of ``nav`` in ``mkdocs.yml``.

A block whose info string holds ``example`` is an illustration: it is only parsed (``compile`` for
Python, ``bash -n`` for shell, ``tomllib`` for TOML). Every other block runs as a reader copies it,
in that order, from one folder, the way a newcomer goes down the page:

- against one ``workbench serve`` the test starts on a free port, on ``./.workbench`` of that folder
  (``$WORKBENCH_URL`` and ``$WORKBENCH_WORKSPACE`` name it; the virtual environment's ``bin`` is on
  ``PATH``, so ``workbench`` and ``python`` are the project's);
- Python blocks as complete scripts in a subprocess;
- shell blocks with ``set -e`` (a ``console`` block runs its ``$ `` lines);
- TOML blocks through the settings parser (``workbench.settings.load_config``), which must find no problem.

A block that would start the interactive app, install packages or serve forever must say
``example``; ``test_blocks_that_cannot_run_here_say_so`` names any that do not.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from workbench.settings import load_config

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MKDOCS = ROOT / "mkdocs.yml"
NAV_PAGE = re.compile(r"^\s*-\s+[^:#]+:\s*(?P<page>\S+\.md)\s*$", re.M)


def guide_pages() -> list[Path]:
    """The README, then every page of the guide in ``nav`` order (``mkdocs.yml``)."""
    nav = MKDOCS.read_text(encoding="utf-8").split("\nnav:", 1)[1]
    return [README, *(ROOT / "docs" / m["page"] for m in NAV_PAGE.finditer(nav))]
PYTHON = ("python", "py", "python3")
SHELL = ("sh", "bash", "shell", "console")
TOML = ("toml",)
BLOCK_TIMEOUT_S = 180
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
                   re.M | re.S)


@dataclass(frozen=True)
class Block:
    """One fenced block of the README or of a page of the guide."""

    lang: str
    words: tuple[str, ...]
    code: str
    line: int
    page: str = "README.md"

    @property
    def example(self) -> bool:
        return "example" in self.words

    @property
    def kind(self) -> str | None:
        return ("python" if self.lang in PYTHON else "shell" if self.lang in SHELL
                else "toml" if self.lang in TOML else None)

    @property
    def script(self) -> str:
        """What runs: the code, or a ``console`` block's ``$ `` lines."""
        if self.lang != "console":
            return self.code
        return "".join(line[2:] + "\n" for line in self.code.splitlines() if line.startswith("$ "))

    def __str__(self) -> str:
        return f"{self.page} line {self.line} ({' '.join((self.lang, *self.words))})"

    @property
    def stem(self) -> str:
        """A name for the block's script file: its page and line."""
        return f"{Path(self.page).stem}_line_{self.line}"


def readme_blocks(text: str, page: str = "README.md") -> list[Block]:
    """Every fenced block in ``text`` with a language we run, in order."""
    blocks = []
    for match in FENCE.finditer(text):
        info = match["info"].strip().replace(",", " ").split()
        lang = info[0].lower().lstrip("{.").rstrip("}") if info else ""
        indent = match["indent"]
        body = "".join(line[len(indent):] if line.startswith(indent) else line
                       for line in match["body"].splitlines(keepends=True))
        block = Block(lang, tuple(w.lower() for w in info[1:]), body, text.count("\n", 0, match.start()) + 1, page)
        if block.kind is not None:
            blocks.append(block)
    return blocks


PAGES = guide_pages()
BLOCKS = [block for page in PAGES
          for block in readme_blocks(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))]


def test_every_page_of_the_guide_is_read() -> None:
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert pages == {p.name for p in PAGES[1:]}, "every page in docs/ is in mkdocs.yml's nav, and only those"


def test_the_readme_is_short() -> None:
    assert README.read_text(encoding="utf-8").count("\n") < 150


def _parse(block: Block) -> None:
    if block.kind == "python":
        compile(block.code, str(block), "exec")
    elif block.kind == "toml":
        tomllib.loads(block.code)
    else:
        checked = subprocess.run(["bash", "-n"], input=block.script, text=True, capture_output=True, timeout=30)
        assert checked.returncode == 0, f"{block}: {checked.stderr}"


def test_the_readme_has_blocks_of_each_kind_that_run() -> None:
    runnable = {b.kind for b in BLOCKS if not b.example}
    assert runnable == {"python", "shell", "toml"}, runnable


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_every_block_parses(block: Block) -> None:
    _parse(block)


INTERACTIVE_SUBCOMMANDS = {"serve", "connect", "demo", "export-test", "replay"}
"""``workbench`` subcommands; anything else after ``workbench`` (or nothing) opens the window."""


def _cannot_run_here(script: str) -> str | None:
    """Why a shell script would open the window, install packages or not return; None when it returns."""
    for raw in script.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        for index, word in enumerate(words):
            if word in ("pip", "pip3") or (word == "-m" and words[index + 1:index + 2] == ["pip"]):
                return f"installs packages: {line}"
            if word == "workbench" or (word == "-m" and words[index + 1:index + 2] == ["workbench"]):
                rest = words[index + (1 if word == "workbench" else 2):]
                rest = [w for w in rest if w not in ("&&", ";", "|")]
                if any(w in ("--version", "--help", "-h") for w in rest):
                    break
                command = next((w for w in rest if not w.startswith("-")), None)
                if command not in INTERACTIVE_SUBCOMMANDS and not any(w in ("--export",) for w in rest):
                    return f"opens the interactive window: {line}"
                if command == "demo" and "--headless" not in rest:
                    return f"plays the demo in the terminal: {line}"
                if command == "serve" and "--export" not in rest:
                    return f"serves until stopped: {line}"
                break
    return None


def test_blocks_that_cannot_run_here_say_so() -> None:
    unmarked = [f"{b}: {why}" for b in BLOCKS if b.kind == "shell" and not b.example
                and (why := _cannot_run_here(b.script))]
    assert not unmarked, "mark these blocks `example` (or make them return):\n" + "\n".join(unmarked)


def test_the_readme_finder_reads_fences_and_info_strings() -> None:
    text = ("x\n```python example\nawait f()\n```\n"
            "  ```sh\n  echo hi\n  ```\n```\nplain\n```\n```console\n$ echo hi\nhi\n```\n")
    blocks = readme_blocks(text)
    assert [(b.lang, b.example, b.line) for b in blocks] == [("python", True, 2), ("sh", False, 5),
                                                             ("console", False, 11)]
    assert blocks[1].code == "echo hi\n" and blocks[2].script == "echo hi\n"
    assert _cannot_run_here("workbench   # opens it") and _cannot_run_here("python3 -m pip install .")
    assert _cannot_run_here("workbench serve --port 0") and _cannot_run_here("workbench demo")
    assert _cannot_run_here("workbench connect user:o1 --key k.pem") is None
    assert _cannot_run_here("workbench --version") is None


# -- running them, as a reader ----------------------------------------------------------------


@dataclass
class Reader:
    """The reader's folder, environment and server."""

    folder: Path
    env: dict[str, str]
    url: str


def _reader_env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WORKBENCH_", "HONCHO_", "PYTEST_")) and k not in ("PGPASSWORD",)}
    venv_bin = str(Path(sys.executable).parent)
    env.update(
        PATH=venv_bin + os.pathsep + env.get("PATH", ""),
        PYTHONPATH=str(ROOT),  # the checkout under test, as an editable install of it would give
        PYTHONUNBUFFERED="1",
        XDG_CONFIG_HOME=str(folder / ".config"),  # the reader's own settings, not the machine's
        XDG_DATA_HOME=str(folder / ".data"),
        VIRTUAL_ENV=str(Path(sys.executable).parent.parent),
    )
    return env


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reader]:
    """A folder with ``workbench serve`` running on ``./.workbench`` on a free port."""
    folder = tmp_path_factory.mktemp("reader")
    env = _reader_env(folder)
    workbench = Path(sys.executable).parent / "workbench"
    command = [str(workbench)] if workbench.exists() else [sys.executable, "-m", "workbench"]
    server = subprocess.Popen([*command, "serve", "--workspace", ".workbench", "--port", "0"], cwd=folder, env=env,
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("serving http://"), (line, server.stderr.read() if server.poll() is not None else "")
        url = line.split(" ", 1)[1].strip()
        env.update(WORKBENCH_URL=url, WORKBENCH_WORKSPACE=str(folder / ".workbench"))
        yield Reader(folder, env, url)
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(15)


def _run(block: Block, reader: Reader) -> subprocess.CompletedProcess[str]:
    if block.kind == "python":
        script = reader.folder / f"{block.stem}.py"
        script.write_text(block.code, encoding="utf-8")
        args = [sys.executable, str(script)]
    else:
        script = reader.folder / f"{block.stem}.sh"
        script.write_text("set -e\n" + block.script, encoding="utf-8")
        args = ["bash", str(script)]
    return subprocess.run(args, cwd=reader.folder, env=reader.env, text=True, capture_output=True,
                          timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL)


@pytest.mark.long
def test_every_block_runs_as_a_reader_copies_it(reader: Reader) -> None:
    failures = []
    ran = 0
    for block in BLOCKS:
        if block.example:
            continue
        ran += 1
        if block.kind == "toml":
            path = reader.folder / f"{block.stem}.toml"
            path.write_text(block.code, encoding="utf-8")
            problem = load_config(path).problem
            if problem:
                failures.append(f"{block}: the settings parser says: {problem}")
            continue
        why = _cannot_run_here(block.script) if block.kind == "shell" else None
        if why:  # never install into the test's environment or open a window here
            failures.append(f"{block}: not run, it {why}; mark it `example`")
            continue
        try:
            done = _run(block, reader)
        except subprocess.TimeoutExpired:
            failures.append(f"{block}: still running after {BLOCK_TIMEOUT_S} s")
            continue
        if done.returncode != 0:
            failures.append(f"{block}: exit {done.returncode}\n--- stdout\n{done.stdout[-3000:]}\n"
                            f"--- stderr\n{done.stderr[-3000:]}")
    assert ran > 0
    assert not failures, "\n\n".join(failures)
