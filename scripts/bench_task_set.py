"""The tasks of scripts/bench_tasks: small coding tasks, each in a throwaway workspace of its own, each with a
checker that decides from the workspace (and, for a question, from the facts) whether it was solved. The agent's
words are never taken for it: a checker runs the code the agent left with tests of its own (a copy kept here, so a
test the agent edited to pass does not count), or compares an answer with the value the code really gives.

Each task also has a reference solution, which tests/apple_code/test_bench_tasks.py applies to check that every
checker says "solved" for real work and "not solved" for the untouched workspace with a confident claim.

Only Python's standard library is used (``python3`` is on every Mac with the Command Line Tools).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CHECK_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Verdict:
    solved: bool
    why: str  # one short line: what the checker found


@dataclass(frozen=True)
class Task:
    name: str
    kind: str  # what sort of task, e.g. "fix a failing test"
    prompt: str
    files: dict[str, str]  # the workspace
    judge: Callable[[Path, str], Verdict]  # (workspace after the run, the agent's answer) -> solved or not
    solution: dict[str, str | None] = field(default_factory=dict)  # reference edits (None: delete the file)
    answer: str = ""  # the reference answer (questions)
    check: str | None = None  # the workspace's own check, for --verify; None: a question, nothing to run


# ----------------------------------------------------------------------------------------------- checking helpers


def run(folder: Path, *args: str, timeout: float = CHECK_TIMEOUT_S) -> tuple[int, str]:
    """Runs the bench's own Python with ``args`` in ``folder`` (HOME there too); its exit code and output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "APPLE_"))}
    env.update(HOME=str(folder), PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(folder))
    try:
        done = subprocess.run([sys.executable, *args], cwd=folder, capture_output=True, text=True, timeout=timeout,
                              env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:g} s"
    return done.returncode, done.stdout + done.stderr


def hidden_tests(test_source: str) -> Callable[[Path, str], Verdict]:
    """A checker that runs ``test_source`` (unittest, kept here) against a copy of the workspace."""

    def judge(workspace: Path, answer: str) -> Verdict:
        with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
            copy = Path(tmp) / "ws"
            shutil.copytree(workspace, copy, symlinks=True)
            (copy / "hidden_check_test.py").write_text(test_source, encoding="utf-8")
            code, output = run(copy, "-m", "unittest", "-q", "hidden_check_test")
        return Verdict(True, "the checker's tests pass") if code == 0 else Verdict(False, _last_error(output))

    return judge


def _last_error(output: str) -> str:
    """The line that says what went wrong: the last exception line (``AssertionError: 1 != 2``), else the last line
    that mentions an error or failure."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        if re.match(r"^[\w.]*(Error|Exception)\b", line):
            return line[:160]
    for line in reversed(lines):
        if re.search(r"Error|error|assert|FAILED|Traceback|timed out", line):
            return line[:160]
    return (lines[-1] if lines else "no output")[:160]


def numbers_in(text: str) -> list[str]:
    return re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.]*\w)", text)


def names_only(expected: str, others: tuple[str, ...]) -> Callable[[Path, str], Verdict]:
    """A checker for a "which file" question: the answer names ``expected`` and none of ``others``."""

    def judge(workspace: Path, answer: str) -> Verdict:
        named = [name for name in others if name in answer]
        if expected not in answer:
            return Verdict(False, f"does not name {expected}")
        if named:
            return Verdict(False, f"also names {', '.join(named)}")
        return Verdict(True, f"names {expected} only")

    return judge


def the_number(truth: Callable[[Path], str], given: tuple[str, ...]) -> Callable[[Path, str], Verdict]:
    """A checker for a "what does it return/print" question: ``truth`` computes the real value from the original
    code; the answer must give it and no other number (the question's own numbers aside)."""

    def judge(workspace: Path, answer: str) -> Verdict:
        real = truth(workspace)
        said = [n for n in dict.fromkeys(numbers_in(answer)) if n not in given]
        if real not in said:
            return Verdict(False, f"the value is {real}; the answer gives {', '.join(said) or 'no number'}")
        if len(said) > 1:
            return Verdict(False, f"gives several values: {', '.join(said)}")
        return Verdict(True, f"gives {real}")

    return judge


def _all(*judges: Callable[[Path, str], Verdict]) -> Callable[[Path, str], Verdict]:
    def judge(workspace: Path, answer: str) -> Verdict:
        passed = []
        for one in judges:
            verdict = one(workspace, answer)
            if not verdict.solved:
                return verdict
            passed.append(verdict.why)
        return Verdict(True, "; ".join(passed))

    return judge


def _file_lacks(path: str, pattern: str, why: str) -> Callable[[Path, str], Verdict]:
    def judge(workspace: Path, answer: str) -> Verdict:
        target = workspace / path
        if not target.is_file():
            return Verdict(False, f"{path} is missing")
        if re.search(pattern, target.read_text(encoding="utf-8", errors="replace"), re.MULTILINE):
            return Verdict(False, why)
        return Verdict(True, f"{path} no longer has it")

    return judge


def _no_python_mentions(word: str) -> Callable[[Path, str], Verdict]:
    def judge(workspace: Path, answer: str) -> Verdict:
        left = sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*.py")
                      if re.search(rf"\b{word}\b", p.read_text(encoding="utf-8", errors="replace")))
        return Verdict(not left, f"{word} still in {', '.join(left)}" if left else f"no {word} left")

    return judge


