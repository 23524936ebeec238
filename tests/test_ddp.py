"""Data-parallel training (examples/ddp_train.py) under torchrun: gradients equal single-process ones."""

import os
import subprocess
import sys

import pytest
import torch

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "ddp_train.py")


def _torchrun(*extra, timeout):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(os.path.dirname(__file__), "..", "src"), env.get("PYTHONPATH", "")]
    )
    # gloo picks its network interface from the hostname; machines without a network (the GPU
    # sandbox) have only the loopback one
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", EXAMPLE, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.gpu
def test_ddp_two_gpus_nccl():
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs two CUDA GPUs for one NCCL process each; this machine has {torch.cuda.device_count()}")
    out = _torchrun(timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "gradients match" in out.stdout


def test_ddp_two_processes_gloo_cpu():
    """The same check with gloo on the CPU (kernels under the interpreter): runs without GPUs."""
    import numpy as np

    if tuple(int(v) for v in np.__version__.split(".")[:2]) >= (2, 3):
        # seen on the GPU image (numpy 2.3+): the interpreter fails converting loop bounds
        pytest.skip(f"Triton 3.6's interpreter needs numpy < 2.3 (this is {np.__version__}); CI pins it")
    out = _torchrun("--cpu", "--batch", "4", "--size", "8", timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "gradients match" in out.stdout
