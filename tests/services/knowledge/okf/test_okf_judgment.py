"""The deterministic judge (promotion test by rule, reasons state the rule) and the judgment validator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.knowledge.okf import build_prompt, check_judgment, deterministic_judge_reply, init_directory_base, judge_documents
from services.knowledge.okf.tree import read_tree, tree_digest

from .conftest import DECISION, LIMIT, NODES, RESIDUE

H1, H2, H3 = "1" * 64, "2" * 64, "3" * 64


@pytest.fixture
def baseline(tmp_path: Path) -> dict[str, bytes]:
    init_directory_base(tmp_path / "team", "team-knowledge", NODES, at=1_800_000_000)
    return read_tree(tmp_path / "team")


def staging_for(baseline: dict[str, bytes]) -> dict:
    return {"team": {"root": "bases/team", "owned": ["expert"], "nodes": NODES, "baseline": tree_digest(baseline)}}


def input_doc(*items: tuple[str, str, str]) -> dict:
    return {"version": 1, "source": {"id": "s", "owner": "expert-id", "agent": "expert", "role": ""},
            "inputs": [{"id": i, "version": 1, "kind": "note", "name": n, "contentHash": "h", "text": t} for i, n, t in items],
            "owns": ["team/expert"], "reads": ["team/ops"]}


def test_judge_applies_rules_and_states_them(baseline) -> None:
    secret = "deploy key ghp_" + "a" * 36 + " because we decided so\n"
    doc = input_doc((H1, "retries.md", DECISION), (H2, "export.md", LIMIT), (H3, "todo.md", RESIDUE))
    doc["inputs"].append({"id": "4" * 64, "version": 1, "kind": "note", "name": "key.md", "contentHash": "h", "text": secret})
    doc["inputs"].append({"id": "5" * 64, "version": 1, "kind": "note", "name": "fn.md", "contentHash": "h",
                          "text": "This function returns a list of users.\n"})
    doc["inputs"].append({"id": "6" * 64, "version": 1, "kind": "note", "name": "meh.md", "contentHash": "h",
                          "text": "The sky was blue.\n"})
    judgment = judge_documents(doc, staging_for(baseline), {})
    by_input = {o["input"]: o for o in judgment["outcomes"]}
    assert by_input[H1]["verdict"] == "promote" and "rule 'decision'" in by_input[H1]["reason"]
    assert by_input[H1]["concepts"][0]["path"] == "expert/decisions/retries.md"
    assert by_input[H2]["verdict"] == "promote" and "rule 'limit'" in by_input[H2]["reason"]
    assert by_input[H2]["concepts"][0]["path"] == "expert/lessons/export.md"
    assert by_input[H3]["verdict"] == "drop" and "rule 'task-residue'" in by_input[H3]["reason"]
    assert by_input["4" * 64]["verdict"] == "drop" and "rule 'secret'" in by_input["4" * 64]["reason"]
    assert "ghp_" not in json.dumps(judgment)
    assert "rule 'code-description'" in by_input["5" * 64]["reason"]
    assert "rule 'no-durable-judgment'" in by_input["6" * 64]["reason"]
    check = check_judgment(json.dumps(judgment), inputs=[i["id"] for i in doc["inputs"]], staging=staging_for(baseline),
                           baselines={"team": baseline}, at=1_800_000_000)
    assert check.valid, check.problems


def test_merge_into_existing_concept_and_reply_is_deterministic(baseline) -> None:
    concepts = {"team": {"expert/decisions/retries.md": "---\ntype: Decision\ntitle: Retries\ndescription: d\n---\n# Retries\n"}}
    prompt = build_prompt(input_doc((H1, "retries.md", DECISION)), staging_for(baseline), concepts)
    reply = deterministic_judge_reply(prompt)
    assert reply == deterministic_judge_reply(prompt)
    [outcome] = json.loads(reply)["outcomes"]
    assert outcome["verdict"] == "merge" and outcome["reason"].startswith("merge by rule 'decision'")
    assert outcome["concepts"][0]["text"].startswith("---\ntype: Decision\ntitle: Retries")
    assert H1 in outcome["concepts"][0]["text"]


def test_no_owned_node_means_drop(baseline) -> None:
    staging = {"team": {**staging_for(baseline)["team"], "owned": []}}
    [outcome] = judge_documents(input_doc((H1, "retries.md", DECISION)), staging, {})["outcomes"]
    assert outcome["verdict"] == "drop" and "no-destination" in outcome["reason"]


def concept(path: str, cite: str = H1, body: str = "") -> dict:
    text = f"---\ntype: Decision\ntitle: T\ndescription: D.\n---\n# T\n\n{body}cites {cite}\n"
    return {"base": "team", "path": path, "text": text}


def judgment(*outcomes: dict, removals: list | None = None) -> str:
    return json.dumps({"version": 1, "exclusionsReviewed": True, "outcomes": list(outcomes), "removals": removals or []})


def promote(input_id: str = H1, path: str = "expert/decisions/t.md", **kw) -> dict:
    return {"input": input_id, "verdict": "promote", "reason": "rule", "concepts": [concept(path, input_id, **kw)]}


def drop(input_id: str) -> dict:
    return {"input": input_id, "verdict": "drop", "reason": "rule", "concepts": []}


CASES = [
    ("not json {", "not valid JSON"),
    (judgment(promote()), "no outcome for input " + H2),
    (judgment(promote(), drop(H2), drop(H2)), "duplicate outcome"),
    (judgment(promote(), drop(H2), drop(H3)), "is not an input of this run"),
    (judgment(promote(), {**drop(H2), "concepts": [concept("expert/x.md", H2)]}), "drop must have no concepts"),
    (judgment({**promote(), "concepts": []}, drop(H2)), "promote needs at least one concept"),
    (judgment({**promote(), "verdict": "keep"}, drop(H2)), "is not promote, merge or drop"),
    (judgment({**promote(), "reason": ""}, drop(H2)), "a reason is required"),
    (judgment(promote(path="expert/../ops/x.md"), drop(H2)), "escapes its node"),
    (judgment(promote(path="/expert/x.md"), drop(H2)), "not a relative POSIX path"),
    (judgment(promote(path="ops/x.md"), drop(H2)), "not inside an owned node"),
    (judgment(promote(path="expert/index.md"), drop(H2)), "navigation, not a concept"),
    (judgment(promote(path="expert/x.txt"), drop(H2)), "does not end in .md"),
    (judgment({**promote(), "concepts": [concept("expert/x.md", cite="nothing")]}, drop(H2)), "does not cite input"),
    (judgment(promote(body="-----BEGIN RSA PRIVATE KEY-----\n"), drop(H2)), "E_EXCLUSION"),
    (judgment(promote(body="sk_live_abcdefghijkl "), drop(H2)), "E_EXCLUSION"),
    (judgment({**promote(), "verdict": "merge"}, drop(H2)), "which does not exist"),
    (judgment(promote(), drop(H2), removals=[{"base": "team", "path": "expert/gone.md", "reason": "x"}]), "does not exist"),
    (judgment(promote(), drop(H2), removals=[{"base": "team", "path": "expert/decisions/t.md", "reason": ""}]), "removal reason"),
    (judgment(promote(), promote(H2, path="expert/decisions/t.md")), "two different texts"),
    (judgment(promote(body="[broken](/expert/missing.md)\n"), drop(H2)), "E_VALIDATION"),
    (json.dumps({"version": 1, "outcomes": []}), "exclusionsReviewed must be true"),
]


@pytest.mark.parametrize("text, message", CASES)
def test_each_rule_is_checked(baseline, text: str, message: str) -> None:
    check = check_judgment(text, inputs=[H1, H2], staging=staging_for(baseline), baselines={"team": baseline}, at=0)
    assert not check.valid
    assert any(message in p for p in check.problems), check.problems


def test_a_valid_judgment_builds_navigation(baseline) -> None:
    check = check_judgment(judgment(promote(), drop(H2)), inputs=[H1, H2], staging=staging_for(baseline),
                           baselines={"team": baseline}, at=1_800_000_000)
    assert check.valid, check.problems
    after = check.afters["team"]
    assert b"* [T](decisions/t.md) - D." in after["expert/index.md"]
    assert b"* **Harvest**: promote [T](/expert/decisions/t.md)" in after["expert/log.md"]
    assert after["expert/log.md"].index(b"Harvest") < after["expert/log.md"].index(b"Creation")  # newest first


def test_removal_with_reason_unlists_the_concept(baseline) -> None:
    first = check_judgment(judgment(promote(), drop(H2)), inputs=[H1, H2], staging=staging_for(baseline),
                           baselines={"team": baseline}, at=0).afters["team"]
    removal = [{"base": "team", "path": "expert/decisions/t.md", "reason": "Superseded by the new policy"}]
    check = check_judgment(judgment(drop(H3), removals=removal), inputs=[H3], staging=staging_for(first),
                           baselines={"team": first}, at=0)
    assert check.valid, check.problems
    after = check.afters["team"]
    assert "expert/decisions/t.md" not in after
    assert b"decisions/t.md" not in after["expert/index.md"]
    assert b"**Removal**" in after["expert/log.md"] and b"Superseded by the new policy" in after["expert/log.md"]


def test_local_links_in_notes_do_not_break_the_base(baseline) -> None:
    note = "We decided on SQS because of [the incident](../incidents/q.md); see [docs](https://example.test/sqs).\n"
    doc = input_doc((H1, "queues.md", note))
    judgment = judge_documents(doc, staging_for(baseline), {})
    text = judgment["outcomes"][0]["concepts"][0]["text"]
    assert "the incident (../incidents/q.md)" in text and "[docs](https://example.test/sqs)" in text
    check = check_judgment(json.dumps(judgment), inputs=[H1], staging=staging_for(baseline), baselines={"team": baseline}, at=0)
    assert check.valid, check.problems


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                       max_leaves=20)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(outcomes=st.lists(st.dictionaries(st.sampled_from(["input", "verdict", "reason", "concepts", "x"]), JSONISH,
                                         max_size=5), max_size=4),
       removals=JSONISH)
def test_any_judgment_shape_gives_problems_never_a_crash(baseline, outcomes, removals) -> None:
    text = json.dumps({"version": 1, "exclusionsReviewed": True, "outcomes": outcomes, "removals": removals})
    check = check_judgment(text, inputs=[H1], staging=staging_for(baseline), baselines={"team": baseline}, at=0)
    assert not check.valid  # none of these can cite H1 correctly, so every one breaks a rule
    assert all(p.split(":", 1)[0] in ("E_JUDGMENT", "E_EXCLUSION", "E_VALIDATION") for p in check.problems)
