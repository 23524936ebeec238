"""Which tests a timed-out GPU test run left: files to run again, and the tests that failed.

    python tools/tests_left.py COLLECTED LOG [LOG ...]

COLLECTED is ``pytest --collect-only -q`` output (one node id a line); each LOG is a ``pytest -v``
log (xdist's ``[gwN] [ P%] PASSED node`` lines, or plain ``node PASSED``). Prints, one a line, the
test files with a collected test no log reports (run them whole again: node ids with brackets and
spaces do not pass safely through a shell), then ``# failed: node`` for every node a log reports
FAILED or ERROR and no later log reports PASSED. ``gpu_session.sh`` writes both files under
``$OUT`` for its ``tests*`` steps, and its ``tests_left`` step runs what this prints
(``TESTS_LEFT``, a file of these lines).
"""

from __future__ import annotations

import re
import sys
from collections import OrderedDict

_RESULT = re.compile(r"(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)")
_NODE = re.compile(r"(tests/\S+?\.py::\S.*?)(?:\s+-\s.*)?$")


def _node_and_status(line: str) -> tuple[str, str] | None:
    m = _RESULT.search(line)
    if m is None or "tests/" not in line:
        return None
    status = m.group(1)
    before, after = line[: m.start()], line[m.end() :]
    # xdist: "[gw3] [ 45%] PASSED node"; plain -v: "node PASSED [ 45%]"
    text = after if "tests/" in after else before
    n = _NODE.search(text.strip())
    if n is None:
        return None
    return n.group(1).strip(), status


def tests_left(collected: list[str], logs: list[list[str]]) -> tuple[list[str], list[str]]:
    """``(files to run again, failed node ids)`` from the collected node ids and the logs' lines."""
    status: dict[str, str] = {}
    for lines in logs:
        for line in lines:
            got = _node_and_status(line)
            if got is None:
                continue
            node, st = got
            # a later pass (a rerun) clears an earlier failure; a failure never hides a pass's file
            if st == "PASSED" or status.get(node) != "PASSED":
                status[node] = st
    files: OrderedDict[str, None] = OrderedDict()
    for node in collected:
        node = node.strip()
        if "::" not in node:
            continue
        if node not in status:
            files[node.split("::", 1)[0]] = None
    failed = [n for n, st in status.items() if st in ("FAILED", "ERROR")]
    return list(files), failed


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        collected = f.read().splitlines()
    logs = []
    for path in argv[1:]:
        with open(path, errors="replace") as f:
            logs.append(f.read().splitlines())
    files, failed = tests_left(collected, logs)
    for f in files:
        print(f)
    for n in failed:
        print(f"# failed: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
