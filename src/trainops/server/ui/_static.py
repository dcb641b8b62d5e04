"""The UI's own files (``static/``: its stylesheet, script and icon), served from the package.

Only files that ship in ``static/`` are served, by a plain name (no directories); each is read
once and kept. Nothing is fetched from anywhere else at run time.
"""

from __future__ import annotations

import re
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["static_file"]

_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".txt": "text/plain; charset=utf-8",
}
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,80}$")
_loaded: dict[str, bytes] = {}


def _read(name: str) -> bytes | None:
    if name not in _loaded:
        if not _NAME.match(name) or ".." in name or _kind(name) is None:
            return None
        entry = resources.files("trainops.server.ui").joinpath("static", name)
        if not entry.is_file():
            return None
        _loaded[name] = entry.read_bytes()
    return _loaded[name]


def _kind(name: str) -> str | None:
    return next((kind for ext, kind in _TYPES.items() if name.endswith(ext)), None)


async def static_file(request: Request) -> Response:
    """``GET /ui/static/{name}``: the file, cached by the browser for an hour (its URL carries
    the version); 404 for anything that is not one of ours."""
    name = request.path_params["name"]
    data = _read(name)
    if data is None:
        return Response(b"no such file", 404, media_type="text/plain")
    headers = {"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"}
    return Response(data, media_type=_kind(name), headers=headers)
