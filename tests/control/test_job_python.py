"""A job's ``python`` is one the server's images setting names, or absent: the agent runs it
outside the job's sandbox to make the job's environment, so a client may not pick any program
(its own script, say) through the REST API."""

from __future__ import annotations

import dataclasses
import sys

from tests.control._harness import code_uri, control_plane, job_spec
from trainops._settings import Settings
from trainops.server._settings import ImageMapping, ServerSettings


def test_only_an_interpreter_the_images_setting_names_is_accepted(settings: Settings) -> None:
    mapped = ImageMapping.parse(f"pytorch:2.3={sys.executable}")
    server = ServerSettings(images=(ImageMapping.parse("sklearn=server"), mapped))
    with control_plane(dataclasses.replace(settings, server=server)) as plane:
        uri = code_uri(plane.server.settings)
        for python in ("/bin/sh", f"{plane.server.settings.home}/jobs/x/code/evil"):
            body = {"job_name": "picked", "spec": job_spec(python=python), "code_uri": uri}
            refused = plane.client.post("/api/v1/jobs", json=body)
            assert refused.status_code == 422, refused.text
            assert "is not an interpreter the server's images setting names" in refused.text
            assert sys.executable in refused.text  # what it may name instead
        body = {"job_name": "mapped", "spec": job_spec(python=sys.executable), "code_uri": uri}
        accepted = plane.client.post("/api/v1/jobs", json=body)
        assert accepted.status_code == 201, accepted.text
        plane.wait_secondary("mapped", "Completed")
