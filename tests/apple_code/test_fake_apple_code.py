"""The fake apple-code of the Python tests (tests/support/fake_apple_code.py) against the real binary: the same
options, each with the same value or none, and the same version, so the connector is never tested against an
apple-code that no longer exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

# An option line of `--help`: two spaces, the spellings (`--name VALUE, -alias`), two or more spaces, the help.
OPTION_LINE = re.compile(r"^  (-\S.*?)(?:\s{2,}|$)")


def run(binary: Path, *args: str) -> str:
    done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{binary} {' '.join(args)}: exit {done.returncode}: {done.stderr}"
    return done.stdout


def options_in_help(text: str) -> dict[str, str | None]:
    """Each spelling of each option in a `--help` text, with its value's placeholder (None: takes no value)."""
    options: dict[str, str | None] = {}
    for line in text.splitlines():
        match = OPTION_LINE.match(line)
        if match:
            for spelling in match.group(1).split(", "):
                name, _, value = spelling.partition(" ")
                options[name] = value or None
    return options


def test_the_help_parser_reads_every_option_line() -> None:
    text = "usage: x\n\n  --cwd DIR   workspace\n  --output-format text|json\n     --not-one\n  --help, -h  this"
    assert options_in_help(text) == {"--cwd": "DIR", "--output-format": "text|json", "--help": None, "-h": None}


def test_the_fake_takes_exactly_the_options_of_the_real_apple_code(apple_code_bin: Path,
                                                                   fake_apple_code: Path) -> None:
    real = options_in_help(run(apple_code_bin, "--help"))
    assert len(real) > 15, "apple-code --help lists no options: has its layout changed?"
    assert options_in_help(run(fake_apple_code, "--help")) == real


def test_the_fake_accepts_every_option_the_real_one_lists(apple_code_bin: Path, fake_apple_code: Path,
                                                           tmp_path: Path) -> None:
    """Not only its help: its parser. Every option at once (with a value where one is taken) is not a usage error."""
    args: list[str] = []
    for name, value in options_in_help(run(apple_code_bin, "--help")).items():
        args += [name, str(tmp_path)] if value else [name]
    assert run(fake_apple_code, *args).startswith("usage: apple-code")


def test_the_fake_reports_the_real_version(apple_code_bin: Path, fake_apple_code: Path) -> None:
    real = run(apple_code_bin, "--version")
    assert re.fullmatch(r"apple-code \d+\.\d+\.\d+\n", real)
    assert run(fake_apple_code, "--version") == real
