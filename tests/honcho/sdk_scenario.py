"""The v3 scenario the official Python SDK (``honcho-ai`` 2.7) runs against a served fake.

Every HTTP call the SDK's resources make, file by file (``honcho/client.py``, ``peer.py``,
``session.py``, ``conclusions.py``, ``mixins.py``; ``aio.py`` makes the same calls), and the
step below that reaches it (``ROUTES_REACHED`` is checked against the fake's ``calls``):

| SDK call | route | step |
|---|---|---|
| ``Honcho(...)`` first use, ``get_metadata`` | ``POST /v3/workspaces`` | workspace |
| ``set_metadata`` / ``set_configuration`` | ``PUT /v3/workspaces/{w}`` | workspace |
| ``workspaces()`` | ``POST /v3/workspaces/list`` | workspace |
| ``delete_workspace`` | ``DELETE /v3/workspaces/{w}`` | cleanup |
| ``search`` | ``POST /v3/workspaces/{w}/search`` | search |
| ``queue_status`` (client, session) | ``GET /v3/workspaces/{w}/queue/status`` | dream |
| ``schedule_dream`` | ``POST /v3/workspaces/{w}/schedule_dream`` | dream |
| ``peer(id, metadata=...)``, ``Peer.get_metadata`` | ``POST /v3/workspaces/{w}/peers`` | peers |
| ``peers(filters)`` | ``POST /v3/workspaces/{w}/peers/list`` | peers |
| ``Peer.set_metadata`` / ``set_configuration`` | ``PUT /v3/workspaces/{w}/peers/{p}`` | peers |
| ``Peer.sessions`` | ``POST /v3/workspaces/{w}/peers/{p}/sessions`` | peers |
| ``Peer.chat`` / ``chat_stream`` | ``POST /v3/workspaces/{w}/peers/{p}/chat`` | answers |
| ``Peer.representation``, ``Session.representation`` | ``POST .../peers/{p}/representation`` | answers |
| ``Peer.get_card`` / ``card`` | ``GET .../peers/{p}/card`` | answers |
| ``Peer.set_card`` | ``PUT .../peers/{p}/card`` | answers |
| ``Peer.context`` | ``GET .../peers/{p}/context`` | answers |
| ``Peer.search`` | ``POST .../peers/{p}/search`` | search |
| ``session(id, metadata=...)``, ``Session.get_metadata`` | ``POST /v3/workspaces/{w}/sessions`` | sessions |
| ``sessions(filters)`` | ``POST /v3/workspaces/{w}/sessions/list`` | sessions |
| ``Session.set_metadata`` | ``PUT /v3/workspaces/{w}/sessions/{s}`` | sessions |
| ``Session.delete`` | ``DELETE /v3/workspaces/{w}/sessions/{s}`` | cleanup |
| ``Session.clone`` | ``POST .../sessions/{s}/clone`` | messages |
| ``Session.add_peers`` | ``POST .../sessions/{s}/peers`` | members |
| ``Session.set_peers`` | ``PUT .../sessions/{s}/peers`` | members |
| ``Session.remove_peers`` | ``DELETE .../sessions/{s}/peers`` | members |
| ``Session.peers`` | ``GET .../sessions/{s}/peers`` | members |
| ``get_peer_configuration`` | ``GET .../sessions/{s}/peers/{p}/config`` | members |
| ``set_peer_configuration`` | ``PUT .../sessions/{s}/peers/{p}/config`` | members |
| ``Session.context`` | ``GET .../sessions/{s}/context`` | answers |
| ``Session.summaries`` | ``GET .../sessions/{s}/summaries`` | answers |
| ``Session.search`` | ``POST .../sessions/{s}/search`` | search |
| ``Session.add_messages`` | ``POST .../sessions/{s}/messages`` | messages |
| ``Session.messages(filters)`` | ``POST .../sessions/{s}/messages/list`` | messages |
| ``Session.upload_file`` | ``POST .../sessions/{s}/messages/upload`` | upload |
| ``Session.get_message`` | ``GET .../sessions/{s}/messages/{m}`` | messages |
| ``Session.update_message`` | ``PUT .../sessions/{s}/messages/{m}`` | messages |
| ``conclusions.create`` | ``POST /v3/workspaces/{w}/conclusions`` | conclusions |
| ``conclusions.list`` | ``POST /v3/workspaces/{w}/conclusions/list`` | conclusions |
| ``conclusions.query`` | ``POST /v3/workspaces/{w}/conclusions/query`` | conclusions |
| ``conclusions.delete`` | ``DELETE /v3/workspaces/{w}/conclusions/{c}`` | conclusions |

Calls the SDK has that the fake answers as the real server does, without a route of their own:
``Honcho.chat``/``chat_stream`` (``POST /v3/workspaces/{w}/chat``) and ``conclusions.get``
(``GET .../conclusions/{c}``) have no route in plastic-labs/honcho's ``src/routers`` (404 and 405
there and here). Not emulated: the scope routes (``/scopes...``), which this version of the SDK
calls but which need the server's scope peers; they answer 404. ``Session.upload_file`` (``POST
.../messages/upload``, multipart) reads text and JSON files, not PDFs (415 in the fake).
"""

