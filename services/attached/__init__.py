"""A window attached to a served workspace: the control client, finding the server, the served desk.

``RemoteCloud`` (``client.py``) is ``FakeCloud``'s driver surface over a served cloud's control API;
``find_server`` (``discovery.py``) finds the live server a workspace folder names in ``serve.json``;
``ServedDesk`` (``desk.py``) is the one desk (``services.desk``) acting through that API and kept
current by the server's change stream.
"""

from .client import ChangeBatch, ControlError, RemoteCloud, RemoteGate, RemoteGrant, RemoteRun, RemoteUser
from .desk import ServedDesk, StreamBook
from .discovery import AttachError, ServerInfo, find_server

__all__ = [
    "RemoteCloud",
    "RemoteRun",
    "RemoteUser",
    "RemoteGrant",
    "RemoteGate",
    "ChangeBatch",
    "ControlError",
    "ServedDesk",
    "StreamBook",
    "AttachError",
    "ServerInfo",
    "find_server",
]
