"""Honcho's filter language, parsed once and compiled to an SQLite ``WHERE`` clause.

The rules are those of the real server's ``src/utils/filter.py``:

- logical keys ``AND``, ``OR`` (lists of filters) and ``NOT`` (a list; each entry is negated
  and the negations are ANDed); nesting deeper than 5 is refused;
- every other key names a column the resource exposes (``FILTER_COLUMNS``); any other key is
  ``FilterError`` ("Column 'x' is not allowed to be filtered on or does not exist on Message"),
  answered 422 with ``{"detail": "..."}``;
- a column's value is a scalar (equality), ``"*"`` (no condition), ``null`` (IS NULL), a bare
  list (``in``), or an operator object with ``gte``, ``lte``, ``gt``, ``lt``, ``ne`` (IS DISTINCT
  FROM; ``{"ne": null}`` is IS NOT NULL), ``in`` (``[]`` matches nothing, ``"*"`` inside matches
  everything), ``contains`` and ``icontains`` (case-insensitive substring, text columns only);
  operands are checked against the column's type (text, boolean, datetime, number) and an
  operand of the wrong type is a 422, never a silent non-match;
- ``metadata`` takes an object: each key is either an operator object on that top-level key's
  value as text (numbers compared as numbers, booleans as ``true``/``false``) or a value the
  metadata must contain (JSONB containment: nested objects and arrays included); ``{"metadata":
  {"contains": {...}}}`` is containment too, and any other shape is a 422.

``extract_session_allowlist`` is the server's narrower recall-filter reading used by chat and
representation (only ``session_id``: an id, a list of ids, or ``{"in": [...]}``).

Datetimes are compared on a sortable text form (``sortable_time``) that the store keeps beside
every ``created_at``. A metadata key containing a double quote cannot be addressed in an SQLite
JSON path; such a condition matches nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Literal, TypeAlias

from ..honcho_wire import JSON

__all__ = ["FILTER_COLUMNS", "FilterError", "SQLValue", "Where", "compile_filter", "extract_session_allowlist",
           "sortable_time"]

ColumnType = Literal["text", "bool", "time", "number", "json"]
SQLValue: TypeAlias = "str | int | float | None"
"""A parameter of the compiled SQL."""

COMPARISON_OPERATORS = frozenset({"gte", "lte", "gt", "lt", "ne", "in", "contains", "icontains"})
NUMERIC_OPERATORS = frozenset({"gte", "lte", "gt", "lt", "ne"})
MAX_DEPTH = 5
MAX_SESSION_ALLOWLIST_ENTRIES = 1000
_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
LEVELS = frozenset({"explicit", "deductive", "inductive", "contradiction"})

FILTER_COLUMNS: dict[str, tuple[str, dict[str, tuple[str, ColumnType]]]] = {
    # resource: (the server's model name in messages, {public key: (SQL column, type)})
    "workspaces": ("Workspace", {"id": ("id", "text"), "created_at": ("ts", "time"),
                                 "metadata": ("metadata", "json")}),
    "peers": ("Peer", {"id": ("id", "text"), "created_at": ("ts", "time"), "workspace_id": ("workspace_id", "text"),
                       "metadata": ("metadata", "json")}),
    "sessions": ("Session", {"id": ("id", "text"), "created_at": ("ts", "time"), "is_active": ("is_active", "bool"),
                             "workspace_id": ("workspace_id", "text"), "metadata": ("metadata", "json")}),
    "messages": ("Message", {"workspace_id": ("workspace_id", "text"), "session_id": ("session_id", "text"),
                             "peer_id": ("peer_id", "text"), "token_count": ("token_count", "number"),
                             "created_at": ("ts", "time"), "metadata": ("metadata", "json")}),
    "conclusions": ("Document", {"session_id": ("session_id", "text"), "workspace_id": ("workspace_id", "text"),
                                 "observer_id": ("observer_id", "text"), "observed_id": ("observed_id", "text"),
                                 "metadata": ("metadata", "json"), "level": ("level", "text"),
                                 "created_at": ("ts", "time"), "id": ("id", "text")}),
}
"""The columns each resource's filters may name (the server's column mappings)."""


class FilterError(ValueError):
    """A filter the server would refuse with 422 ``{"detail": message}``."""


@dataclass
class Where:
    """A compiled filter: SQL text (``"1"`` when there is no condition) and its parameters."""

    sql: str = "1"
    params: list[SQLValue] = field(default_factory=list)


def sortable_time(moment: datetime) -> str:
    """The text form times are compared on: UTC, always with microseconds."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")


