"""The house rule, checked mechanically: nothing below ``services`` imports Textual."""

import subprocess
import sys
import textwrap


def test_services_never_import_textual() -> None:
    code = textwrap.dedent(
        """
        import importlib, pkgutil, sys
        import services
        for info in pkgutil.walk_packages(services.__path__, "services."):
            importlib.import_module(info.name)
        bad = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "workbench", "screens"))
        print(",".join(bad))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
