"""Record a session once; replay it as a test, a demo and a bug report.

- ``start_recording(path, workspace)`` (``recorder.py``): a ``Recorder`` writes every operator action
  (at the desk's control seam), every call an app makes on an in-process cloud, every scripted
  failure and every insight decision, each with what the cloud showed right after it, into a
  versioned JSON Lines file (``format.py``: ``load_recording`` validates one).
- ``ReplaySession`` (``session.py``) plays a recording on a fresh workspace (embedded or served).
- ``export_test(recording)`` (``export.py``) writes a pytest module that replays it.
- ``replay(recording, folder)`` (``replay.py``) stops at the first step whose observation differs.
"""

from .export import export_test
from .format import FORMAT, VERSION, Recording, RecordingError, load_recording, parse_recording, scrub, scrub_state
from .observe import compare, observe
from .recorder import Recorder, RecordingControl, start_recording
from .replay import ReplayReport, describe, recorded_run_names, replay
from .session import Divergence, ReplaySession, StepOutcome, app_client, merged_state

__all__ = [
    "FORMAT",
    "VERSION",
    "Recording",
    "RecordingError",
    "load_recording",
    "parse_recording",
    "scrub",
    "scrub_state",
    "observe",
    "compare",
    "Recorder",
    "RecordingControl",
    "start_recording",
    "ReplaySession",
    "Divergence",
    "StepOutcome",
    "app_client",
    "merged_state",
    "ReplayReport",
    "replay",
    "describe",
    "recorded_run_names",
    "export_test",
]
