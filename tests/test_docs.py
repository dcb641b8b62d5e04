"""What the README shows as a real file is that file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _block_after(text: str, marker: str) -> str:
    """The first fenced block after ``marker``."""
    found = re.search(re.escape(marker) + r".*?```[a-z]*\n(.*?)```\n", text, re.DOTALL)
    assert found is not None, f"no code block after {marker!r}"
    return found.group(1)


def test_the_readme_job_yaml_is_the_example_s_job_yaml() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = _block_after(readme, "This is [examples/digits/job.yaml](examples/digits/job.yaml):")
    assert shown == (ROOT / "examples" / "digits" / "job.yaml").read_text(encoding="utf-8")


def test_the_scaling_example_s_outputs_are_not_tracked_but_its_measured_result_is() -> None:
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "/examples/scaling/scaling.png" in ignored
    assert "/examples/scaling/scaling.json" in ignored
    readme = (ROOT / "examples" / "scaling" / "README.md").read_text(encoding="utf-8")
    for linked in re.findall(r"\]\(([^)]+\.(?:png|json))\)", readme):
        assert linked.startswith("measured/"), linked
        assert (ROOT / "examples" / "scaling" / linked).is_file(), linked


def test_the_tuning_page_shows_the_digits_tuning_file() -> None:
    page = (ROOT / "docs" / "tuning.md").read_text(encoding="utf-8")
    shown = _block_after(page, "[examples/digits/tune.yaml](../examples/digits/tune.yaml):")
    assert shown == (ROOT / "examples" / "digits" / "tune.yaml").read_text(encoding="utf-8")
