"""Every kata's reference solution on CUDA GPUs, through `ddpfsdp kata check`: one item of the GPU check.

    python tests/benchmarks/gpu_kata_check.py OUT.json --gpus 4

With two GPUs or more each kata runs on --gpus min(N, 4) over NCCL with CUDA tensors, and every check
must pass. On one GPU the ranks share it over gloo with CUDA tensors: a kata written with point-to-point
messages must be refused before launch (gloo hands a CUDA tensor's memory to the network as host memory),
the others run on 2 ranks sharing the GPU and must pass. Writes one JSON object to OUT.json: per kata the
exit status, the seconds, and the checks that did not pass (or the refusal's words).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from ddpfsdp.demos.katas.catalog import KATAS

REFUSAL = "cannot send CUDA tensors point to point"


def expected(p2p: bool, gpus: int) -> str:
    """What a kata's check must do here: "pass", or be "refused" before launch."""
    return "refused" if p2p and gpus < 2 else "pass"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--gpus", type=int, required=True, help="CUDA GPUs visible")
    options = parser.parse_args()
    asked = min(options.gpus, 4) if options.gpus >= 2 else 2
    report = {"gpus": options.gpus, "asked": asked, "katas": {}}
    for name, kata in KATAS.items():
        argv = [sys.executable, "-m", "ddpfsdp.quiz.cli", "kata", "check", name, "--reference", "--gpus", str(asked),
                "--json"]
        started = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        entry = {"expected": expected(kata.p2p, options.gpus), "exit": done.returncode,
                 "seconds": round(time.monotonic() - started, 2)}
        if entry["expected"] == "refused":
            entry["ok"] = done.returncode == 2 and REFUSAL in " ".join(done.stderr.split())
            entry["said"] = " ".join(done.stderr.split())[-300:]
        else:
            try:
                result = json.loads(done.stdout)
            except json.JSONDecodeError:
                result = {}
            entry["not_passed"] = [c["name"] for c in result.get("checks", []) if c.get("passed") is not True]
            entry["device"] = result.get("config", {}).get("device")
            entry["ok"] = done.returncode == 0 and not entry["not_passed"] and entry["device"] == "cuda"
            if not entry["ok"]:
                entry["stderr"] = done.stderr[-1500:]
        report["katas"][name] = entry
        print(f"{name}: {'ok' if entry['ok'] else 'FAILED'} ({entry['seconds']} s)", flush=True)
    options.out.write_text(json.dumps(report, indent=2))
    raise SystemExit(0 if all(entry["ok"] for entry in report["katas"].values()) else 1)


if __name__ == "__main__":
    main()
