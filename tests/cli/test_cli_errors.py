"""User errors end as ``trainops: error: <message>`` and exit code 2, never as a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "trainops.cli"]


def _cli(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINOPS_", "AWS_"))}
    env.update({"TRAINOPS_HOME": str(cwd / "home"), **extra})
    return subprocess.run(
        [*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def _closed_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_invalid_spec_lists_every_field_without_traceback(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "entry_point: train.py\n"
        "instance_type: ml.c5.xlarg\n"
        "inputs:\n"
        "  'bad name':\n"
        "    uri: data/\n"
        "metric_definitions:\n"
        "  - {name: loss, regex: 'loss=[0-9.]+'}\n"
    )
    result = _cli("run", "bad.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == "trainops: error: invalid job spec in bad.yaml:"
    assert any(line.startswith("  instance_type (line 2): unknown instance type") for line in lines)
    assert any("channel name 'bad name'" in line for line in lines)
    assert any(line.startswith("  metric_definitions.0.regex (line 7):") for line in lines)


def test_missing_spec_file(tmp_path: Path) -> None:
    result = _cli("run", "nope.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("trainops: error: invalid job spec in nope.yaml:")
    assert "cannot read file" in result.stderr and "Traceback" not in result.stderr


def test_missing_entry_point_is_reported_before_any_server_starts(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("entry_point: train.py\nsource_dir: src\n")
    result = _cli("run", "job.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "source_dir:" in result.stderr and "is not a directory" in result.stderr
    assert not (tmp_path / "home").exists()


def test_submit_without_a_server_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "job.yaml").write_text("entry_point: train.py\n")
    result = _cli("submit", "job.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("trainops: error: `trainops submit` needs a running server")
    assert "trainops server" in result.stderr and "trainops run" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_wrong_local_channel_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    (tmp_path / "data" / "train").mkdir(parents=True)
    (tmp_path / "job.yaml").write_text(
        "entry_point: train.py\nsource_dir: src\ninputs:\n  train:\n    uri: data/trian/\n"
    )
    for command in ("run", "submit"):
        result = _cli(command, "job.yaml", cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [
            "trainops: error: invalid job spec in job.yaml:",
            f"  inputs.train.uri (line 5): channel 'train': {tmp_path}/data/trian/ does not exist",
        ]
        assert not (tmp_path / "home").exists()  # no server, no job, no upload, no home


# Every command that talks to a server (the job names are never looked up: no server answers).
SERVER_COMMANDS = [
    ["jobs"], ["describe", "j"], ["logs", "j"], ["logs", "-f", "j"], ["metrics", "j"],
    ["stop", "j"], ["report", "j", "--no-open"], ["cluster"], ["submit", "job.yaml"],
    ["run", "job.yaml"],
]  # fmt: skip


def test_an_unreachable_configured_server_gives_every_command_the_same_fix(
    tmp_path: Path,
) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "job.yaml").write_text("entry_point: train.py\n")
    url = _closed_url()
    port = url.rsplit(":", 1)[1]
    fix = (
        f"; start a server there (`trainops server --port {port}`), correct TRAINOPS_SERVER, "
        "or unset it to use this home's own server (or an embedded one)"
    )
    for command in SERVER_COMMANDS:
        result = _cli(*command, cwd=tmp_path, TRAINOPS_SERVER=url)
        assert result.returncode == 2, (command, result.stderr)
        assert result.stderr.startswith(f"trainops: error: cannot reach trainops server at {url}: ")
        assert result.stderr.endswith(fix + "\n"), (command, result.stderr)
        assert result.stderr.count("\n") == 1, (command, result.stderr)  # one line


def test_an_unreachable_server_of_config_yaml_names_the_file(tmp_path: Path) -> None:
    url = _closed_url().replace("127.0.0.1", "localhost")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.yaml").write_text(f"server: {url}\n")
    result = _cli("describe", "j", cwd=tmp_path)
    assert result.returncode == 2
    config = tmp_path / "home" / "config.yaml"
    assert result.stderr.rstrip("\n").endswith(
        f"correct server: in {config}, or remove it to use this home's own server "
        "(or an embedded one)"
    )


def test_bad_config_file_is_an_error_message(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.yaml").write_text("local:\n  cpus: lots\n")
    result = _cli("jobs", cwd=tmp_path)
    assert result.returncode == 2
    assert "config.yaml local.cpus: expected a whole number" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_and_version(tmp_path: Path) -> None:
    result = _cli("--help", cwd=tmp_path)
    assert result.returncode == 0
    assert "run" in result.stdout and "server" in result.stdout
    version = _cli("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("trainops ")


def test_output_that_is_not_utf8_gets_replacement_characters(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("entry_point: train.py\ninstance_type: ml.m5.lärge\n")
    result = _cli("run", "bad.yaml", cwd=tmp_path, PYTHONIOENCODING="ascii")
    assert result.returncode == 2
    assert "unknown instance type 'ml.m5.l?rge'" in result.stderr
