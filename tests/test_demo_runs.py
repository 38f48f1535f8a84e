"""The session's shared demo launches (tests/demo_runs.py): one launch per configuration, whichever
pytest-xdist worker asks first, and the same finished run for every worker that asks after it.

A worker is a process with its own `DemoRuns` over the session's one folder; here each is a
`DemoRuns` of its own over a temporary folder, and the launch is counted instead of started."""

from __future__ import annotations

import threading
import time

from demo_runs import DemoRuns, FinishedRun


def _finished(demo: str, args: tuple[str, ...], procs: int) -> FinishedRun:
    return FinishedRun(demo=demo, args=args, procs=procs, events=[{"event": "log", "message": "hello"}],
                       result={"demo": demo, "loss": [2.5, 1.25]}, error=None, returncode=0, ok=True,
                       leftover_pids=[], stderr_tail=[], logs=["hello"])


def _counting_launches(monkeypatch, seconds: float = 0.0) -> list[tuple]:
    launched = []

    def launch(demo, args, procs, trace_file):
        launched.append((demo, args, procs))
        time.sleep(seconds)
        return _finished(demo, args, procs)

    monkeypatch.setattr(DemoRuns, "_launch", staticmethod(launch))
    return launched


def test_a_second_worker_reads_the_first_workers_launch(tmp_path, monkeypatch):
    launched = _counting_launches(monkeypatch)
    first = DemoRuns(tmp_path)("fsdp", "--model", "tiny")
    second = DemoRuns(tmp_path)("fsdp", "--model", "tiny")
    assert launched == [("fsdp", ("--model", "tiny"), 2)]
    assert second == first
    assert second.args == ("--model", "tiny") and second.result == {"demo": "fsdp", "loss": [2.5, 1.25]}


def test_another_configuration_is_a_launch_of_its_own(tmp_path, monkeypatch):
    launched = _counting_launches(monkeypatch)
    runs = DemoRuns(tmp_path)
    runs("fsdp", "--model", "tiny")
    runs("fsdp", "--model", "tiny", procs=4)
    DemoRuns(tmp_path)("fsdp", "--model", "small")
    assert launched == [("fsdp", ("--model", "tiny"), 2), ("fsdp", ("--model", "tiny"), 4),
                        ("fsdp", ("--model", "small"), 2)]


def test_workers_asking_at_once_launch_once(tmp_path, monkeypatch):
    launched = _counting_launches(monkeypatch, seconds=0.3)
    got = []
    workers = [threading.Thread(target=lambda: got.append(DemoRuns(tmp_path)("ddp", "--steps", "6")))
               for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=10)
    assert launched == [("ddp", ("--steps", "6"), 2)]
    assert len(got) == 3 and got[0] == got[1] == got[2]