def parse_time(value: str) -> datetime | None:
    """An ISO 8601 time or date (naive means UTC), or None."""
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        try:
            moment = datetime.combine(date.fromisoformat(text), datetime.min.time())
        except ValueError:
            return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def compile_filter(filters: JSON, resource: str, *, alias: str = "") -> Where:
    """``filters`` (the request's ``filters`` object or None) as a WHERE clause for ``resource``."""
    if filters is None:
        return Where()
    if not isinstance(filters, dict):
        raise FilterError("Invalid filter configuration")
    model, columns = FILTER_COLUMNS[resource]
    params: list[SQLValue] = []
    sql = _conditions(filters, model, columns, alias, params, 0)
    return Where(sql or "1", params)


def _conditions(node: JSON, model: str, columns: dict[str, tuple[str, ColumnType]], alias: str,
                params: list[SQLValue], depth: int) -> str | None:
    if depth > MAX_DEPTH:
        raise FilterError(f"Filter nesting exceeds maximum depth of {MAX_DEPTH}")
    if not isinstance(node, dict):
        raise FilterError("Invalid filter configuration")
    parts: list[str] = []
    for op in ("AND", "OR", "NOT"):
        if op not in node:
            continue
        branches = node[op]
        if op == "NOT" and branches is None:
            raise FilterError("NOT operator cannot be None")
        if not isinstance(branches, list):
            raise FilterError(f"{op} operator must contain a list, got {_type_name(branches)}")
        subs = [s for s in (_conditions(b, model, columns, alias, params, depth + 1) for b in branches) if s]
        if subs and op == "AND":
            parts.append("(" + " AND ".join(subs) + ")")
        elif subs and op == "OR":
            parts.append("(" + " OR ".join(subs) + ")")
        elif subs:
            parts.append("(" + " AND ".join(f"(({s}) IS NOT 1)" for s in subs) + ")")
    for key, value in node.items():
        if key in ("AND", "OR", "NOT"):
            continue
        spec = columns.get(key)
        if spec is None:
            raise FilterError(f"Column '{key}' is not allowed to be filtered on or does not exist on {model}")
        condition = _field(key, spec[0] if not alias else f"{alias}.{spec[0]}", spec[1], value, params)
        if condition:
            parts.append(condition)
    return " AND ".join(parts) if parts else None


def _type_name(value: object) -> str:
    return {dict: "dict", list: "list", str: "str", int: "int", float: "float", bool: "bool"}.get(
        type(value), type(value).__name__)


def _field(key: str, column: str, kind: ColumnType, value: JSON, params: list[SQLValue]) -> str | None:
    if value == "*":
        return None
    if value is None:
        return f"{column} IS NULL"
    if kind == "json":
        return _json_field(key, column, value, params)
    if isinstance(value, list):
        value = {"in": value}
    if isinstance(value, dict):
        if not any(op in COMPARISON_OPERATORS for op in value):
            raise FilterError(f"Invalid filter for column '{key}': unsupported operator(s) {sorted(value)}. "
                              f"Expected one of {sorted(COMPARISON_OPERATORS)} or a scalar value.")
        return _comparisons(key, column, kind, value, params)
    params.append(_operand(key, kind, value))
    return f"{column} = ?"


def _comparisons(key: str, column: str, kind: ColumnType, ops: dict[str, JSON], params: list[SQLValue]) -> str | None:
    parts: list[str] = []
    for op, operand in ops.items():
        if op not in COMPARISON_OPERATORS:
            raise FilterError(f"Unsupported comparison operator: {op}")
        if operand == "*":
            continue
        if operand is None:
            if op != "ne":
                raise FilterError(f"Operator '{op}' does not accept null. Use {{\"ne\": null}} for a not-null "
                                  "check, or null on its own for a null check.")
            parts.append(f"{column} IS NOT NULL")
            continue
        if op == "in":
            if isinstance(operand, (str, bytes)) or not isinstance(operand, (list, tuple)):
                raise FilterError(f"Invalid value for 'in' operator: {operand!s}. Expected an iterable "
                                  f"(list, tuple, set), got {_type_name(operand)}")
            if "*" in operand:
                continue
            values = [_operand(key, kind, v, op) for v in operand]
            params.extend(values)
            parts.append(f"{column} IN ({', '.join('?' * len(values))})")
        elif op in ("contains", "icontains"):
            if kind != "text":
                raise FilterError(f"Operator '{op}' requires a text column, but '{key}' is "
                                  f"{ {'bool': 'bool', 'time': 'datetime', 'number': 'int'}[kind] }")
            params.append(f"%{_escape_like(str(operand))}%")
            parts.append(f"{column} LIKE ? ESCAPE '\\'")
        else:
            params.append(_operand(key, kind, operand, op))
            sql_op = {"gte": ">=", "lte": "<=", "gt": ">", "lt": "<", "ne": "IS NOT"}[op]
            parts.append(f"{column} {sql_op} ?")
    return " AND ".join(parts) if parts else None


