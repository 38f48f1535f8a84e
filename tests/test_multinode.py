"""The multi-node path for real: two torchrun agents on localhost as two nodes, c10d rendezvous."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from ddpfsdp.demos.launch import events
from ddpfsdp.demos.launch.hardware import free_port
from ddpfsdp.demos.launch.launcher import processes_with_env

MARKER = "DDPFSDP_TEST_MARKER"


@pytest.mark.dist
@pytest.mark.timeout(180)
def test_two_torchrun_agents_as_two_nodes_give_one_result():
    marker = uuid.uuid4().hex
    endpoint = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, **{MARKER: marker, "OMP_NUM_THREADS": "1"})
    node = [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes", "2", "--nproc-per-node", "1",
        "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", marker,
        "-m", "ddpfsdp.demos.worker", "--device", "cpu",
        "ddp", "--model", "tiny", "--steps", "6",
    ]  # fmt: skip
    agents = [
        subprocess.Popen(node, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)
    ]
    try:
        outputs = [agent.communicate(timeout=150) for agent in agents]
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
    for agent, (_, err) in zip(agents, outputs):
        assert agent.returncode == 0, err[-3000:]

    results = [
        event["result"]
        for out, _ in outputs
        for event in map(events.decode, out.splitlines())
        if event and event["event"] == "result"
    ]
    assert len(results) == 1, "exactly one node (the one holding rank 0) reports the result"
    result = results[0]
    assert result["config"]["world_size"] == 2
    assert len(result["memory"]["ranks"]) == 2
    assert result["comm"]["per_step"]["all_reduce"]["count"] > 0
    assert processes_with_env(MARKER, marker) == []
