"""GPU diagnostic: where hardware.matmul on CuPy / torch CUDA differs from the host."""
import sys, os, traceback
sys.path.insert(0, 'tests')
import numpy as np
from pychop_compat import hardware
from pychop_compat.hardware.models import OUTPUT_FORMATS, INPUT_FORMATS
from pychop_compat.hardware import blockfma as BF
from pychop_compat.rounding import round_to_format, make_spec
from pychop_compat.engines import dispatch
from pychop_compat.random.sources import sources_for
from pychop_compat.kernels.compiled import cpu_engine
import test_hardware_arrays as T
import torch, cupy

def bits(x):
    x = np.asarray(x); return x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])

libs = {'cupy': (cupy.asarray, cupy.asnumpy), 'torch-cuda': (lambda x: torch.from_numpy(np.ascontiguousarray(x)).cuda(), lambda v: v.cpu().numpy())}
routes = [None, 'cupy', 'triton', 'torch']

def diff(tag, got, want, src=None, n=4):
    d = np.flatnonzero(bits(got).ravel() != bits(want).ravel())
    rows = [(int(i), (float(src.ravel()[i]) if src is not None else None), float(got.ravel()[i]), float(want.ravel()[i]),
             hex(int(bits(got).ravel()[i])), hex(int(bits(want).ravel()[i]))) for i in d[:n]]
    print(f'  {tag}: {d.size} of {got.size} differ {rows}', flush=True)

(A, B, C), kw = T._cases()[0]
print('== rounding stage (round_to_format) on the device vs the host')
for out, mode in (('fp32', 4), ('fp16', 1)):
    fmt = OUTPUT_FORMATS[out]
    host = round_to_format(C.copy(), fmt, mode)
    for name, (dev, back) in libs.items():
        for route in (routes if name == 'torch-cuda' else [None]):
            try:
                ctx = dispatch.cuda_route(route) if route else __import__('contextlib').nullcontext()
                with ctx:
                    x = dev(C)
                    ex = dispatch.explain(x, make_spec(fmt, mode), sources_for(None))
                    got = back(round_to_format(x, fmt, mode))
                print(f'C -> {out} mode {mode} {name} route={route}: {str(ex).splitlines()[0]}')
                diff('C_out', got, host, C)
            except Exception as e:
                print(f'C -> {out} {name} {route}: ERROR {e!r}')
for inp in ('fp16', 'bf16', 'e4m3', 'tf32'):
    fmt = INPUT_FORMATS[inp]; mode = 4 if inp == 'tf32' else 1
    sat = None
    host = round_to_format(A.copy(), fmt, mode, saturation=sat)
    for name, (dev, back) in libs.items():
        try:
            x = dev(A)
            ex = dispatch.explain(x, make_spec(fmt, mode, saturation=sat), sources_for(None))
            got = back(round_to_format(x, fmt, mode, saturation=sat))
            print(f'A -> {inp} {name}: {str(ex).splitlines()[0]}')
            diff('A_in', got, host, A)
        except Exception as e:
            print(f'A -> {inp} {name}: ERROR {e!r}')
print('== whole products, each case; and with C rounded on the host first')
for key in [('H100', 'fp16', 'fp32'), ('H100', 'fp16', 'fp16'), ('Ada', 'e4m3', 'fp16'), ('MI100', 'fp16', 'fp32'), ('V100', 'fp16', 'fp32')]:
    model = hardware.model(*key)
    for name, (dev, back) in libs.items():
        for ci, (args, kwargs) in enumerate(T._cases()):
            try:
                want = T._numpy(*args, model=model, **kwargs)
                got = back(hardware.matmul(*(dev(x) for x in args), model=model, **kwargs))
                diff(f'{key} {name} case {ci} {kwargs}', got, want)
            except Exception as e:
                print(f'  {key} {name} case {ci}: ERROR {e!r}'); traceback.print_exc(limit=3)
        # C rounded on the host: isolates the block-FMA body
        args, kwargs = T._cases()[0]
        Cr = round_to_format(args[2].copy(), OUTPUT_FORMATS[key[2]], 1 if key[2] == 'fp16' else 4)
        try:
            want = T._numpy(args[0], args[1], Cr, model=model, beta=1.0)
            got = back(hardware.matmul(dev(args[0]), dev(args[1]), dev(Cr), model=model, beta=1.0))
            diff(f'{key} {name} case 0 with host-rounded C', got, want)
        except Exception as e:
            print(f'  host-rounded C {key} {name}: ERROR {e!r}')
print('diag done')
