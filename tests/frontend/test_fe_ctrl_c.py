"""Ctrl-C on trio, which delivers KeyboardInterrupt into a task parked in a shield:
an open or a close waiting for the worker holds the first press until the worker has
answered, then raises it, nothing left behind; a second press goes on at once, and the
device closes by itself (an open) or a later close finishes it (a close)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def scenario(case: str, presses: int) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    done = subprocess.run(
        [sys.executable, str(HERE / "ctrl_c_on_trio.py"), case, str(presses)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n")[:-1]


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_during_open_device_leaves_nothing_open(presses: int) -> None:
    # Once: set_device returns, the device is closed, then KeyboardInterrupt. Twice:
    # KeyboardInterrupt at once; the worker closes the device when set_device returns.
    assert scenario("open", presses) == ["interrupted ", "devices 0", "threads 0"]


def test_ctrl_c_during_a_close_is_raised_once_the_device_is_released() -> None:
    # The kernel's failure is a note on the KeyboardInterrupt (rule 6); a later close
    # has nothing left to do.
    assert scenario("close", 1) == ["interrupted 507015", "returned", "devices 0", "threads 0"]


def test_a_close_left_by_ctrl_c_twice_is_finished_by_the_next() -> None:
    # It waited for the release and raised the kernel's failure (it had been lost, and
    # the later close returned at once with the worker still running).
    assert scenario("close", 2) == ["interrupted ", "raised 507015", "devices 0", "threads 0"]


def test_ctrl_c_during_a_borrows_exit_keeps_the_stream_in_the_pool() -> None:
    # The exit's sync, cut short, took the stream out of the pool for good (a pool of
    # none, whose next borrow said its streams "could not be replaced") and the
    # kernel's failure surfaced only at the device's close.
    assert scenario("borrow", 1) == [
        "interrupted 507015",
        "pool 1",
        "returned",
        "devices 0",
        "threads 0",
    ]


def test_the_exits_after_ctrl_c_do_not_wait_and_the_next_close_reports() -> None:
    # The exits of a stream and a device ended by Ctrl-C waited for work that may never
    # end (each took one more press); now the worker releases them after that work.
    assert scenario("exit", 1) == ["interrupted ", "raised 507015", "devices 0", "threads 0"]


def test_ctrl_c_in_an_exit_under_an_exception_goes_on_with_the_failure() -> None:
    # The close held the press and then dropped it for the block's exception.
    assert scenario("exit-on-error", 1) == [
        "interrupted 507015 after ValueError",
        "returned",
        "devices 0",
        "threads 0",
    ]
