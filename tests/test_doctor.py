from __future__ import annotations

import json

from click.testing import CliRunner

from ddpfsdp.quiz.cli import cli


def test_doctor_json_reports_the_machine(ddpfsdp_home):
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    import torch

    assert report["torch_version"] == torch.__version__
    assert report["cuda_available"] == torch.cuda.is_available()
    assert len(report["gpus"]) == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert report["gloo_available"] is True
    assert report["cpu_count"] >= 1
    assert report["ram_total_bytes"] > 0
    assert report["data_dir"] == str(ddpfsdp_home)
    launch = report["default_launch"]
    if report["gpus"]:
        assert launch == {"device": "cuda", "world_size": len(report["gpus"]), "backend": "nccl"}
    else:
        assert launch == {"device": "cpu", "world_size": 2, "backend": "gloo"}
    assert report["data_parallel_commands"][-1] == "ddpfsdp demo ddp --procs 2"


def _machine(gpus: int):
    from ddpfsdp.demos.launch.hardware import GPU, Hardware

    return Hardware("2.13.0", "CUDA 12.8", gpus > 0, [GPU(i, "NVIDIA H100", 80 * 2**30, "9.0") for i in range(gpus)],
                    nccl_available=True, gloo_available=True)


def test_training_demo_advice_names_gpus_only_where_there_are_two():
    """Two GPUs or more: one rank on each; one GPU: two ranks sharing it over gloo; none: CPU processes."""
    assert _machine(0).data_parallel_commands == ["ddpfsdp demo ddp --procs 2"]
    assert _machine(1).data_parallel_commands == ["ddpfsdp demo ddp --gpus 1 --ranks-per-gpu 2",
                                                  "ddpfsdp demo ddp --procs 2"]
    assert _machine(8).data_parallel_commands == ["ddpfsdp demo ddp --gpus 2", "ddpfsdp demo ddp --procs 2"]


def test_doctor_says_which_placements_the_machine_can_run():
    """Shared GPUs are offered only where there is a GPU; NCCL's one rank per GPU names how many."""
    none, one, eight = (_machine(n).placements for n in (0, 1, 8))
    assert not any("GPU" in line for line in none) and any("--procs N" in line for line in none)
    assert any("--gpus 1 --ranks-per-gpu K" in line and "gloo" in line for line in one)
    assert any("--ranks-per-gpu 1" in line and "NCCL" in line for line in one)
    assert any("1 to 8 ranks, one per GPU, on NCCL" in line for line in eight)
    assert any("sharing each GPU" in line for line in eight)
    assert _machine(1).default_launch.describe_for(2) == "2 ranks sharing the GPU on gloo with CUDA tensors"
    assert _machine(8).default_launch.describe_for(2) == "8 GPUs on NCCL"
    assert _machine(1).to_dict()["placements"] == one


def test_doctor_text_says_what_demos_use():
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "demos use" in result.output
    assert "gloo" in result.output
    assert "training demos" in result.output and "--procs 2" in result.output
    assert "placements" in result.output and "--procs N" in result.output


def test_data_dir_honours_override(tmp_path, monkeypatch):
    from ddpfsdp.quiz.paths import data_dir

    monkeypatch.setenv("DDPFSDP_HOME", str(tmp_path / "elsewhere"))
    assert data_dir() == tmp_path / "elsewhere"
    assert data_dir().is_dir()


def test_a_data_directory_that_cannot_be_used_is_one_of_the_findings(tmp_path, monkeypatch):
    """doctor diagnoses an unusable DDPFSDP_HOME instead of refusing to run; every other row is still there."""
    (tmp_path / "a-file").write_text("not a folder")
    home = tmp_path / "a-file" / "below"
    monkeypatch.setenv("DDPFSDP_HOME", str(home))
    result = CliRunner().invoke(cli, ["doctor"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "cannot be used" in out and str(home) in out and "cannot be created" in out
    assert "set DDPFSDP_HOME to a folder you can write to" in out
    assert "torch" in out and "gloo" in out and "training demos" in out
    report = json.loads(CliRunner().invoke(cli, ["doctor", "--json"]).output)
    assert report["data_dir"] == str(home) and "cannot be created" in report["data_dir_problem"]


def test_a_usable_data_directory_has_no_problem(ddpfsdp_home):
    report = json.loads(CliRunner().invoke(cli, ["doctor", "--json"]).output)
    assert report["data_dir"] == str(ddpfsdp_home) and report["data_dir_problem"] is None
