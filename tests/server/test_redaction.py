"""Credentials stay out of describe and logs, by the documented rule of ``_redaction.py``.

The old rule masked names containing SECRET/TOKEN/PASSWORD/CREDENTIAL/KEY as substrings: it
showed DB_PASS, HF_AUTH, a github_pat_ value and the password in DATABASE_URL, and hid MONKEY.
"""

from __future__ import annotations

import pytest

from tests.control._harness import ControlPlane
from trainops.server import redact
from trainops.server._redaction import Masker, is_secret_name, mask_text
from trainops.server._views import log_page
from trainops.store import LogChunk

GITHUB_PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
DATABASE_URL = "postgresql://trainer:hunter2-db@db.internal:5432/runs"


@pytest.mark.parametrize(
    "name",
    [
        "DB_PASS", "HF_AUTH", "API_KEY", "ACCESS_KEY", "aws-secret-access-key", "GITHUB_TOKEN",
        "DB_PASSWORD", "MYSQL_PASSWD", "SSH_PASSPHRASE", "WANDB_API_KEY", "apiKey", "dbPassword",
        "GOOGLE_APPLICATION_CREDENTIALS", "PRIVATE_KEY", "SESSION_COOKIE", "REQUEST_SIGNATURE",
        "DBPASSWORD", "HFTOKEN", "GITHUB_PAT", "SENTRY_DSN", "AUTHORIZATION", "KEYS",
    ],
)  # fmt: skip
def test_credential_names_are_secret(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "MONKEY",
        "KEYBOARD_LAYOUT",
        "TOKENIZER_PATH",
        "PATH",
        "PWD",
        "EPOCHS",
        "BYPASS",
        "DONKEY_KONG",
    ],
)
def test_other_names_are_not(name: str) -> None:
    assert not is_secret_name(name)


def test_values_that_are_credentials_are_cut_out() -> None:
    assert mask_text(DATABASE_URL) == "postgresql://trainer:***@db.internal:5432/runs"
    assert mask_text("redis://:pw@cache:6379/0") == "redis://:***@cache:6379/0"
    assert mask_text("https://example.com/a:b@c") == "https://example.com/a:b@c"  # no userinfo
    assert mask_text(f"using {GITHUB_PAT} now") == "using *** now"
    for token in (
        "ghp_" + "a1" * 18,
        "AKIAIOSFODNN7EXAMPLE",
        "xoxb-1234567890-abcdefghij",
        "sk-proj-abcdefghijklmnop1234",
        "hf_" + "Ab" * 15,
        "glpat-" + "x" * 20,
    ):
        assert mask_text(f"token={token};") == "token=***;", token
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----"
    assert mask_text(f"key: {pem} end") == "key: *** end"
    assert mask_text("loss=0.25 sk-short ghp_tiny") == "loss=0.25 sk-short ghp_tiny"


def test_redact_applies_both_parts_of_the_rule() -> None:
    env = {
        "DB_PASS": "p",
        "HF_AUTH": "hf-auth-value",
        "GIT_CREDENTIAL_HELPER_VALUE": GITHUB_PAT,
        "RELEASE": GITHUB_PAT,
        "DATABASE_URL": DATABASE_URL,
        "MONKEY": "banana",
    }
    assert redact(env) == {
        "DB_PASS": "***",
        "HF_AUTH": "***",
        "GIT_CREDENTIAL_HELPER_VALUE": "***",
        "RELEASE": "***",
        "DATABASE_URL": "postgresql://trainer:***@db.internal:5432/runs",
        "MONKEY": "banana",
    }


def test_describe_masks_environment_hyperparameters_and_failure_reason(
    plane: ControlPlane,
) -> None:
    env = {
        "FAKE_LINES": "0",
        "FAKE_FAIL_HOST": "algo-1",
        "FAKE_FAIL_REASON": f"cannot connect to {DATABASE_URL}",
        "DB_PASS": "hunter2-db",
        "HF_AUTH": "hf-auth-value",
        "GH": GITHUB_PAT,
        "DATABASE_URL": DATABASE_URL,
        "MONKEY": "banana",
    }
    plane.submit("masked", env, hyperparameters={"api_key": "k-123456", "lr": 0.1})
    job = plane.wait_ended("masked")
    shown = job["Environment"]
    assert (shown["DB_PASS"], shown["HF_AUTH"], shown["GH"]) == ("***", "***", "***")
    assert shown["DATABASE_URL"] == "postgresql://trainer:***@db.internal:5432/runs"
    assert shown["MONKEY"] == "banana"
    assert job["HyperParameters"] == {"api_key": "***", "lr": "0.1"}
    assert (
        job["FailureReason"] == "cannot connect to postgresql://trainer:***@db.internal:5432/runs"
    )
    everything = (
        plane.client.get("/api/v1/jobs/masked").text + plane.client.get("/api/v1/jobs").text
    )
    for secret in ("hunter2-db", "hf-auth-value", GITHUB_PAT, "k-123456"):
        assert secret not in everything