from __future__ import annotations

from typing import Any

from honcho import Honcho
from honcho.api_types import SessionPeerConfig

WS = "contract"


def run_python_scenario(url: str, api_key: str, workspace: str = WS) -> dict[str, Any]:
    """Run every step through the official SDK; answers what each step saw (asserted by tests)."""
    honcho = Honcho(base_url=url, workspace_id=workspace, api_key=api_key, max_retries=0)
    seen: dict[str, Any] = {}
    # workspace
    honcho.set_metadata({"team": "bees"})
    seen["workspace_metadata"] = honcho.get_metadata()
    seen["workspaces"] = list(honcho.workspaces())
    # peers: metadata and configuration given on create are stored; update; list with filters
    alice = honcho.peer("alice", metadata={"role": "user", "level": 3}, configuration={"observe_me": True})
    seen["alice_metadata"] = alice.get_metadata()
    bob = honcho.peer("bob", metadata={"role": "bot", "level": 1})
    bob.set_metadata({"role": "bot", "level": 7})
    seen["bob_metadata"] = bob.get_metadata()
    seen["users"] = [p.id for p in honcho.peers(filters={"metadata": {"role": "user"}})]
    seen["levelled"] = sorted(p.id for p in honcho.peers(filters={"metadata": {"level": {"gte": 3}}}))
    # sessions: get-or-create with new metadata replaces it; update; list
    s1 = honcho.session("s1", metadata={"topic": "old"})
    s1 = honcho.session("s1", metadata={"topic": "bees"})
    seen["s1_metadata"] = s1.get_metadata()
    s1.set_metadata({"topic": "bees", "v": 2})
    seen["s1_updated"] = s1.get_metadata()
    honcho.session("s2", metadata={"topic": "tea"})
    seen["sessions_bees"] = [s.id for s in honcho.sessions(filters={"metadata": {"topic": "bees"}})]
    # members
    s1.add_peers([alice, bob])
    s1.set_peer_configuration(alice, SessionPeerConfig(observe_others=True))
    seen["alice_config"] = s1.get_peer_configuration(alice).observe_others
    s1.remove_peers([bob])
    seen["members_after_remove"] = sorted(p.id for p in s1.peers())
    s1.set_peers([alice, bob])
    seen["members_after_set"] = sorted(p.id for p in s1.peers())
    seen["alice_sessions"] = [s.id for s in alice.sessions()]
    # messages, including to a session not yet created
    made = s1.add_messages([alice.message("I keep bees on the roof", metadata={"n": 1}),
                            bob.message("Bees need water", metadata={"n": 2}),
                            alice.message("Honey comes in July", metadata={"n": 3})])
    seen["message_ids"] = [m.id for m in made]
    fresh = honcho.session("never-created")
    seen["never_created_messages"] = list(fresh.messages())
    honcho.session("late").add_messages([alice.message("first words")])
    seen["late_messages"] = [m.content for m in honcho.session("late").messages()]
    seen["filtered"] = [m.content for m in s1.messages(filters={"metadata": {"n": {"gte": 2}}})]
    one = s1.get_message(made[0].id)
    seen["got_message"] = one.content
    s1.update_message(made[0].id, metadata={"n": 1, "edited": True})
    seen["updated_message"] = s1.get_message(made[0].id).metadata
    seen["clone_count"] = len(list(s1.clone(message_id=made[1].id).messages()))
    # search: workspace, session, peer with filters
    seen["workspace_search"] = [m.content for m in honcho.search("bees")]
    seen["session_search"] = [m.content for m in s1.search("honey")]
    seen["peer_search"] = [m.content for m in alice.search("bees", filters={"session_id": "s1"})]
    # model-made answers (deterministic)
    alice.set_card(["Keeps bees", "Lives in town"])
    seen["card"] = alice.get_card()
    seen["representation"] = alice.representation()
    seen["session_representation"] = s1.representation(alice)
    seen["peer_context_card"] = alice.context().peer_card
    seen["chat"] = alice.chat("what about bees?")
    seen["chat_stream"] = "".join(alice.chat_stream("bees"))
    context = s1.context(tokens=1000, peer_target="alice")
    seen["context_messages"] = len(context.messages)
    seen["context_summary"] = context.summary.content if context.summary else None
    seen["summaries"] = s1.summaries().short_summary is not None
    # Honcho writes a session's first (short) summary at its 20th message: s1 holds 3, so 17 more
    last = s1.add_messages([alice.message(f"bee note {n}") for n in range(4, 21)])[-1]
    context = s1.context(tokens=1000)
    seen["context_summary_at_20"] = context.summary.content if context.summary else None
    at_20 = s1.summaries()
    seen["summaries_at_20"] = [at_20.short_summary is not None and at_20.short_summary.message_id == last.id,
                               at_20.long_summary is None]
    # conclusions
    created = alice.conclusions_of(alice).create([{"content": "likes bees", "session_id": "s1"}])
    seen["conclusions"] = [c.content for c in honcho.conclusions.list()]
    seen["queried"] = [c.content for c in alice.conclusions_of(alice).query("bees")]
    alice.conclusions_of(alice).delete(created[0].id)
    seen["conclusions_after_delete"] = [c.content for c in honcho.conclusions.list()]
    # dreams, queue
    honcho.schedule_dream(alice)
    seen["queue"] = honcho.queue_status().in_progress_work_units
    # a file upload, split into messages of at most 25,000 characters
    docs = honcho.session("docs")
    uploaded = docs.upload_file(("notes.txt", ("lorem ipsum " * 2_500).encode(), "text/plain"), peer=bob,
                                metadata={"src": "notes"})
    seen["upload"] = [len(m.content) for m in uploaded], uploaded[0].metadata
    # cleanup: delete sessions (202, then 404), then the workspace
    s2 = honcho.session("s2")
    s2.delete()
    seen["s2_after_delete"] = _status(lambda: s2.get_metadata())
    seen["workspace_delete_with_sessions"] = _status(lambda: honcho.delete_workspace(workspace))
    for session in list(honcho.sessions()):
        session.delete()
    seen["workspace_delete"] = _status(lambda: honcho.delete_workspace(workspace))
    seen["workspaces_after_delete"] = list(honcho.workspaces())
    return seen


def _status(call: Any) -> int:
    try:
        call()
    except Exception as exc:  # the SDK's own error classes carry the status
        return int(getattr(exc, "status_code", 0) or getattr(exc, "status", 0) or 0)
    return 200
