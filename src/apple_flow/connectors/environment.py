"""The environment an agent's process gets: an allowlist, never the daemon's own.

The daemon's environment holds its secrets (under launchd every ``.env`` value, ``APPLE_FLOW_WEB_TOKEN`` among
them, is an environment variable), and whatever an agent's process can read, a command it runs can print. So each
agent gets what any process needs (``BASE_VARIABLES`` and the ``LC_*`` locale variables), the variables its own
connector declares (``CliConnector.environment_variables``: the Anthropic key only for claude-cli, and so on), the
names the owner adds with ``APPLE_FLOW_AGENT_ENVIRONMENT`` (a proxy, a CA file), and the daemon's run marker. No
``APPLE_FLOW_*`` variable ever gets through, whoever names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

BASE_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TMPDIR", "TERM")
LOCALE_PREFIX = "LC_"
# The daemon's settings and secrets: never passed on, even when named.
WITHHELD_PREFIX = "APPLE_FLOW_"
# Every process the daemon starts carries this run's token, so the next daemon can find and kill what a kill -9
# left behind (daemon/running/orphans.py). Not a secret, and not named APPLE_FLOW_*.
RUN_MARKER = "AF_DAEMON_RUN"


def is_withheld(name: str) -> bool:
    return name.upper().startswith(WITHHELD_PREFIX)


def agent_environment(source: Mapping[str, str], names: Iterable[str]) -> dict[str, str]:
    """The variables of ``source`` an agent may see: the base ones, ``LC_*``, the run marker and ``names``; none
    named ``APPLE_FLOW_*``."""
    allowed = {*BASE_VARIABLES, RUN_MARKER, *names}
    return {
        name: value
        for name, value in source.items()
        if (name in allowed or name.startswith(LOCALE_PREFIX)) and not is_withheld(name)
    }
