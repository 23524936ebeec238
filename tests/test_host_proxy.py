"""tools/host_proxy.py: the replays' host work on the CPU (issue 6's proxy) keeps working.

It runs in a subprocess: the tool swaps the plan keys for CPU ones and stubs every launch for the
rest of its process. Its own assertions are the checks: every layer replays both gradients in
training (under autocast: the cast inside the Function and the fused cast and flip), and with
``--inference`` every layer keeps an inference replay under autocast."""

import os
import re
import subprocess
import sys

_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_host_proxy_runs_the_replays_with_launches_stubbed():
    env = {**os.environ, "PYTHONPATH": os.path.join(_root, "src")}
    args = ["--autocast", "--inference", "--layers", "2", "--steps", "20", "--repeat", "1"]
    run = subprocess.run([sys.executable, os.path.join(_root, "tools", "host_proxy.py"), *args],
                         capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert re.search(r"3x3 s1, autocast fp16, 2 layers: replay per layer forward [\d.]+ us, backward [\d.]+ us", out), (
        out
    )
    assert re.search(r"inference per layer [\d.]+ us \(full path\)", out), out
    assert re.search(r"inference per layer [\d.]+ us \(replay\)", out), out
