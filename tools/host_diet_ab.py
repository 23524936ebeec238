"""Session 22's warm-call host diet, on and off in one process (GPU): which part of a network's
host time it took away, on the host the call runs on.

    PYTHONPATH=src python3 tools/host_diet_ab.py --model craft [--fuse] [--rounds 6]
    PYTHONPATH=src python3 tools/host_diet_ab.py --model resnet50 --train [--one-thread]

"off" puts back what a warm call did before session 22, by monkeypatching, nothing else changed:

- ``Launch.fast`` hands the C launcher the tensors themselves for pointer arguments (the launcher
  then calls ``data_ptr()`` and ``cuPointerGetAttribute`` on each) and reads the device through
  ``torch.cuda.current_device``;
- warm ``implicit_gemm_ws`` / ``wgrad_ws`` calls import their replay function, build the weight's
  KRSC view and allocate a one-element workspace when unsplit.

Rounds alternate on / off; each prints the host time per iteration (issued back to back, no
synchronisation: ``host_split.enqueue``) and the wall time. Host times of different machines
differ by 2x (sessions 16-22), so only rows of one run compare.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from host_split import enqueue  # noqa: E402
from profile_model import add_model_args, warm_step  # noqa: E402


def _legacy():
    """(install, remove) of the pre-diet warm paths."""
    from convgemm.conv import backward as bw
    from convgemm.conv import fprop
    from convgemm.conv.layout import krsc_weight
    from convgemm.matmul import launch as lm

    new_fast, new_ws_run, new_wg_run = lm.Launch.fast, fprop.ImplicitGemmWs.run, bw.WgradWs.run

    def old_fast(self, bases):
        raw, head, flat, ptrs, descs, tuples, _ = self._fast
        flat = flat.copy()
        for pos, i in ptrs:
            flat[pos] = bases[i]
        for pos, template, inner in tuples:
            t = list(template)
            for j, i in inner:
                t[j] = bases[i]
            flat[pos] = tuple(t)
        for pos, i, cache, encode, _site in descs:
            t = bases[i]
            m = cache.get(t.data_ptr())
            flat[pos] = encode(t) if m is None else m
        raw(*head[0:3], torch._C._cuda_getCurrentRawStream(torch.cuda.current_device()), *head[3:], *flat)

    def old_ws_run(self, prob, x, w, bias, y, cfg, launch=None):
        from convgemm.conv.ws_replay import fast_ready as ready  # the per-call import

        if not ready(launch, cfg.split_k):
            return new_ws_run(self, prob, x, w, bias, y, cfg, launch)
        yo = fprop._nhwc_out(y)
        wp = krsc_weight(w, prob.c)  # the view, every call
        b = yo if bias is None else bias
        ws = torch.empty(launch.extra, dtype=torch.float32, device=x.device)  # allocated even unsplit
        launch.fast((x, wp, yo, b, ws))
        if cfg.split_k > 1:
            launch.aux.fast((ws, yo, b))
        if yo is not y:
            y.copy_(yo)

    def old_wg_run(self, prob, x, dy, dw, cfg, launch=None):
        from convgemm.conv.ws_replay import fast_ready as ready

        if not ready(launch, cfg.split_k):
            return new_wg_run(self, prob, x, dy, dw, cfg, launch)
        ws = torch.empty(launch.extra, dtype=torch.float32, device=x.device)
        launch.fast((dy, x, ws, dw))
        if cfg.split_k > 1:
            launch.aux.fast((ws, dw))

    def install():
        lm.Launch.fast, fprop.ImplicitGemmWs.run, bw.WgradWs.run = old_fast, old_ws_run, old_wg_run

    def remove():
        lm.Launch.fast, fprop.ImplicitGemmWs.run, bw.WgradWs.run = new_fast, new_ws_run, new_wg_run

    return install, remove


def main() -> None:
    ap = argparse.ArgumentParser()
    add_model_args(ap, iters=20, top=0)
    ap.add_argument("--rounds", type=int, default=6, help="alternating on / off rounds")
    a = ap.parse_args()
    step = warm_step(a)
    install, remove = _legacy()
    label = f"{a.model}{' fused' if a.fuse else ''}{' train' if a.train else ''}{' one-thread' if a.one_thread else ''}"
    got = {"on": [], "off": []}
    for r in range(a.rounds):
        for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
            (install if mode == "off" else remove)()
            try:
                step()  # one untimed step in the mode
                host, wall = enqueue(step, a.iters)
            finally:
                remove()
            got[mode].append(host)
            print(f"== {label} diet {mode}: host {host:.0f} us/iter, wall {wall:.0f} us/iter")
    med = {k: sorted(v)[len(v) // 2] for k, v in got.items()}
    print(f"-- {label}: median host per iteration, diet on {med['on']:.0f} us, off {med['off']:.0f} us "
          f"({med['off'] - med['on']:.0f} us saved)")  # fmt: skip


if __name__ == "__main__":
    main()
