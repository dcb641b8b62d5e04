"""Settings come from the environment and config.yaml, with clear errors for bad values."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import pytest

from trainops._errors import ConfigError
from trainops._settings import MIB, SECTIONS, Settings, TransferSettings
from trainops._settings_source import SettingsSource
from trainops.server._settings import ImageMapping


def test_defaults(tmp_path: Path) -> None:
    s = Settings.load({"TRAINOPS_HOME": str(tmp_path)})
    assert s.home == tmp_path and s.db_path == tmp_path / "trainops.db"
    assert s.default_output_uri == f"file://{tmp_path.resolve()}/objects/jobs"
    assert s.server_url is None and s.capacity.cpus is None


def test_config_file_and_env_precedence(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "server: http://127.0.0.1:9000\ns3:\n  endpoint_url: http://127.0.0.1:8333\nlocal:\n  cpus: 3\n"
    )
    s = Settings.load({"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_LOCAL_CPUS": "5"})
    assert s.server_url == "http://127.0.0.1:9000"
    assert s.s3.endpoint_url == "http://127.0.0.1:8333"
    assert s.capacity.cpus == 5


def test_credentials_stay_out_of_repr(tmp_path: Path) -> None:
    s = Settings.load(
        {
            "TRAINOPS_HOME": str(tmp_path),
            "AWS_SECRET_ACCESS_KEY": "hunter2",
            "TRAINOPS_TOKEN": "tok",
        }
    )
    assert "hunter2" not in repr(s) and "tok" not in repr(s)
    assert s.s3.client_env()["AWS_SECRET_ACCESS_KEY"] == "hunter2"


@pytest.mark.parametrize(("value", "fragment"), [("two", "whole number"), ("-1", "negative")])
def test_bad_capacity(tmp_path: Path, value: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=f"TRAINOPS_LOCAL_CPUS.*{fragment}"):
        Settings.load({"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_LOCAL_CPUS": value})


def test_bad_config_yaml(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("s3: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        Settings.load({"TRAINOPS_HOME": str(tmp_path)})


def test_transfer_settings_from_env_and_config(tmp_path: Path) -> None:
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).transfer == TransferSettings()
    (tmp_path / "config.yaml").write_text("transfer:\n  part_size_mb: 8\n  memory_mb: 64\n")
    s = Settings.load({"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_TRANSFER_CONCURRENCY": "4"})
    assert s.transfer == TransferSettings(concurrency=4, part_size=8 * MIB, memory=64 * MIB)
    assert s.transfer.part_slots == 8
    (tmp_path / "config.yaml").write_text("transfer:\n  sync_part_concurrency: 3\n")
    s = Settings.load({"TRAINOPS_HOME": str(tmp_path)})
    assert s.transfer == TransferSettings(sync_part_concurrency=3)
    # A child process (the background uploader) gets the same settings through its environment.
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path), **s.transfer.env()}) == s


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"TRAINOPS_TRANSFER_CONCURRENCY": "0"}, "concurrency must be at least 1"),
        ({"TRAINOPS_TRANSFER_PART_SIZE_MB": "4"}, "part size must be at least 5 MiB"),
        ({"TRAINOPS_TRANSFER_MEMORY_MB": "8"}, "must hold at least one part"),
        ({"TRAINOPS_TRANSFER_SYNC_PART_CONCURRENCY": "0"}, "sync part concurrency must be at"),
        ({"TRAINOPS_TRANSFER_MEMORY_MB": "lots"}, "TRAINOPS_TRANSFER_MEMORY_MB.*whole number"),
    ],
)
def test_bad_transfer_settings(tmp_path: Path, env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        Settings.load({"TRAINOPS_HOME": str(tmp_path), **env})


def test_heartbeat_timeout_from_env_and_config(tmp_path: Path) -> None:
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).heartbeat_timeout == 60
    (tmp_path / "config.yaml").write_text("heartbeat_timeout: 15\n")
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).heartbeat_timeout == 15
    env = {"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_HEARTBEAT_TIMEOUT": "5"}
    assert Settings.load(env).heartbeat_timeout == 5
    for bad, fragment in (("4", "at least 5 seconds"), ("soon", "expected a whole number")):
        with pytest.raises(ConfigError, match=fragment):
            Settings.load({**env, "TRAINOPS_HEARTBEAT_TIMEOUT": bad})


def test_backend_from_env_and_config(tmp_path: Path) -> None:
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).backend == "local"
    (tmp_path / "config.yaml").write_text("backend: ray\n")
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).backend == "ray"
    env = {"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_BACKEND": "local"}
    assert Settings.load(env).backend == "local"


def test_shared_paths_from_env_and_config(tmp_path: Path) -> None:
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).shared_paths == ()
    (tmp_path / "config.yaml").write_text("shared_paths: [/mnt/nfs, /data/]\n")
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).shared_paths == ("/mnt/nfs", "/data")
    env = {"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_SHARED_PATHS": "/a, /b"}
    assert Settings.load(env).shared_paths == ("/a", "/b")
    with pytest.raises(ConfigError, match="absolute folders, not 'rel'"):
        Settings.load({**env, "TRAINOPS_SHARED_PATHS": "rel"})


def test_webhook_networks_come_from_config_or_env_and_bad_ones_are_named(tmp_path: Path) -> None:
    home = {"TRAINOPS_HOME": str(tmp_path)}
    assert Settings.load(home).webhook_networks == ()  # none: public addresses only
    (tmp_path / "config.yaml").write_text("webhook_networks: [loopback, 10.1.0.0/16]\n")
    assert Settings.load(home).webhook_networks == ("loopback", "10.1.0.0/16")
    env = {**home, "TRAINOPS_WEBHOOK_NETWORKS": "private, fd00::/8"}
    assert Settings.load(env).webhook_networks == ("private", "fd00::/8")
    (tmp_path / "config.yaml").write_text("webhook_networks: [intranet]\n")
    with pytest.raises(ConfigError, match=r"config\.yaml: webhook_networks entry 'intranet'"):
        Settings.load(home)
    with pytest.raises(ConfigError, match=r"TRAINOPS_WEBHOOK_NETWORKS: .*'10\.0\.0\.0/33'"):
        Settings.load({**home, "TRAINOPS_WEBHOOK_NETWORKS": "10.0.0.0/33"})


# Each component reads its own settings through one reader; what follows pins every existing
# variable and config.yaml key to its meaning, and every refusal to one clear line.

# (variable, value, attribute path, expected)
EVERY_VARIABLE = [
    ("AWS_ENDPOINT_URL_S3", "http://s3.test", "s3.endpoint_url", "http://s3.test"),
    ("AWS_ENDPOINT_URL", "http://any.test", "s3.endpoint_url", "http://any.test"),
    ("AWS_DEFAULT_REGION", "eu-west-1", "s3.region", "eu-west-1"),
    ("AWS_REGION", "eu-west-2", "s3.region", "eu-west-2"),
    ("AWS_ACCESS_KEY_ID", "AKID", "s3.access_key_id", "AKID"),
    ("AWS_SECRET_ACCESS_KEY", "sekrit", "s3.secret_access_key", "sekrit"),
    ("TRAINOPS_S3_SERVE", "1", "s3.serve", True),
    ("TRAINOPS_S3_DEFAULT_BUCKET", "data", "s3.default_bucket", "data"),
    ("TRAINOPS_LOCAL_CPUS", "3", "capacity.cpus", 3),
    ("TRAINOPS_LOCAL_MEMORY_MB", "1000", "capacity.memory_mb", 1000),
    ("TRAINOPS_LOCAL_GPUS", "0", "capacity.gpus", 0),
    ("TRAINOPS_TRANSFER_CONCURRENCY", "7", "transfer.concurrency", 7),
    ("TRAINOPS_TRANSFER_PART_CONCURRENCY", "2", "transfer.part_concurrency", 2),
    ("TRAINOPS_TRANSFER_PART_SIZE_MB", "8", "transfer.part_size", 8 * MIB),
    ("TRAINOPS_TRANSFER_MEMORY_MB", "64", "transfer.memory", 64 * MIB),
    ("TRAINOPS_TRANSFER_SYNC_PART_CONCURRENCY", "2", "transfer.sync_part_concurrency", 2),
    ("TRAINOPS_SERVER", "http://127.0.0.1:9", "server_url", "http://127.0.0.1:9"),
    ("TRAINOPS_TOKEN", "tok", "token", "tok"),
    ("TRAINOPS_REGION", "ap-south-1", "region", "ap-south-1"),
    ("TRAINOPS_ARCHIVE_MAX_MEMBERS", "5", "archive.max_members", 5),
    ("TRAINOPS_ARCHIVE_MAX_TOTAL_BYTES", "6", "archive.max_total_bytes", 6),
    ("TRAINOPS_ARCHIVE_MAX_MEMBER_BYTES", "7", "archive.max_member_bytes", 7),
    ("TRAINOPS_ARCHIVE_MAX_RATIO", "8", "archive.max_ratio", 8),
    ("TRAINOPS_ARCHIVE_RATIO_FLOOR_BYTES", "9", "archive.ratio_floor_bytes", 9),
    ("TRAINOPS_ARCHIVE_MAX_PATH_LENGTH", "10", "archive.max_path_length", 10),
    ("TRAINOPS_KEEP_JOB_TREES", "4", "keep_job_trees", 4),
    ("TRAINOPS_HEARTBEAT_TIMEOUT", "30", "heartbeat_timeout", 30),
    ("TRAINOPS_FASTFILE_FALLBACK", "1", "fastfile_fallback", True),
    ("TRAINOPS_FASTFILE_FALLBACK", "true", "agent.fastfile_fallback", True),
    ("TRAINOPS_HEARTBEAT_INTERVAL_MS", "100", "heartbeat_interval_ms", 100),
    ("TRAINOPS_BACKEND", "ray", "backend", "ray"),
    ("TRAINOPS_SHARED_PATHS", "/a,/b/", "shared_paths", ("/a", "/b")),
    ("TRAINOPS_ALLOWED_HOSTS", "x.test, y.test", "allowed_hosts", ("x.test", "y.test")),
    ("TRAINOPS_ALLOWED_HOSTS", "*", "server.allowed_hosts", ("*",)),
    (
        "TRAINOPS_IMAGES",
        "pytorch:2.3=/opt/t/bin/python, sklearn=server",
        "server.images",
        (
            ImageMapping("pytorch", "2.3", None, "/opt/t/bin/python"),
            ImageMapping("sklearn", None, None, "server"),
        ),
    ),
    ("TRAINOPS_WEBHOOK_NETWORKS", "loopback", "webhook_networks", ("loopback",)),
    ("TRAINOPS_RAY_ADDRESS", "auto", "ray.address", "auto"),
    ("TRAINOPS_RAY_NAMESPACE", "team", "ray.namespace", "team"),
    ("TRAINOPS_RAY_PLACEMENT", "spread", "ray.placement", "spread"),
    ("TRAINOPS_RAY_AUTOSCALING", "yes", "ray.autoscaling", True),
    ("TRAINOPS_SPOT_DISCOUNT_PERCENT", "65", "spot.discount_percent", 65),
    (
        "TRAINOPS_SPOT_PRICES",
        "ml.c5.xlarge=0.07, ml.m5.large=0.04",
        "spot.prices",
        (("ml.c5.xlarge", 0.07), ("ml.m5.large", 0.04)),
    ),
]

# (config.yaml text, attribute path, expected)
EVERY_KEY = [
    ("server: http://h:1\n", "server_url", "http://h:1"),
    ("token: t0k\n", "token", "t0k"),
    ("region: eu-north-1\n", "region", "eu-north-1"),
    ("backend: ray\n", "backend", "ray"),
    ("shared_paths: /nfs\n", "shared_paths", ("/nfs",)),
    ("keep_job_trees: 0\n", "keep_job_trees", 0),
    ("heartbeat_timeout: 9\n", "control.heartbeat_timeout", 9),
    ("fastfile_fallback: true\n", "fastfile_fallback", True),
    ("fastfile_fallback: 0\n", "fastfile_fallback", False),
    ("heartbeat_interval_ms: 1000\n", "agent.heartbeat_interval_ms", 1000),
    ("allowed_hosts: a.test\n", "allowed_hosts", ("a.test",)),
    (
        "images: [r.example/me:1=server]\n",
        "server.images",
        (ImageMapping.parse("r.example/me:1=server"),),
    ),
    ("webhook_networks: [private]\n", "actions.webhook_networks", ("private",)),
    ("s3:\n  endpoint_url: http://e\n", "s3.endpoint_url", "http://e"),
    ("s3:\n  region: r\n", "s3.region", "r"),
    ("s3:\n  access_key_id: k\n", "s3.access_key_id", "k"),
    ("s3:\n  secret_access_key: s\n", "s3.secret_access_key", "s"),
    ("s3:\n  serve: yes\n", "s3.serve", True),
    ("s3:\n  default_bucket: b\n", "s3.default_bucket", "b"),
    ("local:\n  memory_mb: 512\n", "capacity.memory_mb", 512),
    ("local:\n  gpus: 1\n", "capacity.gpus", 1),
    ("transfer:\n  concurrency: 5\n", "transfer.concurrency", 5),
    ("transfer:\n  part_concurrency: 6\n", "transfer.part_concurrency", 6),
    ("archive:\n  max_path_length: 99\n", "archive.max_path_length", 99),
    ("ray:\n  namespace: n\n", "ray.namespace", "n"),
    ("ray:\n  autoscaling: false\n", "ray.autoscaling", False),
    ("spot:\n  discount_percent: 0\n", "spot.discount_percent", 0),
    ("spot:\n  prices: [ml.p3.2xlarge=1.05]\n", "spot.prices", (("ml.p3.2xlarge", 1.05),)),
    ("s3:\nlocal: {}\n", "capacity.cpus", None),  # an empty section is none
]


def _attribute(settings: Settings, path: str) -> object:
    value: object = settings
    for part in path.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize(("variable", "value", "path", "expected"), EVERY_VARIABLE)
def test_every_variable_keeps_its_meaning_and_wins_over_config(
    tmp_path: Path, variable: str, value: str, path: str, expected: object
) -> None:
    home = {"TRAINOPS_HOME": str(tmp_path)}
    assert _attribute(Settings.load({**home, variable: value}), path) == expected
    # An empty variable is not set: the default (or config.yaml) holds, except that an empty
    # list variable is an empty list.
    empty = _attribute(Settings.load({**home, variable: ""}), path)
    assert empty == (() if isinstance(expected, tuple) else _attribute(Settings.load(home), path))


@pytest.mark.parametrize(("text", "path", "expected"), EVERY_KEY)
def test_every_config_key_keeps_its_meaning(
    tmp_path: Path, text: str, path: str, expected: object
) -> None:
    (tmp_path / "config.yaml").write_text(text)
    assert _attribute(Settings.load({"TRAINOPS_HOME": str(tmp_path)}), path) == expected


def test_sections_fill_every_component_attribute_with_its_own_type(tmp_path: Path) -> None:
    own = {"home", "server_url", "token", "region", "backend", "shared_paths"}
    components = {f.name for f in dataclasses.fields(Settings)} - own
    assert set(SECTIONS) == components
    loaded = Settings.load({"TRAINOPS_HOME": str(tmp_path)})
    defaults = Settings(home=tmp_path)
    for name in components:
        assert _attribute(loaded, name) == _attribute(defaults, name), name


def _refusal(tmp_path: Path, text: str | None = None, **env: str) -> str:
    if text is not None:
        (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        Settings.load({"TRAINOPS_HOME": str(tmp_path), **env})
    message = str(caught.value)
    assert "\n" not in message  # one line
    return message


def test_an_unknown_key_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    message = _refusal(tmp_path, "heartbeat_timout: 30\nregion: x\n")
    assert message.startswith(f"{tmp_path / 'config.yaml'}: unknown key(s) heartbeat_timout")
    assert "(did you mean heartbeat_timeout?)" in message
    assert "known: actions" not in message and "allowed_hosts, archive, backend" in message
    message = _refusal(tmp_path, "ray:\n  placment: spread\n")
    assert message.startswith(f"{tmp_path / 'config.yaml'} ray: unknown key(s) placment")
    assert message.endswith("known: address, autoscaling, namespace, placement")
    # Odd keys (numbers, huge ones) are named briefly, never crash the sorting.
    message = _refusal(tmp_path, f"1: a\n{'k' * 1000}: b\n")
    assert "unknown key(s) 1, 'kkk" in message and len(message) < 1000
    many = "".join(f"x{i}: {i}\n" for i in range(1000))
    assert "unknown key(s) x0, x1, x10, x100, x101 and 995 more;" in _refusal(tmp_path, many)
    message = _refusal(tmp_path, '"a\\nb\\e[31m": 1\n')  # a key with a line break, an escape
    assert "unknown key(s) 'a\\nb\\x1b[31m'" in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("s3: [unclosed\n", "config.yaml: not valid YAML at line 2, column 1: expected"),
        ("- a\n- b\n", "config.yaml: expected a mapping at the top level, got a list"),
        ("s3: on\n", "config.yaml s3: expected a mapping of settings (s3: followed by"),
        ("ray:\n  placement: pack\n", "config.yaml ray.placement: ray.placement must be one of"),
        ("ray:\n  autoscaling: maybe\n", "config.yaml ray.autoscaling: must be true or false"),
        ("local:\n  cpus: 2.5\n", "config.yaml local.cpus: expected a whole number, got 2.5"),
        ("local:\n  cpus: true\n", "config.yaml local.cpus: expected a whole number, got True"),
        ("keep_job_trees: -1\n", "config.yaml keep_job_trees: must not be negative, got -1"),
        ("heartbeat_timeout: 2\n", "config.yaml heartbeat_timeout: heartbeat_timeout must be"),
        ("heartbeat_interval_ms: 49\n", "interval_ms: heartbeat_interval_ms must be at least 50"),
        ("heartbeat_interval_ms: 0.5\n", "heartbeat_interval_ms: expected a whole number, got"),
        ("server: {url: x}\n", "config.yaml server: expected text, got a mapping"),
        ("allowed_hosts: {x: 1}\n", "config.yaml allowed_hosts: expected a list of host names"),
        ("images: [torch=server]\n", "config.yaml: images entry 'torch=server' names no framew"),
        ("images: [pytorch=py]\n", "config.yaml: images entry 'pytorch=py' names 'py': use serv"),
        ("shared_paths: [/a, 3]\n", "config.yaml shared_paths: expected a list of folders"),
        ("shared_paths: [rel]\n", "config.yaml shared_paths: shared_paths must be absolute"),
        ("transfer:\n  part_size_mb: 64\n  memory_mb: 32\n", "config.yaml transfer.memory_mb:"),
        ("archive: 3\n", "config.yaml archive: expected a mapping of settings"),
        ("spot:\n  discount_percent: 100\n", "config.yaml spot.discount_percent: the spot disc"),
        ("spot:\n  discount_percent: -5\n", "spot.discount_percent: the spot discount must not"),
        ("spot:\n  prices: [ml.p3.2xlarge]\n", "config.yaml: spot.prices entry 'ml.p3.2xlarge' is"),
        ("spot:\n  prices: [x=nan]\n", "config.yaml: spot.prices entry 'x=nan' is not TYPE=PRICE"),
        ("spot:\n  prices: {a: 1}\n", "config.yaml spot.prices: expected a list of type=price"),
    ],
)
def test_every_config_refusal_names_the_file_and_key(
    tmp_path: Path, text: str, fragment: str
) -> None:
    assert fragment in _refusal(tmp_path, text)


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"TRAINOPS_LOCAL_GPUS": "1.5"}, "variable TRAINOPS_LOCAL_GPUS: expected a whole number"),
        ({"TRAINOPS_TRANSFER_PART_SIZE_MB": "4"}, "variable TRAINOPS_TRANSFER_PART_SIZE_MB: tr"),
        ({"TRAINOPS_TRANSFER_CONCURRENCY": "0"}, "variable TRAINOPS_TRANSFER_CONCURRENCY: tr"),
        ({"TRAINOPS_RAY_PLACEMENT": "pack"}, "variable TRAINOPS_RAY_PLACEMENT: ray.placement"),
        ({"TRAINOPS_FASTFILE_FALLBACK": "sure"}, "FASTFILE_FALLBACK: must be true or false"),
        ({"TRAINOPS_HEARTBEAT_TIMEOUT": "4"}, "variable TRAINOPS_HEARTBEAT_TIMEOUT: heartbeat"),
        ({"TRAINOPS_HEARTBEAT_INTERVAL_MS": "1001"}, "INTERVAL_MS: heartbeat_interval_ms must be"),
        ({"TRAINOPS_HEARTBEAT_INTERVAL_MS": "1e9"}, "INTERVAL_MS: expected a whole number, got"),
        ({"TRAINOPS_HEARTBEAT_INTERVAL_MS": "-5"}, "heartbeat_interval_ms must be at least 50 ms"),
        ({"TRAINOPS_SHARED_PATHS": "/ok,rel"}, "TRAINOPS_SHARED_PATHS: shared_paths must be"),
        ({"TRAINOPS_ARCHIVE_MAX_RATIO": "-2"}, "TRAINOPS_ARCHIVE_MAX_RATIO: must not be negative"),
        (
            {"TRAINOPS_SPOT_PRICES": "a=1,b=-1"},
            "variable TRAINOPS_SPOT_PRICES: spot.prices entry 'b",
        ),
        (
            {"TRAINOPS_SPOT_PRICES": "=1"},
            "TRAINOPS_SPOT_PRICES: spot.prices entry '=1' is not TYPE",
        ),
        ({"TRAINOPS_SPOT_DISCOUNT_PERCENT": "1e3"}, "DISCOUNT_PERCENT: expected a whole number"),
    ],
)
def test_every_variable_refusal_names_the_variable(
    tmp_path: Path, env: dict[str, str], fragment: str
) -> None:
    assert fragment in _refusal(tmp_path, **env)


def test_hostile_values_are_refused_briefly_and_secrets_never_shown(tmp_path: Path) -> None:
    huge = "9" * 100_000  # more digits than int() takes
    assert len(_refusal(tmp_path, TRAINOPS_LOCAL_CPUS=huge)) < 300
    assert len(_refusal(tmp_path, TRAINOPS_WEBHOOK_NETWORKS="x" * 100_000)) < 300
    assert len(_refusal(tmp_path, TRAINOPS_SHARED_PATHS="r" * 100_000)) < 300
    assert len(_refusal(tmp_path, TRAINOPS_SPOT_PRICES="m=" + "9" * 100_000)) < 300
    assert len(_refusal(tmp_path, TRAINOPS_SPOT_PRICES="inf=inf")) < 300
    secret = "hunter2hunter2"
    for text in (
        f"s3:\n  secret_access_key: {{value: {secret}}}\n",
        f"token: [{secret}]\n",
        f"s3: [{secret}\n",  # broken YAML: the error gives a place, never the line's text
        f"mystery: {secret}\n",  # an unknown key is named, not its value
    ):
        assert secret not in _refusal(tmp_path, text)


def test_an_unreadable_config_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_bytes(b"region: \xff\xfe\n")
    assert _refusal(tmp_path).endswith("config.yaml: not UTF-8 text")
    (tmp_path / "config.yaml").unlink()
    (tmp_path / "config.yaml").mkdir()
    assert "config.yaml: cannot be read (Is a directory)" in _refusal(tmp_path)


def test_every_setting_is_documented(tmp_path: Path) -> None:
    source = SettingsSource.open({}, tmp_path / "config.yaml")
    for read in SECTIONS.values():
        read(source)
    Settings.load({"TRAINOPS_HOME": str(tmp_path)})  # the process's own keys, read below
    keys, variables = source.consulted()
    own = {"server", "token", "region", "backend", "shared_paths"}
    own_variables = {"TRAINOPS_HOME", "TRAINOPS_SERVER", "TRAINOPS_TOKEN", "TRAINOPS_REGION"}
    own_variables |= {"TRAINOPS_BACKEND", "TRAINOPS_SHARED_PATHS"}
    page = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    settings = {k for k in keys | own if not any(o.startswith(f"{k}.") for o in keys)}
    missing = [k for k in sorted(settings) if f"`{k}`" not in page]
    missing += [v for v in sorted(variables | own_variables) if f"`{v}`" not in page]
    assert missing == []


def _documented_config_files() -> list[tuple[str, str]]:
    docs = Path(__file__).resolve().parents[1] / "docs"
    found = []
    for page in sorted(docs.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL):
            if block.lstrip(" ").startswith("# $TRAINOPS_HOME/config.yaml"):
                found.append((page.name, textwrap.dedent(block)))
    return found


@pytest.mark.parametrize(("page", "text"), _documented_config_files())
def test_every_config_file_the_docs_show_is_accepted(tmp_path: Path, page: str, text: str) -> None:
    (tmp_path / "config.yaml").write_text(text)
    Settings.load({"TRAINOPS_HOME": str(tmp_path)})
