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


def test_doctor_text_says_what_demos_use():
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "demos use" in result.output
    assert "gloo" in result.output


def test_data_dir_honours_override(tmp_path, monkeypatch):
    from ddpfsdp.quiz.paths import data_dir

    monkeypatch.setenv("DDPFSDP_HOME", str(tmp_path / "elsewhere"))
    assert data_dir() == tmp_path / "elsewhere"
    assert data_dir().is_dir()
