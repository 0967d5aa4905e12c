"""The bundle validator: each conformance error and each strict lint, as findings."""

from __future__ import annotations

import pytest

from services.knowledge.okf import validate_tree

ROOT_INDEX = b'---\nokf_version: "0.1"\n---\n# Base\n\n* [Node](node/index.md) - The node.\n'
GOOD = {
    "index.md": ROOT_INDEX,
    "log.md": b"# Log\n\n## 2026-11-30\n\n* **Creation**: base created.\n",
    "node/index.md": b"# Node\n\n* [Choice](choice.md) - Why we chose it.\n",
    "node/log.md": b"# Log\n",
    "node/choice.md": b"---\ntype: Decision\ntitle: Choice\ndescription: Why we chose it.\n---\n# Choice\n\nSee [node](/node/index.md).\n",
}


def codes(tree: dict[str, bytes], strict: bool = True) -> set[tuple[str, str]]:
    return {(f.path, f.code) for f in validate_tree(tree, strict=strict)}


def test_a_good_bundle_has_no_findings() -> None:
    assert validate_tree(GOOD) == []


@pytest.mark.parametrize("path, content, expected", [
    ("node/choice.md", b"# no frontmatter\n", ("node/choice.md", "frontmatter")),
    ("node/choice.md", b"---\ntitle: x\n---\n", ("node/choice.md", "type")),
    ("node/choice.md", b"---\ntype: \n---\n", ("node/choice.md", "type")),
    ("node/choice.md", b"---\ntype Decision\n---\n", ("node/choice.md", "frontmatter")),
    ("node/choice.md", b"---\ntype: Decision\n", ("node/choice.md", "frontmatter")),
    ("node/choice.md", b"\xff\xfe not utf-8", ("node/choice.md", "encoding")),
    ("node/index.md", b"---\ntype: Index\n---\n* [Choice](choice.md) - x\n", ("node/index.md", "reserved-type")),
    ("node/log.md", b"---\ntitle: log\n---\n", ("node/log.md", "reserved-frontmatter")),
    ("index.md", b'---\nokf_version: "0.2"\n---\n* [Node](node/index.md) - The node.\n', ("index.md", "reserved-frontmatter")),
])
def test_conformance_errors(path: str, content: bytes, expected: tuple[str, str]) -> None:
    tree = {**GOOD, path: content}
    assert expected in codes(tree)
    assert expected in codes(tree, strict=False)
    assert all(f.severity == "error" for f in validate_tree(tree, strict=False))


def test_strict_lints() -> None:
    tree = {**GOOD,
            "node/choice.md": b"---\ntype: Decision\n---\n# Choice\n\n[gone](/node/missing.md) [bare](/node/other)\n",
            "node/orphan.md": b"---\ntype: Lesson\ntitle: O\ndescription: d\n---\n",
            "node/index.md": b"# Node\n\n* [Choice](choice.md) - Why we chose it.\n* [Bad listing](choice.md)\n",
            "node/log.md": b"# Log\n\n* **Removal**: removed [old](/node/old.md): superseded\n"}
    found = codes(tree)
    assert ("node/choice.md", "lint-broken-link") in found
    assert ("node/choice.md", "lint-link-md") in found
    assert ("node/choice.md", "lint-title") in found
    assert ("node/choice.md", "lint-description") in found
    assert ("node/orphan.md", "lint-unreachable") in found
    assert ("node/index.md", "lint-listing") in found
    assert not any(path == "node/log.md" for path, _ in found)  # log history is exempt from broken links
    assert all(f.severity == "warning" for f in validate_tree(tree) if f.code.startswith("lint"))
    assert codes(tree, strict=False) == set()


def test_external_and_anchor_links_are_not_checked() -> None:
    tree = {**GOOD, "node/choice.md": GOOD["node/choice.md"] + b"[site](https://example.test/x) [here](#top)\n"}
    assert validate_tree(tree) == []
