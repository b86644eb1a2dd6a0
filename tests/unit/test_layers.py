"""No module imports one from a higher layer: the command line sits on top, the web page below it, the health checks
below both, the composition root (``assemble``) below them, then the daemon, then the parts it drives (channels,
connectors), then what everything shares. Imports inside functions count too: a lazy import is still a dependency.
Across the channel seam the daemon sees only the channel interface (``channels.base``), never a channel."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# Highest first. Each module's layer is that of the longest matching prefix.
LAYERS: dict[str, float] = {
    "apple_flow.__main__": 6,
    "apple_flow.cli": 6,
    "apple_flow.web": 5,
    "apple_flow.health": 4,
    "apple_flow.mcp_server": 4,  # the MCP server: drives the connectors (and reaches the daemon)
    "apple_flow.assemble": 3.75,  # the composition root: builds the daemon (both halves), its channel and connectors
    "apple_flow.daemon.running": 3.5,  # the half that acts on what the deciding half (and the store below it) says
    "apple_flow.daemon": 3,  # the deciding half, the store
    "apple_flow.channels": 2,
    "apple_flow.connectors": 2,
    "apple_flow.localmodel": 2,
    "apple_flow.localmodel.catalog": 1,  # the local models' names and sources: data the settings check names against
    "apple_flow": 1,  # config, envfile, handles, host, local_name, paths, privatefile, regularfile
}


def layer(module: str) -> float:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path, module: str) -> set[str]:
    names: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
    return {name for name in names if name == "apple_flow" or name.startswith("apple_flow.")}


def upward_imports(src: Path = SRC) -> list[str]:
    found = []
    for path in sorted(src.rglob("*.py")):
        module = module_name(path, src)
        for target in sorted(imported(path, module)):
            if target != "apple_flow" and layer(target) > layer(module):
                found.append(f"{module} (layer {layer(module)}) imports {target} (layer {layer(target)})")
    return found


CHANNEL_SEAM = "apple_flow.channels.base"


def channels_reached(src: Path = SRC) -> list[str]:
    """The daemon's imports from ``apple_flow.channels`` other than its interface module."""
    found = []
    for path in sorted((src / "apple_flow" / "daemon").rglob("*.py")):
        module = module_name(path, src)
        for target in sorted(imported(path, module)):
            if (target == "apple_flow.channels" or target.startswith("apple_flow.channels.")) \
                    and target != CHANNEL_SEAM:
                found.append(f"{module} imports {target}")
    return found


def test_the_daemon_reaches_channels_only_through_their_interface() -> None:
    assert channels_reached() == []


def test_the_seam_check_sees_a_daemon_module_reaching_into_a_channel(tmp_path: Path) -> None:
    # As owner_notices once did: the running half importing the iMessage permissions (lazily, even) is reported; its
    # import of the interface module is fine.
    running = tmp_path / "apple_flow" / "daemon" / "running"
    running.mkdir(parents=True)
    (running / "owner_notices.py").write_text(
        "from apple_flow.channels.base import Access\n\n"
        "def f():\n    from apple_flow.channels.imessage.permissions import State\n"
    )
    (running / "runtime.py").write_text("from ...channels import registry\n")
    assert channels_reached(tmp_path) == [
        "apple_flow.daemon.running.owner_notices imports apple_flow.channels.imessage.permissions",
        "apple_flow.daemon.running.runtime imports apple_flow.channels",
    ]


def test_no_module_imports_from_a_higher_layer() -> None:
    assert upward_imports() == []


def test_the_deciding_half_imports_nothing_from_the_running_half(tmp_path: Path) -> None:
    # The rule above holds for the real tree; here, a planted import from the deciding half into the running half
    # is what the walk reports.
    package = tmp_path / "apple_flow" / "daemon"
    (package / "deciding").mkdir(parents=True)
    (package / "running").mkdir()
    (package / "deciding" / "orchestrator.py").write_text("from apple_flow.daemon.running.sending import Sender\n")
    (package / "running" / "runtime.py").write_text("from apple_flow.daemon.deciding import orchestrator\n")
    assert upward_imports(tmp_path) == [
        "apple_flow.daemon.deciding.orchestrator (layer 3) imports apple_flow.daemon.running.sending (layer 3.5)"
    ]


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    # The same walk over a tree with one upward import (the web page reaching into the command line, as it once did)
    # reports it; the command line importing the web page is fine.
    package = tmp_path / "apple_flow"
    (package / "web").mkdir(parents=True)
    (package / "cli").mkdir()
    (package / "web" / "page.py").write_text("def f():\n    from apple_flow.cli.diagnostics import Check\n")
    (package / "cli" / "diagnostics.py").write_text("from ..web import page\n")
    assert upward_imports(tmp_path) == ["apple_flow.web.page (layer 5) imports apple_flow.cli.diagnostics (layer 6)"]
