"""The report page: self-contained (nothing it refers to leaves the file), every job-derived
string escaped, and it opens in headless Chromium without a console message."""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.report import _chromium
from tests.report._synthetic import (
    Synthetic,
    make_job,
    record_rule,
    standard_job,
    step_rows,
    steps_dir,
    system_dir,
    system_rows,
    write_meta,
    write_series,
)
from trainops.report import render_html, report_data

HOSTILE = "<img src=x onerror=alert(1)>\"'&"
SCRIPT = "</td></tr></table><script>alert('rule')</script>"
URL_ATTRIBUTES = {"src", "href", "xlink:href", "action", "formaction", "data", "poster", "srcset",
                  "background", "ping", "manifest", "cite", "longdesc", "usemap", "codebase"}  # fmt: skip


class _Refs(HTMLParser):
    """Every tag, and every attribute that can point somewhere, with its value."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.refs: list[tuple[str, str]] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in_style = tag == "style"
        for name, value in attrs:
            if name in URL_ATTRIBUTES or name.startswith("on"):
                self.refs.append((name, value or ""))
            if name == "style":
                self.styles.append(value or "")
            if name == "content" and value:
                self.styles.append(value)

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False


def _data(syn: Synthetic) -> dict[str, Any]:
    job = syn.store.get_job(syn.job.name)
    assert job is not None
    return report_data(
        job, syn.store.transitions(job.name), syn.reader(), syn.store.rule_evaluations(job.name)
    )


def _gpu_job(tmp: Path) -> Synthetic:
    syn = make_job(tmp, instance_type="ml.g4dn.12xlarge", hyperparameters={"batch-size": 32})
    write_meta(syn, cores=4, gpus=[{"index": i} for i in range(2)], gpu_status="nvml")
    columns, rows = system_rows(3000, 4, lambda i, c: 40.0 + (i % 30), gpus=2,
                                gpu=lambda i, g: 25 + 5 * g + (i % 9), gpu_memory=lambda i, g: 25.0)  # fmt: skip
    write_series(syn, system_dir("algo-1"), columns, rows)
    for rank in (0, 1):
        write_series(
            syn, steps_dir("algo-1", rank), *step_rows(500, duration=lambda i: 0.1 + (i % 50 == 0))
        )
    record_rule(syn, "ProfilerReport", "IssuesFound", recommendation="raise the batch size",
                evidence={"LowGPUUtilization": "p95 39 %"})  # fmt: skip
    return syn


def _hostile(tmp: Path) -> tuple[Synthetic, dict[str, Any]]:
    syn = standard_job(tmp)
    # a host directory whose name is markup: hosts come from the prefix's paths
    write_series(syn, system_dir(HOSTILE), *system_rows(10, 1, lambda i, c: 10.0))
    record_rule(
        syn, "ProfilerReport", "IssuesFound", recommendation=SCRIPT, evidence={SCRIPT: HOSTILE}
    )
    data = _data(syn)
    data["job"]["name"] = f"job{SCRIPT}"
    data["job"]["instance_type"] = HOSTILE
    data["sections"]["summary"]["transitions"][0]["message"] = SCRIPT
    return syn, data


@pytest.fixture
def pages(tmp_path: Path) -> dict[str, Path]:
    found = {}
    for name, data in (
        ("cpu", _data(standard_job(tmp_path / "cpu"))),
        ("gpu", _data(_gpu_job(tmp_path / "gpu"))),
        ("hostile", _hostile(tmp_path / "hostile")[1]),
    ):
        path = tmp_path / f"{name}.html"
        path.write_text(render_html(data), encoding="utf-8")
        found[name] = path
    return found


def test_strings_from_the_job_are_escaped(tmp_path: Path) -> None:
    _, data = _hostile(tmp_path)
    page = render_html(data)
    parser = _Refs()
    parser.feed(page)
    assert "script" not in parser.tags and "img" not in parser.tags
    assert [ref for ref in parser.refs if ref[0].startswith("on")] == []
    assert "&lt;script&gt;alert(&#x27;rule&#x27;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    # the escaping did not just drop the hostile host: its table is there, escaped
    assert page.count("&lt;img src=x onerror=alert(1)&gt;&quot;&#x27;&amp;") >= 2


def test_nothing_on_the_page_leaves_the_file(pages: dict[str, Path]) -> None:
    for name, path in pages.items():
        text = path.read_text(encoding="utf-8")
        parser = _Refs()
        parser.feed(text)
        assert {"svg", "table", "style"} <= set(parser.tags), name
        outside = [(k, v) for k, v in parser.refs if not v.startswith("#")]
        assert outside == [], name  # only in-page anchors
        assert {"script", "link", "iframe", "object", "embed", "img", "base"}.isdisjoint(
            parser.tags
        )
        for css in parser.styles:
            assert not re.search(r"url\s*\(|@import", css, re.I), (name, css[:200])
        assert not re.search(r"https?:|ftp:|//[a-z0-9-]+\.[a-z]", text, re.I), name  # no URL at all
        assert "Content-Security-Policy" in text and "default-src 'none'" in text


def test_the_page_opens_in_headless_chromium_without_console_messages(
    pages: dict[str, Path],
) -> None:
    for name, path in pages.items():
        loaded = _chromium.load(path)
        assert loaded.console == [], name
        assert "1. Training job summary" in loaded.dom and "11. GPU memory" in loaded.dom
        assert "<script" not in loaded.dom


def test_the_console_check_would_see_a_message(tmp_path: Path) -> None:
    """The harness itself: a page that logs an error, and one whose image the CSP refuses."""
    noisy = tmp_path / "noisy.html"
    noisy.write_text("<!DOCTYPE html><title>x</title><script>console.error('seen')</script>")
    assert any("seen" in line for line in _chromium.load(noisy).console)
    refused = tmp_path / "refused.html"
    page = render_html(copy.deepcopy(_data(standard_job(tmp_path / "job"))))
    refused.write_text(page.replace("</main>", '<img src="http://192.0.2.1/x.png"></main>'))
    assert any("Content Security Policy" in line for line in _chromium.load(refused).console)


def test_gpu_page_has_its_charts(pages: dict[str, Path]) -> None:
    text = pages["gpu"].read_text(encoding="utf-8")
    assert text.count("<svg") >= 8  # host, cores, heatmap, GPUs, GPU memory, steps, bars
    assert "gpu0 / gpu1" in text and "raise the batch size" in text
    assert "a 2x larger batch" in text  # the advice, with its table