def test_log_lines_are_masked_with_the_job_secret_values(plane: ControlPlane) -> None:
    plane.submit("logged", {"FAKE_LINES": "0", "HF_AUTH": "hf-auth-value", "SHORT_KEY": "abc"})
    record = plane.server.controller.store.get_job("logged")
    assert record is not None
    said = [
        "login with hf-auth-value ok",
        f"clone with {GITHUB_PAT}",
        f"db {DATABASE_URL}",
        "abc is too short to hunt for",
        "MONKEY=banana",
    ]
    chunks = [LogChunk(1, "algo-1", 1, 0.0, "stdout", None, said[:2])]
    chunks.append(LogChunk(3, "algo-1", 1, 0.0, "stdout", None, said[2:]))
    page = log_page(chunks, 0, record)
    assert [ln["line"] for ln in page["lines"]] == [
        "login with *** ok",
        "clone with ***",
        "db postgresql://trainer:***@db.internal:5432/runs",
        "abc is too short to hunt for",
        "MONKEY=banana",
    ]
    assert Masker()("nothing here") == "nothing here"
    plane.wait_ended("logged")


@pytest.mark.parametrize(
    "secret_line",
    [
        "login with hf-auth-value ok",
        f"clone with {GITHUB_PAT}",
        f"db {DATABASE_URL}",
        "token=AKIAIOSFODNN7EXAMPLE;",
        "key: -----BEGIN RSA PRIVATE KEY-----",
        None,
    ],
)
def test_a_page_is_masked_as_its_lines_are_one_by_one(secret_line: str | None) -> None:
    mask = Masker(["hf-auth-value"])
    page = [f"step {i} loss={1 / (i + 1):.6f} https://example.com/a:b@c" for i in range(50)]
    if secret_line is not None:
        page.insert(25, secret_line)
    assert mask.lines(page) == [mask(text) for text in page]
    assert (mask.lines(page) == page) == (secret_line is None)


def test_a_jobs_masker_masks_its_secret_hyperparameters_and_environment_anywhere() -> None:
    mask = Masker.for_job(
        {"DB_PASS": "hunter2-db", "MONKEY": "banana"},
        {"db_password": "hunter2hunter2", "api_key": "abc", "lr": 0.1, "token": 12345678},
    )
    command = "python train.py --api_key abc --db_password hunter2hunter2 --lr 0.1 --token=12345678"
    assert mask(command) == "python train.py --api_key *** --db_password *** --lr 0.1 --token=***"
    # the value anywhere, even where the script names it otherwise; short values only by flag
    said = 'ValueError: cannot log in as "hunter2hunter2" with hunter2-db (abc is a word)'
    assert mask(said) == 'ValueError: cannot log in as "***" with *** (abc is a word)'
    assert mask("--api_key_hint abc --monkey banana") == "--api_key_hint abc --monkey banana"
    # a value equal to a secret is masked whatever its name
    assert mask.mapping({"note": "hunter2hunter2", "lr": "0.1", "token": "x"}) == {
        "note": "***",
        "lr": "0.1",
        "token": "***",
    }
    page = ["epoch 1", "args: --api_key abc"]
    assert mask.lines(page) == ["epoch 1", "args: --api_key ***"]


def test_log_pages_mask_the_jobs_secret_hyperparameters(plane: ControlPlane) -> None:
    plane.submit(
        "hp-logged", {"FAKE_LINES": "0"}, hyperparameters={"db_password": "hunter2hunter2"}
    )
    record = plane.server.controller.store.get_job("hp-logged")
    assert record is not None
    chunks = [LogChunk(1, "algo-1", 1, 0.0, "stdout", None, ["connecting with hunter2hunter2"])]
    assert [ln["line"] for ln in log_page(chunks, 0, record)["lines"]] == ["connecting with ***"]
    plane.wait_ended("hp-logged")


def test_describe_masks_the_jobs_secrets_in_a_reason_the_agent_left_unmasked(
    plane: ControlPlane,
) -> None:
    env = {
        "FAKE_LINES": "0",
        "FAKE_FAIL_HOST": "algo-1",
        "FAKE_FAIL_REASON": "refused: train.py --db_password hunter2hunter2 --pin_token 42 --lr 42",
    }
    hps = {"db_password": "hunter2hunter2", "pin_token": "42", "note": "hunter2hunter2"}
    plane.submit("reasoned", env, hyperparameters=hps)
    job = plane.wait_ended("reasoned")
    assert job["FailureReason"] == "refused: train.py --db_password *** --pin_token *** --lr 42"
    assert job["HyperParameters"] == {"db_password": "***", "pin_token": "***", "note": "***"}
    everything = (
        plane.client.get("/api/v1/jobs/reasoned").text + plane.client.get("/api/v1/jobs").text
    )
    assert "hunter2hunter2" not in everything
