"""Facts of the GPU's libraries that the package works around (printed; nothing asserted)."""
import numpy as np
import cupy, torch
sub32 = np.float32(2.0**-140)
tests = {
    "cupy float32 -> float64 astype of 2**-140": float(cupy.asarray([sub32]).astype(cupy.float64)[0]),
    "cupy float64 -> float32 astype of 2**-140": float(cupy.asarray([2.0**-140]).astype(cupy.float32)[0]),
    "cupy float32 multiply 2**-70 * 2**-70": float((cupy.asarray([np.float32(2.0**-70)]) * cupy.asarray([np.float32(2.0**-70)]))[0]),
    "cupy float32 add 2**-140 + 0": float((cupy.asarray([sub32]) + cupy.float32(0))[0]),
    "torch cuda float32 multiply 2**-70 * 2**-70": float((torch.tensor([2.0**-70], device="cuda") ** 2)[0]),
    "torch cuda float64 -> float16 of NaN (bits)": hex(int(torch.tensor([float("nan")], dtype=torch.float64, device="cuda").half().view(torch.int16)[0]) & 0xFFFF),
}
for k, v in tests.items():
    print(f"probe: {k}: {v}")
