"""How long until the quiz's first screen is up, against a bare Textual app measured the same way.

    python tests/benchmarks/bench_startup.py                 # 6 rounds at 80x24
    python tests/benchmarks/bench_startup.py --rounds 10 --size 120x40

Each start runs in its own tmux session (a real terminal), from the command to the moment the first
screen's text is on it: `ddpfsdp quiz` with a fresh data directory whose bank cache was built by a
start before the rounds, and a bare app (Header, Static, Footer) in a fresh interpreter. Both run
with bytecode caching on, as an installed package has it (pip compiles on install; a shell with
PYTHONDONTWRITEBYTECODE set would otherwise recompile this package's modules at every start but not
textual's), and the start before the rounds writes the bytecode. Each round starts both,
alternating which goes first, so a neighbour's burst of load hits both. Load only ever adds time,
so each side's fastest start is the best estimate of its own cost: the ratio of the fastest starts
is held to the target (the quiz within 1.3x the bare app), and the median of the rounds' own ratios
is printed beside it. Not a pytest test; needs tmux.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_RATIO = 1.3
SOCKET = f"ddpfsdp-bench-{os.getpid()}"

BARE_APP = """
from textual.app import App
from textual.widgets import Footer, Header, Static


class Bare(App):
    def compose(self):
        yield Header()
        yield Static("bare app ready")
        yield Footer()


Bare().run()
"""


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=False).stdout


def time_to_text(command: str, marker: str, size: tuple[int, int], env: dict[str, str], limit_s: float = 60.0) -> float:
    """Seconds from starting `command` in a new tmux session until `marker` is on its screen."""
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    started = time.perf_counter()
    tmux("new-session", "-d", "-s", "bench", "-x", str(size[0]), "-y", str(size[1]),
         f"env -u PYTHONDONTWRITEBYTECODE {exports} {command}")
    try:
        while time.perf_counter() - started < limit_s:
            if marker in tmux("capture-pane", "-p", "-t", "bench"):
                return time.perf_counter() - started
            time.sleep(0.005)
        raise SystemExit(f"{command!r} did not show {marker!r} within {limit_s:.0f} s")
    finally:
        tmux("kill-session", "-t", "bench")
        time.sleep(0.2)  # let the killed app release the terminal before the next start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--size", default="80x24", help="terminal size, COLSxROWS")
    options = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is needed: apt-get install tmux")
    size = tuple(int(n) for n in options.size.split("x"))
    home = Path(tempfile.mkdtemp(prefix="ddpfsdp-bench-"))
    bare = home / "bare_app.py"
    bare.write_text(BARE_APP)
    env = {"DDPFSDP_HOME": str(home), "PATH": os.environ.get("PATH", "")}
    python = shlex.quote(sys.executable)
    starts = {
        # Home's summary is filled in after its rows: when it shows, the first screen is complete.
        "quiz": (f"{python} -m ddpfsdp.quiz.cli quiz", "answers so far"),
        "bare": (f"{python} {shlex.quote(str(bare))}", "bare app ready"),
    }
    try:
        for command, marker in starts.values():  # warm both: the bank cache, the bytecode, the disk cache
            time_to_text(command, marker, size, env)
        times: dict[str, list[float]] = {name: [] for name in starts}
        for index in range(options.rounds):
            order = list(starts) if index % 2 == 0 else list(reversed(starts))
            for name in order:
                times[name].append(time_to_text(*starts[name], size, env))
    finally:
        tmux("kill-server")
        shutil.rmtree(home, ignore_errors=True)
    for name, values in times.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name:5s} fastest {min(values):.3f} s, median {statistics.median(values):.3f} s  (each: {shown})")
    per_round = statistics.median(q / b for q, b in zip(times["quiz"], times["bare"]))
    ratio = min(times["quiz"]) / min(times["bare"])
    verdict = "within" if ratio <= TARGET_RATIO else "over"
    print(f"median of the rounds' ratios: {per_round:.2f}")
    print(f"ratio quiz / bare app, fastest starts: {ratio:.2f} (target <= {TARGET_RATIO}: {verdict})")
    if ratio > TARGET_RATIO:
        raise SystemExit(1)

if __name__ == "__main__":
    main()
