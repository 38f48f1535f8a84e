"""The README's first picture: the quiz's evidence panel for one question, showing a real `demo compare` run.

    python tests/screenshots/readme_picture.py                # runs the demo (about 2 min on 2 CPU cores), then the app
    python tests/screenshots/readme_picture.py --saved        # uses the run already saved in DDPFSDP_HOME
    python tests/screenshots/readme_picture.py --out FILE     # writes the picture to FILE

Every figure in the picture is the measurement of the run this script starts (or the saved one), on the
machine it runs on: it is a screenshot of the real app over the real progress store, not a test fixture.
The snapshot tests' pictures (tests/__snapshots__/) are of fixture data; this one is of a run.

By default the picture goes to a new temporary folder, whose path the script prints, so taking it never
changes the repository. To replace the README's picture, look at the new one first, then write it over
the tracked file on purpose and commit it:

    python tests/screenshots/readme_picture.py --out tests/screenshots/evidence-compare-120x40.svg
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

QUESTION = "comm-fsdp-vs-ddp-volume"
DEMO = ["compare", "--model", "tiny"]  # the demo the question links, with its arguments as the bank gives them
SIZE = (120, 40)
README_PICTURE = Path(__file__).with_name("evidence-compare-120x40.svg")  # what README.md shows


async def _screenshot(out: Path) -> None:
    from ddpfsdp.quiz.app import make_app

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.start_session("practice", questions=[app.bank.questions[QUESTION]])
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        panel = app.screen.query_one("EvidencePanel")
        if not panel.has_class("-has-chart"):
            raise SystemExit(f"no saved `ddpfsdp demo {' '.join(DEMO)}` result to show: run without --saved")
        app.save_screenshot(filename=out.name, path=str(out.parent))


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; without --out, a path in a new temporary folder (the README's picture stays as it is)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saved", action="store_true", help="use the result already saved; run no demo")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"where the SVG goes (default: {README_PICTURE.name} in a new temporary folder; "
                             "tests/screenshots/evidence-compare-120x40.svg replaces the README's picture)")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="ddpfsdp-picture-")) / README_PICTURE.name
    return args


def main() -> None:
    args = arguments()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if not args.saved:
        subprocess.run([sys.executable, "-m", "ddpfsdp.quiz.cli", "demo", *DEMO], check=True)
    asyncio.run(_screenshot(args.out))
    print(f"wrote {args.out}")
    if args.out.resolve() != README_PICTURE.resolve():
        print(f"the README shows {README_PICTURE}; to replace it, look at the new picture, then run again with "
              f"--out {README_PICTURE} (or copy it there) and commit it")


if __name__ == "__main__":
    main()
