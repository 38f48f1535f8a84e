"""The guides in docs/ hold together: every page is reachable from the README or docs/README.md, every
relative link and #anchor lands, and the result schema page names exactly the fields of the typed result.

The script that takes the README's picture writes elsewhere unless told to replace it.
"""

from __future__ import annotations

import runpy
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PICTURE_SCRIPT = ROOT / "tests" / "screenshots" / "readme_picture.py"


def test_the_picture_script_leaves_the_tracked_picture_alone_unless_told(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    script = runpy.run_path(str(PICTURE_SCRIPT))
    default = script["arguments"]([]).out
    assert default.is_relative_to(tmp_path) and not default.resolve().is_relative_to(ROOT)
    chosen = script["arguments"](["--out", str(script["README_PICTURE"])]).out
    assert chosen == script["README_PICTURE"] and script["README_PICTURE"].is_file()
