"""tfm_lab.cli: devices that do not exist and folders that cannot be written are one clear error."""
from __future__ import annotations

import pytest
import torch

from tfm_lab.cli import OneLineParser, SettingsError, check_writable_folder, pick_device


def test_pick_device_reads_the_names_it_documents(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device("auto") == torch.device("cpu") == pick_device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert pick_device("auto") == torch.device("cuda", 0)
    assert pick_device("cuda", local_rank=1) == torch.device("cuda", 1)
    assert pick_device("cuda:1") == torch.device("cuda", 1)


@pytest.mark.parametrize("name, cuda, says", [
    ("tpu", True, "unknown device 'tpu': use auto, cpu, cuda or cuda:N"),
    ("cuda:x", True, "unknown device"),
    ("cuda", False, "CUDA is not available here; use --device cpu"),
    ("cuda:2", True, "there is no cuda:2: this machine has 2 CUDA device(s)"),
])
def test_pick_device_names_what_is_wrong(monkeypatch, name, cuda, says):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(SettingsError) as error:
        pick_device(name)
    assert says in str(error.value)


def test_writable_folder_is_created(tmp_path):
    check_writable_folder(tmp_path / "runs" / "dates")
    assert (tmp_path / "runs" / "dates").is_dir() and not any((tmp_path / "runs" / "dates").iterdir())


def test_a_folder_that_cannot_be_made_is_named(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(SettingsError, match=f"cannot write to {tmp_path / 'file' / 'run'}: .*choose a folder"):
        check_writable_folder(tmp_path / "file" / "run")


def test_parser_errors_are_one_line_and_exit_status_2(capsys):
    parser = OneLineParser(prog="tool")
    parser.add_argument("--steps", type=int)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--steps", "many"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == "tool: error: argument --steps: invalid int value: 'many'\n"