def _operand(key: str, kind: ColumnType, value: JSON, op: str = "") -> SQLValue:
    if kind == "bool":
        if isinstance(value, bool):
            return int(value)
        raise FilterError(f"Invalid value for column '{key}': expected true or false, got {_type_name(value)}")
    if kind == "time":
        if isinstance(value, str):
            moment = parse_time(value)
            if moment is None:
                raise FilterError(f"Invalid datetime value: {value}")
            return sortable_time(moment)
        raise FilterError(f"Invalid value for column '{key}': expected a datetime, got {_type_name(value)}")
    if kind == "number":
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, (int, float)):
            return value
        try:
            return float(str(value))
        except ValueError:
            raise FilterError(f"Invalid numeric value: {value}. Expected a number, got {_type_name(value)}") from None
    if not isinstance(value, str):
        raise FilterError(f"Invalid value for column '{key}': expected a string, got {_type_name(value)}")
    if key == "level" and value not in LEVELS:
        raise FilterError(f"Invalid value for column 'level': {value!r}. Expected one of {sorted(LEVELS)}")
    return value


# -- metadata (JSONB in the server, JSON text here) ------------------------------------------

def _path(keys: Sequence[str]) -> str | None:
    if any('"' in k for k in keys):
        return None
    return "$" + "".join(f'."{k}"' for k in keys)


def _json_field(key: str, column: str, value: JSON, params: list[SQLValue]) -> str | None:
    if isinstance(value, dict):
        if any(op in COMPARISON_OPERATORS for op in value):
            parts: list[str] = []
            for op, operand in value.items():
                if op not in COMPARISON_OPERATORS:
                    raise FilterError(f"Unsupported comparison operator: {op}")
                if operand is None and op == "ne":
                    parts.append(f"{column} IS NOT NULL")
                elif op == "contains" and isinstance(operand, (dict, list)):
                    parts.append(_contains(column, [], operand, params))
                else:
                    raise FilterError(f"Invalid filter for column '{key}': a JSONB column takes an object, "
                                      "optionally under 'contains'")
            return " AND ".join(parts) if parts else None
        parts = []
        for name, wanted in value.items():
            name = str(name)
            if isinstance(wanted, dict) and any(op in COMPARISON_OPERATORS for op in wanted):
                for op, operand in wanted.items():
                    condition = _json_comparison(column, name, op, operand, params)
                    if condition:
                        parts.append(condition)
            elif wanted == "*":
                continue
            else:
                parts.append(_contains(column, [name], wanted, params))
        return " AND ".join(parts) if parts else None
    if isinstance(value, list):
        return _contains(column, [], value, params)
    raise FilterError(f"Invalid filter for column '{key}': a JSONB column takes an object, "
                      "optionally under 'contains'")


def _astext(column: str, path: str, params: list[SQLValue]) -> str:
    params.extend([path, path])
    return (f"(CASE json_type({column}, ?) WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN NULL "
            f"ELSE CAST(json_extract({column}, ?) AS TEXT) END)")


def _json_comparison(column: str, name: str, op: str, operand: JSON, params: list[SQLValue]) -> str | None:
    if op not in COMPARISON_OPERATORS:
        raise FilterError(f"Unsupported comparison operator: {op}")
    if operand == "*":
        return None
    path = _path([name])
    if path is None:
        return "0"
    if op in NUMERIC_OPERATORS:
        sql_op = {"gte": ">=", "lte": "<=", "gt": ">", "lt": "<", "ne": "!="}[op]
        number: float | None = None
        if isinstance(operand, bool):
            text = _astext(column, path, params)
            params.append(str(operand).lower())
            return f"{text} {sql_op} ?"
        if isinstance(operand, (int, float)):
            number = float(operand)
        elif operand is not None:
            try:
                number = float(str(operand))
            except ValueError:
                if not isinstance(operand, str):
                    raise FilterError(f"Invalid value for numeric operator: {operand}. Expected a number, "
                                      f"got {_type_name(operand)}") from None
        if number is None:
            if not isinstance(operand, str):  # None: any other non-number was refused above
                raise FilterError(f"Failed to process numeric cast for value '{operand}'")
            text = _astext(column, path, params)
            params.append(operand)
            return f"{text} {sql_op} ?"
        expr = _numeric(column, path, params)
        params.append(number)
        return f"{expr} {sql_op} ?"
    if op == "in":
        if isinstance(operand, (str, bytes)) or not isinstance(operand, (list, tuple)):
            raise FilterError(f"Invalid value for 'in' operator: {operand!s}. Expected an iterable "
                              f"(list, tuple, set), got {_type_name(operand)}")
        if "*" in operand:
            return None
        text = _astext(column, path, params)
        values = [_json_text(v) for v in operand]
        params.extend(values)
        return f"{text} IN ({', '.join('?' * len(values))})"
    text = _astext(column, path, params)
    params.append(f"%{_escape_like(str(operand))}%")
    return f"{text} LIKE ? ESCAPE '\\'"


