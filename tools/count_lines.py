"""Count the lines of the package, room by room: ``python tools/count_lines.py [--max N]``.

Every line of every ``.py`` file under ``pychop_compat/`` counts (code, docstrings,
comments and blank lines alike: what ``wc -l`` counts), so the number cannot be
lowered by reformatting.  ``--max N`` exits with status 1 when the total is over N.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pychop_compat"


def count(package: Path = PACKAGE) -> dict:
    """Lines per room: a subpackage (``kernels``), or a top-level module (``spec.py``)."""
    rooms: dict = collections.Counter()
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        room = relative.parts[0] if len(relative.parts) > 1 else relative.name
        with open(path, "rb") as handle:
            rooms[room] += sum(1 for _ in handle)
    return dict(rooms)


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=None, help="fail when the total exceeds this")
    args = parser.parse_args(argv)
    rooms = count()
    total = sum(rooms.values())
    for room, lines in sorted(rooms.items(), key=lambda item: -item[1]):
        print(f"{lines:7d}  {room}")
    print(f"{total:7d}  total (pychop_compat/**/*.py)")
    if args.max is not None and total > args.max:
        print(f"over the limit of {args.max} lines", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
