"""Kata runs for the tests, without the launcher: ranks forked from one server that imported torch once.

    ranks = KataRanks(folder)                      # the server: a fresh interpreter, torch imported once
    results = ranks.run([("ring-allreduce", path), ...], nprocs=3, deadline_s=1)
    [[a], [b]] = ranks.run_at_once([[("ring-allreduce", p1)], [("all-to-all", p2)]], nprocs=3)   # at once

Each `run` forks `nprocs` ranks from the server; they join a gloo group and judge each (kata, file) in turn
with the rank side's own `judge_on_rank`, rank 0 writing every result. A run that cannot end cleanly (a
deadlock, an exception, an endless loop) ends its ranks as a launch does: rank 0 writes the result, the others
leave on the board's verdict, and the server kills any rank still running a moment after rank 0 has gone. The
server is the agent's way of starting ranks (fork from a process that ran no tensor op), serving many runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

SERVER = r'''
import json, os, signal, sys, time
from dataclasses import dataclass
from pathlib import Path
import torch, torch.distributed as dist
for module in sys.argv[2:]:
    __import__(module)
from ddpfsdp.demos.katas.rank import judge_on_rank
from ddpfsdp.demos.launch.hardware import free_port

folder = Path(sys.argv[1])


@dataclass
class Ctx:
    rank: int
    world_size: int
    device: object
    backend: str = "gloo"

    @property
    def is_main(self):
        return self.rank == 0

    @property
    def placement(self):
        from ddpfsdp.demos.base.placement import Placement

        return Placement("cpu", self.world_size)


def rank_main(rank, nprocs, port, jobs, deadline_s, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(nprocs),
                      LOCAL_RANK=str(rank), OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    ctx = Ctx(rank, nprocs, torch.device("cpu"))
    for index, (kata, path) in enumerate(jobs):
        def publish(ctx, result, index=index):
            document = result.to_json() if hasattr(result, "to_json") else result
            (out / f"{index}.json").write_text(json.dumps(document))

        def leave(ctx):
            os._exit(0)

        started = time.perf_counter()
        result = judge_on_rank(ctx, kata, Path(path), deadline_s, 0, f"job{index}", publish, leave)
        if rank == 0:
            document = result.to_json()
            document["test_wall_s"] = time.perf_counter() - started
            publish(ctx, document)
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)


def start(request):
    """Fork the ranks of one request; {pid: rank}."""
    port = free_port()
    pids = {}
    for rank in range(request["nprocs"]):
        pid = os.fork()
        if pid == 0:
            try:
                rank_main(rank, request["nprocs"], port, request["jobs"], request["deadline_s"], Path(request["out"]))
            except BaseException:
                import traceback
                traceback.print_exc()
            finally:
                os._exit(1)
        pids[pid] = rank
    return pids


# Each line is a list of requests, run at once: their ranks' waits on a deadline overlap.
for line in sys.stdin:
    requests = json.loads(line)
    groups = [start(request) for request in requests]
    rank0_gone = [None] * len(groups)
    deadline = time.monotonic() + max(request["limit_s"] for request in requests)
    while any(groups):
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            for index, pids in enumerate(groups):
                if pids.pop(pid, None) == 0:
                    rank0_gone[index] = time.monotonic()
            continue
        for index, pids in enumerate(groups):
            if pids and ((rank0_gone[index] and time.monotonic() - rank0_gone[index] > 0.5) or time.monotonic() > deadline):
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                for pid in list(pids):
                    os.waitpid(pid, 0)
                pids.clear()
        time.sleep(0.01)
    print(json.dumps({"done": True}), flush=True)
'''

PRELOAD = ("torch._dynamo", "torch.distributed.pipelining.schedules", "torch.utils.data.distributed",
           "ddpfsdp.demos.katas.comm", "ddpfsdp.demos.katas.rings", "ddpfsdp.demos.katas.sampler",
           "ddpfsdp.demos.katas.buckets", "ddpfsdp.demos.katas.memory", "ddpfsdp.demos.katas.pipeline_order",
           "ddpfsdp.demos.katas.accumulation", "ddpfsdp.demos.katas.zero", "ddpfsdp.demos.katas.fsdp_unit",
           "ddpfsdp.demos.katas.megatron", "ddpfsdp.demos.result.schema")


class KataRanks:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.runs = 0
        self.process = subprocess.Popen([sys.executable, "-c", SERVER, str(folder), *PRELOAD], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, bufsize=1)

    def run(self, jobs: list[tuple[str, Path]], nprocs: int, deadline_s: float = 1.0,
            limit_s: float = 90.0) -> list[dict | None]:
        """Each job's result (None where the ranks ended before reaching it), with `test_wall_s` on a clean one."""
        return self.run_at_once([jobs], nprocs, deadline_s, limit_s)[0]

    def run_at_once(self, groups: list[list[tuple[str, Path]]], nprocs: int, deadline_s: float = 1.0,
                    limit_s: float = 90.0) -> list[list[dict | None]]:
        """Several runs at once, each on ranks of its own: their deadlines pass together."""
        requests, folders = [], []
        for jobs in groups:
            self.runs += 1
            out = self.folder / f"run{self.runs}"
            out.mkdir()
            folders.append(out)
            requests.append({"jobs": [[kata, str(path)] for kata, path in jobs], "nprocs": nprocs,
                             "deadline_s": deadline_s, "limit_s": limit_s, "out": str(out)})
        assert self.process.stdin is not None and self.process.stdout is not None
        started = time.perf_counter()
        self.process.stdin.write(json.dumps(requests) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, "the kata rank server died"
        wall_s = time.perf_counter() - started
        found = []
        for jobs, out in zip(groups, folders):
            results = []
            for index in range(len(jobs)):
                path = out / f"{index}.json"
                result = json.loads(path.read_text()) if path.exists() else None
                if result is not None:
                    result.setdefault("test_wall_s", wall_s)
                results.append(result)
            found.append(results)
        return found

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # the server's loop ends; its ranks have all been reaped
            try:
                self.process.wait(0.5)
            except subprocess.TimeoutExpired:  # an interpreter that imported torch can take seconds to tear down
                self.process.kill()
                self.process.wait()


def planted(folder: Path) -> list[tuple[str, str, str, Path]]:
    """(kata, check meant to fail, what is wrong, path) of every planted wrong solution."""
    found = []
    for path in sorted(folder.glob("*.py")):
        kata, check, what = path.stem.split("__")
        found.append((kata, check, what, path))
    return found


def check_of(result: dict, name: str) -> dict:
    return next(c for c in result["checks"] if c["name"] == name)


def pids_alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
    return alive
