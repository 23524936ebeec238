"""What one host TMA descriptor costs to encode (GPU): the per-address cache miss in ``Launch.fast``.

    PYTHONPATH=src python3 tools/desc_cost.py

Times, per call: ``descriptor()`` (the Python object), Triton's ``make_tensordesc_arg`` (the
encode, ``cuTensorMapEncodeTiled`` behind it), and a dict lookup (the hit), on a ResNet-sized
bf16 NHWC activation with a 4-D box. On the H200's host (session 16): 1.7 us per miss, so
misses are not where ``Launch.fast``'s time goes.
"""

from __future__ import annotations

import os
import sys

import torch

from convgemm.matmul.launch import descriptor

sys.path.insert(0, os.path.dirname(__file__))
from host_split import per_call  # noqa: E402


def main() -> None:
    from triton.backends.nvidia import driver as nv

    encode = getattr(nv, "_convgemm_original_make_tensordesc_arg", nv.make_tensordesc_arg)
    x = torch.empty(64, 56, 56, 64, device="cuda", dtype=torch.bfloat16)
    geom = ([64, 56, 56, 64], [56 * 56 * 64, 56 * 64, 64, 1], [1, 8, 16, 64])
    # elem_type: Triton's device-side code for bf16 (TMA_DTYPE_DEVICE_TO_HOST maps 10 to the driver's 9)
    meta = {"swizzle": 3, "elem_size": 2, "elem_type": 10, "block_size": geom[2], "fp4_padded": False}
    d = descriptor(x, *geom)
    try:
        encode(d, meta)
    except Exception as e:  # the metadata layout of another Triton
        print(f"encode failed: {type(e).__name__}: {e}")
        return
    cache = {x.data_ptr(): encode(d, meta)[0]}
    print(f"descriptor() object     {per_call(lambda: descriptor(x, *geom)):6.2f} us")
    print(f"make_tensordesc_arg     {per_call(lambda: encode(d, meta)):6.2f} us")
    print(f"both (a cache miss)     {per_call(lambda: encode(descriptor(x, *geom), meta)):6.2f} us")
    print(f"dict hit                {per_call(lambda: cache.get(x.data_ptr())):6.2f} us")
    utils = __import__("triton").runtime.driver.active.utils
    args = (x.data_ptr(), 3, 2, nv.TMA_DTYPE_DEVICE_TO_HOST[10], geom[2], geom[0], geom[1], 0)
    print(f"fill_tma_descriptor     {per_call(lambda: utils.fill_tma_descriptor(*args)):6.2f} us")


if __name__ == "__main__":
    main()