def _prints(args: tuple[str, ...], expected: str) -> Callable[[Path, str], Verdict]:
    def judge(workspace: Path, answer: str) -> Verdict:
        with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
            copy = Path(tmp) / "ws"
            shutil.copytree(workspace, copy, symlinks=True)
            code, output = run(copy, *args)
        shown = " ".join(args)
        if code != 0:
            return Verdict(False, f"python {shown} exits {code}: {_last_error(output)}")
        if output.strip() != expected:
            return Verdict(False, f"python {shown} prints {output.strip()[:60]!r}, not {expected!r}")
        return Verdict(True, f"python {shown} prints {expected!r}")

    return judge


# ----------------------------------------------------------------------------------------------- the tasks

CALC = '''def add(a, b):
    return a - b


def mul(a, b):
    return a * b
'''
CALC_TEST = '''import unittest

from calc import add, mul


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mul(self):
        self.assertEqual(mul(4, 3), 12)
'''

GREET = '''import argparse


def main(argv=None):
    parser = argparse.ArgumentParser(description="Prints a greeting.")
    parser.add_argument("--name", default="world")
    args = parser.parse_args(argv)
    print(f"Hello, {args.name}!")


if __name__ == "__main__":
    main()
'''
GREET_TEST = '''import contextlib
import io
import unittest

from greet import main


class GreetTest(unittest.TestCase):
    def test_default(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main([])
        self.assertEqual(out.getvalue(), "Hello, world!\\n")
'''

PRICING = '''def calc_total(items):
    """The total of (price, quantity) pairs."""
    return sum(price * quantity for price, quantity in items)
'''
CART = '''from shop.pricing import calc_total


def cart_total(cart):
    return calc_total(cart["items"])
'''
REPORT = '''from shop import pricing
from shop.cart import cart_total


def main():
    cart = {"items": [(2.5, 2), (1.0, 3)]}
    print(cart_total(cart), pricing.calc_total([(4.0, 1)]))


if __name__ == "__main__":
    main()
'''
SHOP_TEST = '''import unittest

from shop.cart import cart_total
from shop.pricing import calc_total


class ShopTest(unittest.TestCase):
    def test_total(self):
        self.assertEqual(calc_total([(2.0, 3)]), 6.0)
        self.assertEqual(cart_total({"items": [(1.5, 2)]}), 3.0)
'''

MYSTERY = '''def mystery(values):
    result = 0
    for index, value in enumerate(values):
        if index % 2 == 0:
            result += value * value
    return result - len(values)
'''

STATS = '''def average(values):
    return sum(values) / len(values)


def summary(values):
    return {"n": len(values), "mean": average(values)}
'''
STATS_TEST = '''import unittest

from stats import summary


class StatsTest(unittest.TestCase):
    def test_summary(self):
        self.assertEqual(summary([2, 4, 6]), {"n": 3, "mean": 4.0})
'''
TRACEBACK = '''Traceback (most recent call last):
  File "app.py", line 12, in <module>
    print(summary(load_values()))
  File "stats.py", line 6, in summary
    return {"n": len(values), "mean": average(values)}
  File "stats.py", line 2, in average
    return sum(values) / len(values)
ZeroDivisionError: division by zero'''

