"""``convgemm`` CLI with 3-D problems kept on the 3-D kernels (the state before ``conv3d_as_2d``).

    PYTHONPATH=src python3 tools/conv3d_base.py bench --suite conv3d --direction all --dtype bf16 \\
        --json out.json

``conv.conv3d.as_2d`` answers None for every problem, so the forward tuner has no
``conv3d_as_2d`` candidate and ``conv3d_input`` / ``conv3d_weight`` take their 3-D routes: an A/B
against the same command through ``python3 -m convgemm``. Use a cache directory of its own
(``CONVGEMM_CACHE_DIR``) or the other run's tuning entries answer for it.
"""

from __future__ import annotations

import sys

from convgemm import cli
from convgemm.conv import conv3d as k3

if __name__ == "__main__":
    k3.as_2d = lambda prob: None
    sys.exit(cli.main(sys.argv[1:]))
