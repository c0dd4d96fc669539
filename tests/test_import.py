"""``import fpsim`` stays light: Numba is imported (and compiles) only when its backend is used."""

import subprocess
import sys


def test_import_does_not_load_numba():
    code = "import sys, fpsim; fpsim.round(0.1, 'fp16'); print('numba' in sys.modules)"
    env_code = f"import fpsim; fpsim.set_backend('numpy'); exec({code!r})"
    out = subprocess.run([sys.executable, "-c", env_code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_import_alone_does_not_load_numba():
    out = subprocess.run(
        [sys.executable, "-c", "import sys, fpsim; print('numba' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )
    assert out.stdout.strip() == "False"


def test_import_does_not_load_dask():
    code = ("import sys, fpsim, fpsim.sweep, fpsim.reproduce.command; "
            "print('dask' in sys.modules or 'distributed' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_import_does_not_load_torch():
    # fpsim.torch is an adapter on top: nothing in fpsim imports it (or torch).
    code = ("import sys, fpsim, fpsim.nn, fpsim.training, fpsim.quantize; "
            "print('torch' in sys.modules or 'fpsim.torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