SLUG = '''import re


def slugify(text):
    """'Hello, World!' -> 'hello-world'"""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
'''

PAGINATE = '''def page_count(total, per_page):
    """How many pages ``total`` items fill, ``per_page`` to a page."""
    return total // per_page
'''
PAGINATE_TEST = '''import unittest

from paginate import page_count


class PageCountTest(unittest.TestCase):
    def test_exact(self):
        self.assertEqual(page_count(9, 3), 3)

    def test_partial_last_page(self):
        self.assertEqual(page_count(10, 3), 4)
'''

TEXT_TOOLS = '''def word_count(text):
    return len(text.split())
'''
TEXT_TOOLS_TEST = '''import unittest

from text_tools import word_count


class WordCountTest(unittest.TestCase):
    def test_words(self):
        self.assertEqual(word_count("a b  c"), 3)
'''

CONFIG = '''{
  "host": "localhost",
  "port": 8000,
  "debug": true,
  "workers": 4
}
'''

HEADERS = '''def parse_header(line):
    name, _, value = line.partition(":")
    return name.strip().lower(), value.strip()
'''

MAIN_IMPORT = '''from helpers import format_name

print(f"Hello, {format_name('Ada', 'Lovelace')}!")
'''
HELPERS = '''def format_full_name(first, last):
    return f"{first} {last}"
'''

UTILS = '''def fmt_price(cents):
    return f"${cents / 100:.2f}"


def old_format(cents):
    # Replaced by fmt_price; nothing calls this any more.
    return str(cents) + " cents"
'''
APP = '''from utils import fmt_price

print(fmt_price(1999))
'''
APP_TEST = '''import unittest

from utils import fmt_price


class PriceTest(unittest.TestCase):
    def test_price(self):
        self.assertEqual(fmt_price(250), "$2.50")
'''

FIZZ = '''def fizzbuzz(n):
    """"Fizz" for multiples of 3, "Buzz" for 5, "FizzBuzz" for both, else the number as text."""
    raise NotImplementedError
'''
FIZZ_TEST = '''import unittest

from fizz import fizzbuzz


class FizzTest(unittest.TestCase):
    def test_values(self):
        self.assertEqual([fizzbuzz(n) for n in (1, 3, 5, 15)], ["1", "Fizz", "Buzz", "FizzBuzz"])
'''

COUNT = '''words = ["apple", "kiwi", "banana", "fig", "cherry"]
long_words = [w for w in words if len(w) > 4]
print(len(long_words) * 10 + len(words))
'''

TEMPERATURE = '''def to_fahrenheit(celsius):
    return celsius * 9 / 5 + 32
'''
CONVERT = '''import sys

from temperature import to_fahrenheit


def main(argv):
    value = float(argv[1])
    print(f"{to_fahrenheit(value):.1f}F")


if __name__ == "__main__":
    main(sys.argv)
'''
TEMPERATURE_TEST = '''import unittest

from temperature import to_fahrenheit


class FahrenheitTest(unittest.TestCase):
    def test_boiling(self):
        self.assertEqual(to_fahrenheit(100), 212)
'''

TEXTKIT_CORE = '''def normalize(text):
    """Lower case, single spaces, no spaces at the ends."""
    return " ".join(text.lower().split())
'''
TEXTKIT_REPORT = '''from textkit.core import clean


def title_line(title):
    return "== " + clean(title) + " =="
'''
TEXTKIT_TEST = '''import unittest

from textkit.report import title_line


class TitleTest(unittest.TestCase):
    def test_title(self):
        self.assertEqual(title_line("  Weekly   REPORT "), "== weekly report ==")
'''

CHECKSUM = '''import hashlib

NAMES = ["ada", "grace", "linus", "guido"]


def tag(names):
    joined = "|".join(sorted(names)).encode()
    return hashlib.sha256(joined).hexdigest()[:10]


print(tag(NAMES))
'''

