"""A full disk in one line: ENOSPC found anywhere in an exception's chain, the full mount named."""

from __future__ import annotations

import errno
from pathlib import Path

from trainops._disk import full_disk_message, is_out_of_space, mount_point


def _raised_from(cause: BaseException) -> RuntimeError:
    try:
        try:
            raise cause
        except OSError as exc:
            raise RuntimeError("uploading failed") from exc
    except RuntimeError as outer:
        return outer


def test_enospc_is_found_through_the_chain_and_nothing_else_is() -> None:
    assert is_out_of_space(_raised_from(OSError(errno.ENOSPC, "No space left on device")))
    assert is_out_of_space(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not is_out_of_space(_raised_from(OSError(errno.EACCES, "Permission denied")))
    assert not is_out_of_space(ValueError("no space left on device"))  # words are not errors


def test_the_message_names_the_mount_of_the_file_that_could_not_be_written(
    tmp_path: Path,
) -> None:
    target = tmp_path / "objects" / "code.tar.gz"
    exc = _raised_from(OSError(errno.ENOSPC, "No space left on device", str(target)))
    message = full_disk_message(exc, [])
    mount = mount_point(tmp_path)
    assert message == (
        f"no space left on device under {mount} (writing {target}): free some space there "
        f"(`du -xsh {mount}/*` shows what takes it) and run the command again"
    )
    assert "\n" not in message


def test_without_a_file_or_a_full_candidate_the_message_still_says_what_to_do(
    tmp_path: Path,
) -> None:
    exc = OSError(errno.ENOSPC, "No space left on device")
    message = full_disk_message(exc, [tmp_path])  # tmp_path's disk is not full
    assert message.startswith("no space left on device: free some space")


def test_a_hostile_file_name_stays_on_one_line(tmp_path: Path) -> None:
    target = tmp_path / "src\ntrainops: error: all is fine\x1b[2J"
    exc = OSError(errno.ENOSPC, "No space left on device", str(target))
    message = full_disk_message(exc, [])
    assert "\n" not in message and "\x1b" not in message
    assert repr(str(target)) in message