def _numeric(column: str, path: str, params: list[SQLValue]) -> str:
    """The value at ``path`` as a number (numeric text too), else NULL (as the server's safe cast)."""
    params.extend([path] * 6)
    return (f"(CASE WHEN json_type({column}, ?) IN ('integer', 'real') THEN json_extract({column}, ?) "
            f"WHEN json_type({column}, ?) = 'text' AND trim(json_extract({column}, ?)) <> '' "
            f"AND trim(json_extract({column}, ?)) NOT GLOB '*[^0-9.eE+-]*' "
            f"THEN CAST(json_extract({column}, ?) AS REAL) END)")


def _json_text(value: JSON) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _contains(column: str, keys: list[str], wanted: JSON, params: list[SQLValue]) -> str:
    """JSONB containment (``column @> {...}``) of ``wanted`` at ``keys`` inside ``column``."""
    path = _path(keys)
    if path is None:
        return "0"
    if isinstance(wanted, dict):
        if not wanted:
            params.append(path)
            return f"json_type({column}, ?) = 'object'"
        return "(" + " AND ".join(_contains(column, [*keys, str(k)], v, params) for k, v in wanted.items()) + ")"
    if isinstance(wanted, list):
        params.append(path)
        parts = [f"json_type({column}, ?) = 'array'"]
        for item in wanted:
            params.append(path)
            parts.append(f"EXISTS (SELECT 1 FROM json_each({column}, ?) AS j WHERE {_atom_matches('j', item, params)})")
        return "(" + " AND ".join(parts) + ")"
    params.append(path)
    if wanted is None:
        return f"json_type({column}, ?) = 'null'"
    if isinstance(wanted, bool):
        return f"json_type({column}, ?) = '{'true' if wanted else 'false'}'"
    params.append(path)
    params.append(wanted)
    kinds = "('integer', 'real')" if isinstance(wanted, (int, float)) else "('text')"
    return f"(json_type({column}, ?) IN {kinds} AND json_extract({column}, ?) = ?)"


def _atom_matches(alias: str, item: JSON, params: list[SQLValue]) -> str:
    if isinstance(item, bool):
        return f"{alias}.type = '{'true' if item else 'false'}'"
    if item is None:
        return f"{alias}.type = 'null'"
    if isinstance(item, (int, float)):
        params.append(item)
        return f"({alias}.type IN ('integer', 'real') AND {alias}.atom = ?)"
    if isinstance(item, str):
        params.append(item)
        return f"({alias}.type = 'text' AND {alias}.atom = ?)"
    params.append(json.dumps(item, sort_keys=True))
    return f"(json({alias}.value) = json(?))"


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def extract_session_allowlist(filters: JSON, must_include: str | None = None) -> list[str] | None:
    """The chat/representation ``filters``: a session allowlist (None when no filters)."""
    if filters is None:
        return None
    if not isinstance(filters, dict):
        raise FilterError("Invalid filter configuration")
    unsupported = set(filters) - {"session_id"}
    if unsupported:
        raise FilterError(f"Unsupported filter key(s) for this endpoint: {sorted(unsupported)}. "
                          "Only 'session_id' is supported.")
    if "session_id" not in filters:
        raise FilterError("filters must contain 'session_id'")
    value = filters["session_id"]
    if isinstance(value, str):
        entries: list[JSON] = [value]
    elif isinstance(value, list):
        entries = list(value)
    elif isinstance(value, dict) and set(value) == {"in"} and isinstance(value["in"], list):
        entries = list(value["in"])
    else:
        raise FilterError('filters.session_id must be a session id, a list of session ids, or {"in": [...]}')
    if len(entries) > MAX_SESSION_ALLOWLIST_ENTRIES:
        raise FilterError(f"filters.session_id supports at most {MAX_SESSION_ALLOWLIST_ENTRIES} sessions per request")
    allow: list[str] = []
    for entry in entries:
        if not isinstance(entry, str) or not entry:
            raise FilterError("filters.session_id entries must be non-empty strings")
        if not _NAME.match(entry):
            raise FilterError(f"Invalid session id in filters.session_id: {entry!r}. Session ids match "
                              "^[a-zA-Z0-9_-]+$")
        if entry not in allow:
            allow.append(entry)
    if must_include is not None and must_include not in allow:
        raise FilterError("session_id must be included in filters.session_id")
    return allow