DISCOUNT_PRICING = '''def with_tax(price, rate=0.2):
    return round(price * (1 + rate), 2)
'''
DISCOUNT_PRICING_TEST = '''import unittest

from pricing import with_tax


class TaxTest(unittest.TestCase):
    def test_tax(self):
        self.assertEqual(with_tax(10.0), 12.0)
'''

NIGHTLY = '''import sys


def line_total(line):
    """'widget,4.50,2' -> 9.0: the item's price times its quantity."""
    name, price, quantity = line.split(",")
    return float(price) * int(quantity)


def main(path):
    with open(path, encoding="utf-8") as handle:
        total = sum(line_total(line.strip()) for line in handle if line.strip())
    print(f"{total:.2f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "orders.csv")
'''
NIGHTLY_ORDERS = "widget,4.50,2\ngadget,10.00,1\n"
NIGHTLY_LOG = '''2026-11-27 02:00:01 nightly: python3 nightly.py /srv/orders/2026-11-26.csv
2026-11-27 02:00:01 nightly: 1,204 lines to read
Traceback (most recent call last):
  File "nightly.py", line 18, in <module>
    main(sys.argv[1] if len(sys.argv) > 1 else "orders.csv")
  File "nightly.py", line 12, in main
    total = sum(line_total(line.strip()) for line in handle if line.strip())
  File "nightly.py", line 12, in <genexpr>
    total = sum(line_total(line.strip()) for line in handle if line.strip())
  File "nightly.py", line 7, in line_total
    return float(price) * int(quantity)
ValueError: could not convert string to float: '$4.50'
2026-11-27 02:00:01 nightly: failed at line 318: 'widget,$4.50,2'
'''

SERVICE_TOML = '''# The service's settings.
[server]
host = "127.0.0.1"
port = 8000

[database]
url = "sqlite:///app.db"
pool_size = 5
'''

UNITTEST = "python3 -m unittest -q"


def _slug_test_judge(workspace: Path, answer: str) -> Verdict:
    """The agent's test file must exist, pass on slug.py as given, run at least two tests, and fail on a broken
    slugify (so it tests something)."""
    test = workspace / "test_slug.py"
    if not test.is_file():
        return Verdict(False, "test_slug.py is missing")
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        good = Path(tmp) / "good"
        good.mkdir()
        shutil.copy(test, good / "test_slug.py")
        (good / "slug.py").write_text(SLUG, encoding="utf-8")
        code, output = run(good, "-m", "unittest", "-v", "test_slug")
        ran = re.search(r"Ran (\d+) tests?", output)
        if code != 0:
            return Verdict(False, f"its tests fail on the real slugify: {_last_error(output)}")
        if ran is None or int(ran.group(1)) < 2:
            return Verdict(False, f"runs {ran.group(1) if ran else 'no'} test(s), fewer than two")
        bad = Path(tmp) / "bad"
        bad.mkdir()
        shutil.copy(test, bad / "test_slug.py")
        (bad / "slug.py").write_text("def slugify(text):\n    return text.lower()\n", encoding="utf-8")
        code, _ = run(bad, "-m", "unittest", "-q", "test_slug")
        if code == 0:
            return Verdict(False, "its tests also pass on a broken slugify")
    return Verdict(True, f"{ran.group(1)} tests; they pass on slugify and catch a broken one")


