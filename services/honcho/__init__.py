"""A Honcho v3 server fake: the memory service the workbench embeds and serves.

``FakeHonchoService`` answers the routes Honcho's official SDKs call (``honcho-ai``,
``@honcho-ai/sdk``) with the real server's validation, limits, status codes and error bodies;
``FakeHonchoTransport`` puts it behind an httpx transport, and ``services.served.honcho`` serves it
over HTTP (under a served workspace's ``/honcho``, or on a port of its own). Its parts:

- ``service``: the route table, the checks and the answers, faults for tests;
- ``store``: the state in SQLite, one transaction per request;
- ``filters``: Honcho's filter language (``AND``/``OR``/``NOT``, comparisons, metadata paths);
- ``answers``: what a model makes in real Honcho (representation, card, summaries, context,
  chat), made by rule from the stored messages and scriptable with ``respond``;
- ``upload``: ``messages/upload`` (text and JSON files).

The shapes it answers are typed in ``services.honcho_wire``, shared with the clients. It is a
peer of the crouter fake (``services.cloud``): the memory outbox is one of its clients, and
reaches it only through ``HonchoClient`` over its transport or over HTTP, as an app would.
"""

from .service import HONCHO_ROUTES, FakeHonchoService, FakeHonchoTransport
from .store import FakeHonchoStateError

__all__ = ["FakeHonchoService", "FakeHonchoTransport", "FakeHonchoStateError", "HONCHO_ROUTES"]
