"""Out of file descriptors: the daemon raises its soft limit at start (launchd's is 256), and an agent that cannot
start because the limit is reached says so instead of blaming the agent's command setting."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

from apple_flow.paths import PROJECT_ROOT

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT / "src"), str(PROJECT_ROOT / "tests")])}

# Builds the connector, then takes every descriptor but one (Popen needs several for its pipes) and runs a turn.
OUT_OF_FILES = """
import os, resource, sys
from apple_flow.config import load_settings
from apple_flow.connectors.afm import AfmConnector
from support.turns import outcome
connector = AfmConnector(load_settings(env_file=None, afm_command=sys.argv[1], default_workspace=sys.argv[2]))
resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
os.close(held.pop())
result = outcome(connector, "hi")
for fd in held:
    os.close(fd)
print(result.status.value)
print(result.as_text())
"""


def test_an_agent_that_cannot_start_for_lack_of_descriptors_says_so(fake_apple_code: Path, workspace: Path) -> None:
    done = subprocess.run([sys.executable, "-c", OUT_OF_FILES, str(fake_apple_code), str(workspace)], env=ENV,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    status, text = done.stdout.split("\n", 1)
    assert status == "failed"
    assert "too many files open (its limit is 128)" in text
    assert "apple_flow_afm_command" not in text and "cannot be run" not in text


RAISE = """
import resource
from apple_flow.filelimit import raise_open_files
print(raise_open_files(), resource.getrlimit(resource.RLIMIT_NOFILE)[1])
"""


def limited(soft: int, hard: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_soft_limit_is_raised_at_start_up_to_the_hard_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = 2048 if hard == resource.RLIM_INFINITY else min(hard, 2048)
    for soft, top, expected in ((256, ceiling, ceiling), (64, 200, 200)):
        done = subprocess.run([sys.executable, "-c", RAISE], env=ENV, capture_output=True, text=True, timeout=60,
                              preexec_fn=lambda s=soft, t=top: limited(s, t))  # type: ignore[misc]
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [str(expected), str(top)]