def _config_judge(workspace: Path, answer: str) -> Verdict:
    import json

    try:
        config = json.loads((workspace / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return Verdict(False, f"config.json does not load: {exc}")
    expected = {"host": "localhost", "port": 8080, "debug": True, "workers": 4}
    if config != expected:
        return Verdict(False, f"config.json is {config}")
    return Verdict(True, "port 8080, the rest unchanged")


def _mystery_truth(workspace: Path) -> str:
    namespace: dict[str, object] = {}
    exec(MYSTERY, namespace)  # the original, not the workspace's (the agent may have changed it)
    return str(namespace["mystery"]([3, 1, 4, 1, 5]))  # type: ignore[operator]


def _count_truth(workspace: Path) -> str:
    words = ["apple", "kiwi", "banana", "fig", "cherry"]
    return str(len([w for w in words if len(w) > 4]) * 10 + len(words))


def checksum_tag() -> str:
    """What checksum.py prints (computed here from the same names, not by running the workspace's copy)."""
    import hashlib

    return hashlib.sha256("|".join(sorted(["ada", "grace", "linus", "guido"])).encode()).hexdigest()[:10]


def _says(truth: Callable[[], str]) -> Callable[[Path, str], Verdict]:
    """A checker for a question whose answer cannot be guessed: the answer must contain it."""

    def judge(workspace: Path, answer: str) -> Verdict:
        real = truth()
        return Verdict(True, f"gives {real}") if real in answer else Verdict(False, f"does not give {real}")

    return judge


def _discount_test_judge(workspace: Path, answer: str) -> Verdict:
    """discount must work (hidden tests), and test_pricing.py must have a test of it that passes on a right
    discount and fails on a wrong one."""
    works = hidden_tests('''import unittest

from pricing import discount, with_tax


class DiscountTest(unittest.TestCase):
    def test_discount(self):
        self.assertEqual(discount(80.0, 25), 60.0)
        self.assertEqual(discount(10.0, 0), 10.0)
        self.assertEqual(with_tax(10.0), 12.0)
''')(workspace, answer)
    if not works.solved:
        return works
    test = workspace / "test_pricing.py"
    if not test.is_file() or "discount" not in test.read_text(encoding="utf-8", errors="replace"):
        return Verdict(False, "test_pricing.py has no test of discount")
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        bad = Path(tmp) / "bad"
        shutil.copytree(workspace, bad, symlinks=True)
        (bad / "pricing.py").write_text(DISCOUNT_PRICING + "\n\ndef discount(price, percent):\n    return price\n",
                                        encoding="utf-8")
        code, _ = run(bad, "-m", "unittest", "-q", "test_pricing")
    if code == 0:
        return Verdict(False, "test_pricing.py also passes on a discount that takes nothing off")
    return Verdict(True, "discount works; its test catches a wrong one")


def _toml_judge(workspace: Path, answer: str) -> Verdict:
    import tomllib

    try:
        config = tomllib.loads((workspace / "service.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return Verdict(False, f"service.toml does not load: {exc}")
    expected = {"server": {"host": "127.0.0.1", "port": 8000, "timeout_seconds": 30},
                "database": {"url": "sqlite:///app.db", "pool_size": 10}}
    if config != expected:
        return Verdict(False, f"service.toml is {config}")
    return Verdict(True, "valid TOML: timeout 30, pool 10, the rest unchanged")


TASKS: tuple[Task, ...] = (
    Task(
        "fix-failing-test", "fix a failing test",
        "The tests in test_calc.py fail. Fix the bug in calc.py (do not change the tests).",
        {"calc.py": CALC, "test_calc.py": CALC_TEST},
        hidden_tests(CALC_TEST + '''

class MoreTest(unittest.TestCase):
    def test_more(self):
        self.assertEqual(add(-2, 5), 3)
        self.assertEqual(add(0.5, 0.25), 0.75)
'''),
        solution={"calc.py": CALC.replace("a - b", "a + b")},
        check=UNITTEST,
    ),
    Task(
        "add-cli-flag", "add a command-line flag",
        "Add a --shout flag to greet.py: with it, the greeting is printed in capital letters "
        "(e.g. `python3 greet.py --name Ana --shout` prints HELLO, ANA!).",
        {"greet.py": GREET, "test_greet.py": GREET_TEST},
        _all(_prints(("greet.py", "--name", "Ana", "--shout"), "HELLO, ANA!"),
             _prints(("greet.py", "--name", "Ana"), "Hello, Ana!")),
        solution={"greet.py": GREET.replace(
            '''    parser.add_argument("--name", default="world")
    args = parser.parse_args(argv)
    print(f"Hello, {args.name}!")''', '''    parser.add_argument("--name", default="world")
    parser.add_argument("--shout", action="store_true")
    args = parser.parse_args(argv)
    text = f"Hello, {args.name}!"
    print(text.upper() if args.shout else text)''')},
        check=UNITTEST,
    ),
    Task(
        "rename-function", "rename a function across files",
        "Rename the function calc_total to order_total everywhere: its definition and every use, in every file.",
        {"shop/__init__.py": "", "shop/pricing.py": PRICING, "shop/cart.py": CART, "report.py": REPORT,
         "test_shop.py": SHOP_TEST},
        _all(_no_python_mentions("calc_total"), _prints(("report.py",), "8.0 4.0"),
             hidden_tests('''import unittest

from shop.pricing import order_total


class RenamedTest(unittest.TestCase):
    def test_total(self):
        self.assertEqual(order_total([(2.0, 3), (1.0, 1)]), 7.0)
''')),
        solution={"shop/pricing.py": PRICING.replace("calc_total", "order_total"),
                  "shop/cart.py": CART.replace("calc_total", "order_total"),
                  "report.py": REPORT.replace("calc_total", "order_total"),
                  "test_shop.py": SHOP_TEST.replace("calc_total", "order_total")},
        check=UNITTEST,
    ),
    Task(
        "explain-return", "explain what a function returns",
        "What does mystery([3, 1, 4, 1, 5]) in mystery.py return? Answer with the number.",
        {"mystery.py": MYSTERY},
        the_number(_mystery_truth, ("3", "1", "4", "5")),
        answer="It returns 45.",
    ),
    Task(
        "bug-from-traceback", "find a bug from a traceback",
        f"app.py crashed with this traceback when the list of values was empty:\n\n{TRACEBACK}\n\n"
        "Fix stats.py so that summary([]) returns a mean of 0.0 instead of crashing.",
        {"stats.py": STATS, "test_stats.py": STATS_TEST},
        hidden_tests('''import unittest

from stats import average, summary


class EmptyTest(unittest.TestCase):
    def test_empty(self):
        self.assertEqual(summary([]), {"n": 0, "mean": 0.0})

    def test_still_averages(self):
        self.assertEqual(average([2, 4]), 3)
        self.assertEqual(summary([1, 2]), {"n": 2, "mean": 1.5})
'''),
        solution={"stats.py": STATS.replace("    return sum(values) / len(values)",
                                            "    if not values:\n        return 0.0\n"
                                            "    return sum(values) / len(values)")},
        check=UNITTEST,
    ),
    Task(
        "write-missing-test", "write a missing test",
        "slug.py has no tests. Write test_slug.py with unittest tests for slugify (at least two cases).",
        {"slug.py": SLUG},
        _slug_test_judge,
        solution={"test_slug.py": '''import unittest

from slug import slugify


class SlugTest(unittest.TestCase):
    def test_words(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_spaces(self):
        self.assertEqual(slugify("  A  b "), "a-b")
'''},
        check=f"{UNITTEST} test_slug",
    ),
    Task(
        "off-by-one", "fix an off-by-one error",
        "test_paginate.py fails: fix page_count in paginate.py.",
        {"paginate.py": PAGINATE, "test_paginate.py": PAGINATE_TEST},
        hidden_tests(PAGINATE_TEST + '''

class MoreTest(unittest.TestCase):
    def test_more(self):
        self.assertEqual(page_count(0, 5), 0)
        self.assertEqual(page_count(1, 5), 1)
        self.assertEqual(page_count(11, 5), 3)
'''),
        solution={"paginate.py": PAGINATE.replace("total // per_page", "-(-total // per_page)")},
        check=UNITTEST,
    ),
    Task(
        "add-function", "add a function",
        "Add a function is_palindrome(text) to text_tools.py: True when the text reads the same backwards, "
        "ignoring case, spaces and punctuation.",
        {"text_tools.py": TEXT_TOOLS, "test_text_tools.py": TEXT_TOOLS_TEST},
        hidden_tests('''import unittest

from text_tools import is_palindrome, word_count


class PalindromeTest(unittest.TestCase):
    def test_palindromes(self):
        self.assertTrue(is_palindrome("Never odd or even"))
        self.assertTrue(is_palindrome("A man, a plan, a canal: Panama!"))
        self.assertFalse(is_palindrome("apple flow"))
        self.assertEqual(word_count("x y"), 2)
'''),
        solution={"text_tools.py": TEXT_TOOLS + '''

def is_palindrome(text):
    letters = [c.lower() for c in text if c.isalnum()]
    return letters == letters[::-1]
'''},
        check=UNITTEST,
    ),
    Task(
        "edit-config", "change a setting",
        "Set the port in config.json to 8080. Keep everything else as it is.",
        {"config.json": CONFIG},
        _config_judge,
        solution={"config.json": CONFIG.replace("8000", "8080")},
        check="python3 -c \"import json; json.load(open('config.json'))\"",
    ),
    Task(
        "find-definition", "find where a function is defined",
        "Which file defines the function parse_header? Answer with its path.",
        {"net/__init__.py": "", "net/headers.py": HEADERS,
         "net/client.py": "from net.headers import parse_header\n\n\ndef read(lines):\n"
                          "    return dict(parse_header(line) for line in lines)\n",
         "net/server.py": "from net import client\n\n\ndef handle(lines):\n    return client.read(lines)\n",
         "main.py": "from net.server import handle\n\nprint(handle(['Host: example.org']))\n"},
        names_only("headers.py", ("client.py", "server.py", "main.py")),
        answer="net/headers.py",
    ),
    Task(
        "fix-import", "fix a broken import",
        "Running `python3 main.py` fails with an ImportError. Fix main.py so that it prints the greeting.",
        {"main.py": MAIN_IMPORT, "helpers.py": HELPERS},
        _prints(("main.py",), "Hello, Ada Lovelace!"),
        solution={"main.py": MAIN_IMPORT.replace("format_name", "format_full_name")},
        check="python3 main.py",
    ),
    Task(
        "remove-dead-code", "delete unused code",
        "Delete the unused function old_format from utils.py. app.py must keep working.",
        {"utils.py": UTILS, "app.py": APP, "test_app.py": APP_TEST},
        _all(_file_lacks("utils.py", r"^def old_format\b", "utils.py still defines old_format"),
             _prints(("app.py",), "$19.99")),
        solution={"utils.py": UTILS.split("\n\n\ndef old_format")[0] + "\n"},
        check=UNITTEST,
    ),
    Task(
        "implement-stub", "implement a stub so a test passes",
        "Implement fizzbuzz in fizz.py so that test_fizz.py passes.",
        {"fizz.py": FIZZ, "test_fizz.py": FIZZ_TEST},
        hidden_tests(FIZZ_TEST + '''

class MoreTest(unittest.TestCase):
    def test_more(self):
        self.assertEqual([fizzbuzz(n) for n in (2, 9, 10, 30)], ["2", "Fizz", "Buzz", "FizzBuzz"])
'''),
        solution={"fizz.py": FIZZ.replace("    raise NotImplementedError", '''    if n % 15 == 0:
        return "FizzBuzz"
    if n % 3 == 0:
        return "Fizz"
    if n % 5 == 0:
        return "Buzz"
    return str(n)''')},
        check=UNITTEST,
    ),
    Task(
        "predict-output", "say what a script prints",
        "What does `python3 count.py` print? Answer with the number.",
        {"count.py": COUNT},
        the_number(_count_truth, ()),
        answer="It prints 35.",
    ),
    Task(
        "two-file-change", "a change across two files",
        "Add a to_celsius(fahrenheit) function to temperature.py, and a --to-celsius flag to convert.py that uses "
        "it: `python3 convert.py 212 --to-celsius` must print 100.0C. Without the flag, convert.py keeps printing "
        "Fahrenheit (`python3 convert.py 100` prints 212.0F).",
        {"temperature.py": TEMPERATURE, "convert.py": CONVERT, "test_temperature.py": TEMPERATURE_TEST},
        _all(_prints(("convert.py", "212", "--to-celsius"), "100.0C"), _prints(("convert.py", "100"), "212.0F"),
             hidden_tests('''import unittest

from temperature import to_celsius, to_fahrenheit


class CelsiusTest(unittest.TestCase):
    def test_both_ways(self):
        self.assertEqual(to_celsius(32), 0)
        self.assertAlmostEqual(to_celsius(to_fahrenheit(37.5)), 37.5)
''')),
        solution={"temperature.py": TEMPERATURE + "\n\ndef to_celsius(fahrenheit):\n"
                                                  "    return (fahrenheit - 32) * 5 / 9\n",
                  "convert.py": CONVERT.replace("from temperature import to_fahrenheit",
                                                "from temperature import to_celsius, to_fahrenheit").replace(
                      '''    print(f"{to_fahrenheit(value):.1f}F")''', '''    if "--to-celsius" in argv:
        print(f"{to_celsius(value):.1f}C")
    else:
        print(f"{to_fahrenheit(value):.1f}F")''')},
        check=UNITTEST,
    ),
    Task(
        "import-after-rename", "a failing import after a rename",
        "The tests fail since the function clean in textkit/core.py was renamed to normalize. Fix the code that "
        "still uses the old name (keep the new name).",
        {"textkit/__init__.py": "", "textkit/core.py": TEXTKIT_CORE, "textkit/report.py": TEXTKIT_REPORT,
         "test_report.py": TEXTKIT_TEST},
        _all(_file_lacks("textkit/core.py", r"^def clean\b", "core.py defines clean again instead"),
             hidden_tests(TEXTKIT_TEST + '''

class MoreTest(unittest.TestCase):
    def test_more(self):
        from textkit.core import normalize

        self.assertEqual(title_line("A"), "== a ==")
        self.assertEqual(normalize(" X  Y "), "x y")
''')),
        solution={"textkit/report.py": TEXTKIT_REPORT.replace("clean", "normalize")},
        check=UNITTEST,
    ),
    Task(
        "run-to-answer", "a question answered only by running the code",
        "What does `python3 checksum.py` print? Answer with the exact output.",
        {"checksum.py": CHECKSUM},
        _says(checksum_tag),
        answer=f"It prints {checksum_tag()}.",
    ),
    Task(
        "change-with-test", "a change that needs a new test",
        "Add a function discount(price, percent) to pricing.py that takes percent % off the price (discount(80.0, "
        "25) is 60.0), and add a unittest test for it to test_pricing.py.",
        {"pricing.py": DISCOUNT_PRICING, "test_pricing.py": DISCOUNT_PRICING_TEST},
        _discount_test_judge,
        solution={"pricing.py": DISCOUNT_PRICING + "\n\ndef discount(price, percent):\n"
                                                    "    return round(price * (100 - percent) / 100, 2)\n",
                  "test_pricing.py": DISCOUNT_PRICING_TEST.replace("from pricing import with_tax",
                                                                   "from pricing import discount, with_tax")
                  + "\n    def test_discount(self):\n        self.assertEqual(discount(80.0, 25), 60.0)\n"},
        check=UNITTEST,
    ),
    Task(
        "bug-from-log", "a bug found only by reading a log",
        "Last night's run of nightly.py failed; its log is logs/nightly.log. Fix nightly.py so that input like the "
        "line that failed is read correctly (the totals must stay right).",
        {"nightly.py": NIGHTLY, "orders.csv": NIGHTLY_ORDERS, "logs/nightly.log": NIGHTLY_LOG},
        hidden_tests('''import unittest

from nightly import line_total


class LineTest(unittest.TestCase):
    def test_dollar_prices(self):
        self.assertEqual(line_total("widget,$4.50,2"), 9.0)
        self.assertEqual(line_total("gadget,10.00,1"), 10.0)
'''),
        solution={"nightly.py": NIGHTLY.replace("return float(price) * int(quantity)",
                                                'return float(price.strip().lstrip("$")) * int(quantity)')},
        check="python3 nightly.py orders.csv",
    ),
    Task(
        "edit-toml", "a config edit that must keep the file valid",
        "In service.toml, add timeout_seconds = 30 to the [server] section and raise the database pool_size to 10. "
        "The file must stay valid TOML.",
        {"service.toml": SERVICE_TOML},
        _toml_judge,
        solution={"service.toml": SERVICE_TOML.replace("port = 8000\n", "port = 8000\ntimeout_seconds = 30\n")
                  .replace("pool_size = 5", "pool_size = 10")},
        check="python3 -c \"import tomllib; tomllib.load(open('service.toml', 'rb'))\"",
    ),
)


def make_workspace(task: Task, folder: Path) -> Path:
    """A fresh copy of the task's workspace in ``folder`` (created)."""
    folder.mkdir(parents=True)
    for name, text in task.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder


def apply_solution(task: Task, workspace: Path) -> None:
    """The reference solution's edits, as an agent would make them."""
    for name, text in task.solution.items():
        path = workspace / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
