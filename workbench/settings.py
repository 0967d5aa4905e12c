"""The operator's settings file: theme, default workspace, layout, read-only, and key remapping.

The file is TOML, in the platform's config folder (``platformdirs``: ``~/.config/workbench/config.toml``
on Linux) unless ``--config PATH`` names another::

    theme = "gruvbox"            # saved by the workbench whenever the theme is changed
    workspace = "~/agents/.workbench"
    layout = "single"            # or "dashboard"; leave out for the automatic choice
    read_only = false
    canvas_url = "postgresql+psycopg://ada@db.team.internal:5432/canvas"   # leave out for canvas.db
    honcho_url = "https://honcho.team.internal"   # where memory goes; leave out for the embedded fake
    honcho_workspace = "agents"   # the Honcho workspace id (the key only ever from $HONCHO_API_KEY)
    confirm_approve = true       # false: y approves a whole judgment without asking
    confirm_restore = true       # false: u restores a grant without asking
    confirm_quit = true          # false: q quits at once, even with work in flight

    [keymap]                     # binding id = keys (comma-separated); ids are listed by ?
    "workbench.runs.reply" = "ctrl+r"
    "workbench.quit" = "q,ctrl+q"

    [views]                      # saved filters (ctrl+s in a filter); the palette applies them
    waiting = { pane = "runs", filter = "status:waiting_on_user", default = true }
    "to judge" = { pane = "judgments", filter = "kind:harvest state:pending" }

A view's ``filter`` is checked with the pane's filter language when the file is read (an unknown
field is a ``problem`` naming the line); ``default = true`` applies it when the window opens (one
default per pane).

Reading never fails: a file that does not parse, or holds an unknown setting or a wrong type, or is
not a regular file, larger than ``MAX_CONFIG_BYTES`` or nested too deeply for the parser, gives
a ``problem`` naming the file and the line, and the workbench starts with every default (it never
half-applies a file it could not read). Writing (the theme) keeps every other line as written and
replaces the file atomically; a failure to write says why and leaves the old file whole.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from services.errors import ServiceError
from services.files import CorruptFileError, read_limited

if TYPE_CHECKING:
    from textual.theme import Theme

    from .base import WorkbenchBase

__all__ = [
    "LAYOUTS",
    "ConfigWriteError",
    "UserConfig",
    "apply_config",
    "default_config_path",
    "load_config",
    "save_setting",
    "save_view",
    "SavedView",
]

LAYOUTS = ("dashboard", "single")
"""The layouts ``layout =`` and ``--layout`` accept."""
KEYS = {"theme": str, "workspace": str, "layout": str, "read_only": bool, "keymap": dict, "canvas_url": str,
        "honcho_url": str, "honcho_workspace": str, "confirm_approve": bool, "confirm_restore": bool,
        "confirm_quit": bool, "views": dict}
"""Every top-level setting and its TOML type."""
MAX_CONFIG_BYTES = 1024 * 1024
"""The largest settings file read (a file that is larger, or is not a regular file, is a ``problem``)."""


class ConfigWriteError(ServiceError):
    """The settings file could not be written (the old file is left as it was)."""


@dataclass(frozen=True)
class SavedView:
    """A named filter of one pane (``[views]``)."""

    name: str
    pane: str
    filter: str
    default: bool = False
    """Applied to its pane when the window opens."""


@dataclass
class UserConfig:
    """The settings read from the file (defaults where the file is silent or bad)."""

    path: Path
    """The file these came from (and the theme is saved to)."""
    theme: str | None = None
    workspace: Path | None = None
    layout: str | None = None
    read_only: bool = False
    keymap: dict[str, str] = field(default_factory=dict)
    canvas_url: str | None = None
    """The canvas database URL (a team's PostgreSQL), or None for ``canvas.db`` in the workspace."""
    honcho_url: str | None = None
    """The Honcho server memory is delivered to, or None for the embedded fake."""
    honcho_workspace: str | None = None
    """The Honcho workspace id memory goes to, or None for the default."""
    confirm_approve: bool = True
    """Ask before ``y`` approves (and delivers) a whole judgment."""
    confirm_restore: bool = True
    """Ask before ``u`` restores a revoked grant."""
    confirm_quit: bool = True
    """Ask before ``q`` quits with work in flight (an action on its way, or a turn in progress on the
    embedded cloud, which lives in memory)."""
    views: dict[str, SavedView] = field(default_factory=dict)
    """The saved views by name (``[views]``)."""
    problem: str | None = None
    """Why the file was not used (names the file and the line), or None."""


def default_config_path() -> Path:
    """``config.toml`` in the platform's config folder for ``workbench``."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("workbench")) / "config.toml"


def _line_of(text: str, key: str) -> int:
    """The 1-based line where ``key`` is set (0 when not found)."""
    pattern = re.compile(rf"^\s*\"?{re.escape(key)}\"?\s*=")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            return number
    return 0


def _where(path: Path, line: int) -> str:
    return f"{path} line {line}" if line else str(path)


def load_config(path: Path | None = None) -> UserConfig:
    """The settings in ``path`` (default: the platform's file). Never raises; see ``problem``."""
    path = path or default_config_path()
    config = UserConfig(path=path)
    try:
        text = read_limited(path, MAX_CONFIG_BYTES).decode("utf-8")
    except FileNotFoundError:
        return config
    except (OSError, UnicodeDecodeError, CorruptFileError) as error:
        config.problem = f"{path}: cannot be read ({getattr(error, 'strerror', None) or error}); using the defaults"
        return config
    try:
        data = tomllib.loads(text)
    except RecursionError:  # tomllib follows nested arrays and tables by recursion
        config.problem = f"{path}: nested too deeply to read; using the defaults"
        return config
    except tomllib.TOMLDecodeError as error:
        match = re.search(r"line (\d+)", str(error))
        line = int(match.group(1)) if match else 0
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(error))
        config.problem = f"{_where(path, line)}: {reason.lower()}; using the defaults"
        return config
    problem = _check(data, text, path)
    if problem:
        config.problem = f"{problem}; using the defaults"
        return config
    config.theme = data.get("theme")
    config.workspace = Path(data["workspace"]).expanduser() if data.get("workspace") else None
    config.layout = data.get("layout")
    config.read_only = bool(data.get("read_only", False))
    config.keymap = dict(data.get("keymap", {}))
    config.canvas_url = data.get("canvas_url") or None
    config.honcho_url = data.get("honcho_url") or None
    config.honcho_workspace = data.get("honcho_workspace") or None
    for name in ("confirm_approve", "confirm_restore", "confirm_quit"):
        setattr(config, name, bool(data.get(name, True)))
    config.views = {name: SavedView(name, entry["pane"], entry["filter"], bool(entry.get("default", False)))
                    for name, entry in dict(data.get("views", {})).items()}
    return config


def _check(data: dict[str, object], text: str, path: Path) -> str | None:
    """The first problem with the parsed settings, naming the line, or None."""
    for key, value in data.items():
        line = _line_of(text, key) or _line_of(text, f"[{key}")
        if key not in KEYS:
            return f"{_where(path, line)}: unknown setting {key!r} (known: {', '.join(KEYS)})"
        expected = KEYS[key]
        if not isinstance(value, expected):
            return f"{_where(path, line)}: {key} must be a {_type_word(expected)}"
    if data.get("layout") not in (None, *LAYOUTS):
        return f"{_where(path, _line_of(text, 'layout'))}: layout must be one of {', '.join(LAYOUTS)}"
    for binding_id, keys in dict(data.get("keymap", {})).items():  # type: ignore[call-overload]
        if not isinstance(keys, str) or not keys.strip():
            line = _line_of(text, binding_id)
            return f"{_where(path, line)}: the keys for {binding_id!r} must be a non-empty string like \"ctrl+r\""
    return _check_views(data.get("views", {}), text, path)


VIEW_KEYS = {"pane": str, "filter": str, "default": bool}
"""What a saved view holds, and each one's TOML type."""


def _check_views(views: object, text: str, path: Path) -> str | None:
    """The first problem with ``[views]``: an entry that is not a table of ``VIEW_KEYS``, a pane that
    has no filter, a filter that does not parse for its pane, two defaults for one pane."""
    from services.desk.filters import PANE_FIELDS, FilterError, parse_filter

    defaults: dict[str, str] = {}
    for name, entry in dict(views).items():  # type: ignore[call-overload]
        where = _where(path, _line_of(text, name) or _line_of(text, f"[views.{name}"))
        if not isinstance(entry, dict):
            return f"{where}: the view {name!r} must be a table like {{ pane = \"runs\", filter = \"status:idle\" }}"
        for key, value in entry.items():
            if key not in VIEW_KEYS:
                return f"{where}: the view {name!r} has an unknown key {key!r} (known: {', '.join(VIEW_KEYS)})"
            if not isinstance(value, VIEW_KEYS[key]):
                return f"{where}: the view {name!r}'s {key} must be a {_type_word(VIEW_KEYS[key])}"
        if "pane" not in entry or "filter" not in entry:
            return f"{where}: the view {name!r} needs a pane and a filter"
        if entry["pane"] not in PANE_FIELDS:
            return f"{where}: the view {name!r}'s pane must be one of {', '.join(PANE_FIELDS)}"
        try:
            parse_filter(entry["filter"], entry["pane"])
        except FilterError as error:
            return f"{where}: the view {name!r}'s filter: {error}"
        if entry.get("default"):
            if entry["pane"] in defaults:
                return (f"{where}: the views {defaults[entry['pane']]!r} and {name!r} are both the default of "
                        f"{entry['pane']} (keep one default = true)")
            defaults[entry["pane"]] = name
    return None


def _type_word(kind: type) -> str:
    return {str: "quoted string", bool: "true or false", dict: "table"}[kind]


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def save_setting(path: Path, key: str, value: str | bool) -> None:
    """Set one top-level ``key`` in the file, keeping every other line; atomic. Raises ``ConfigWriteError``."""
    rendered = _toml_string(value) if isinstance(value, str) else ("true" if value else "false")
    try:
        text = read_limited(path, MAX_CONFIG_BYTES).decode("utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError, CorruptFileError) as error:
        raise ConfigWriteError(f"cannot save {key} to {path}: the file cannot be read ({error})") from error
    lines = text.splitlines()
    first_table = next((i for i, line in enumerate(lines) if line.lstrip().startswith("[")), len(lines))
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for index, line in enumerate(lines[:first_table]):
        if pattern.match(line):
            lines[index] = f"{key} = {rendered}"
            break
    else:
        lines.insert(first_table, f"{key} = {rendered}")
    _write_atomically(path, "\n".join(lines) + "\n", key)


def save_view(path: Path, view: SavedView) -> None:
    """Write ``view`` into the file's ``[views]`` table (replacing a view of that name), keeping every
    other line; when it is the default of its pane, the pane's other views stop being its default.
    Atomic. Raises ``ConfigWriteError`` (the file has a problem, or names the view as a
    ``[views.NAME]`` table, which is left for a hand edit)."""
    try:
        text = read_limited(path, MAX_CONFIG_BYTES).decode("utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError, CorruptFileError) as error:
        raise ConfigWriteError(f"cannot save the view to {path}: the file cannot be read ({error})") from error
    current = load_config(path)
    if current.problem:
        raise ConfigWriteError(f"cannot save the view: {current.problem.removesuffix('; using the defaults')}")
    lines = text.splitlines()
    if any(re.match(r"^\s*\[\s*views\s*\.", line) for line in lines):
        raise ConfigWriteError(f"cannot save the view: {path} writes views as [views.NAME] tables; "
                               "edit the file by hand, or write them as NAME = { pane = ..., filter = ... }")
    rewritten = {view.name: view}
    if view.default:
        for other in current.views.values():
            if other.pane == view.pane and other.default and other.name != view.name:
                rewritten[other.name] = SavedView(other.name, other.pane, other.filter, False)
    start = next((i for i, line in enumerate(lines) if re.match(r"^\s*\[\s*views\s*\]", line)), None)
    if start is None:
        if lines and lines[-1].strip():
            lines.append("")
        lines.append("[views]")
        start = len(lines) - 1
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    for name, saved in rewritten.items():
        entry = (f"{_toml_string(name)} = {{ pane = {_toml_string(saved.pane)}, filter = {_toml_string(saved.filter)}"
                 f"{', default = true' if saved.default else ''} }}")
        pattern = re.compile(rf"^\s*(?:{re.escape(_toml_string(name))}|{re.escape(name)})\s*=")
        for index in range(start + 1, end):
            if pattern.match(lines[index]):
                lines[index] = entry
                break
        else:
            while end > start + 1 and not lines[end - 1].strip():
                end -= 1
            lines.insert(end, entry)
            end += 1
    _write_atomically(path, "\n".join(lines) + "\n", "the view")
    fresh = load_config(path)
    if fresh.problem or view.name not in fresh.views:  # never leave a file the next start cannot read
        _write_atomically(path, text, "the view") if text else path.unlink(missing_ok=True)
        raise ConfigWriteError(f"cannot save the view {view.name!r}: {fresh.problem or 'it did not read back'}")


def _write_atomically(path: Path, body: str, what: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as error:
        try:
            temporary.unlink(missing_ok=True)
        except OSError:
            pass
        reason = error.strerror or str(error)
        raise ConfigWriteError(f"cannot save {what} to {path}: {reason}") from error


def apply_config(app: WorkbenchBase, config: UserConfig) -> None:
    """Apply ``config`` to a mounted App: say what was wrong with the file, set theme and keymap,
    and save the theme to the file whenever the operator changes it.

    A file with a problem is named in a toast, in the log and in a header badge
    (``app.settings_problem``) that stays until the file is fixed: the file is looked at again every
    second, and once it reads cleanly its theme and keys apply and the badge goes. A theme chosen
    meanwhile is not written into the broken file: a toast says so, the badge keeps saying it, and it
    is saved once the file is fixed."""
    from screens.text import notify_plain

    from .log import log_error

    pending: dict[str, str] = {}
    """The theme chosen while the file had a problem, saved once it is fixed."""

    def show_problem() -> None:
        waiting = f"theme {pending['theme']!r} not saved until it is fixed · " if pending else ""
        short = (config.problem or "").replace(str(config.path), config.path.name)  # the toast and log name the path
        app.settings_problem = f"{waiting}{short}" if config.problem else ""

    if config.problem:
        app.errors.append(config.problem)
        log_error(app, f"settings: {config.problem}", None)
        notify_plain(app, config.problem, title="Settings", severity="warning", timeout=12)
        show_problem()
        seen = _stamp(config.path)

        def recheck() -> None:
            nonlocal seen
            stamp = _stamp(config.path)
            if stamp == seen:
                return
            seen = stamp
            fresh = load_config(config.path)
            if fresh.problem:
                if fresh.problem != config.problem:
                    config.problem = fresh.problem
                    log_error(app, f"settings: {fresh.problem}", None)
                    show_problem()
                return
            timer.stop()
            for name in ("theme", "keymap", "confirm_approve", "confirm_restore", "confirm_quit", "views"):
                setattr(config, name, getattr(fresh, name))
            config.problem = None
            theme = pending.pop("theme", None)
            if theme is not None:
                save_theme(app.theme)
            elif config.theme and config.theme in app.available_themes:
                app.theme = config.theme
            if config.keymap:
                app.set_keymap(config.keymap)
            show_problem()
            if app.error_log is not None:
                app.error_log.info("settings: %s fixed, now in use", config.path)
            notify_plain(app, f"{config.path} is fixed: its settings are in use"
                         + (f" and the theme {theme!r} is saved in it." if theme else "."),
                         title="Settings", timeout=6)

        timer = app.set_interval(1.0, recheck)
    if config.theme:
        if config.theme in app.available_themes:
            app.theme = config.theme
        else:
            notify_plain(app, f"{config.path}: no theme named {config.theme!r}; using {app.theme}",
                         title="Settings", severity="warning", timeout=12)
    if config.keymap:
        app.set_keymap(config.keymap)

    def save_theme(name: str) -> None:
        try:
            save_setting(config.path, "theme", name)
        except ConfigWriteError as error:
            app.report_error(error)
        else:
            config.theme = name

    def theme_changed(theme: Theme) -> None:
        if config.problem:  # never rewrite a file the operator still has to fix: say so, and keep it
            pending["theme"] = theme.name
            show_problem()
            notify_plain(app, f"The theme {theme.name!r} is not saved: {config.path} has a problem to fix first. "
                         "It is saved once the file reads cleanly.", title="Settings", severity="warning", timeout=10)
            return
        save_theme(theme.name)

    app.theme_changed_signal.subscribe(app, theme_changed)


def _stamp(path: Path) -> tuple[float, int] | None:
    """The file's modification time and size (None when it cannot be read), to notice an edit."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime, status.st_size
