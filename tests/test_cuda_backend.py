"""The cupy (GPU) backend, checked without a GPU.

- Simulator parity: the CUDA kernels run in Numba's CUDA simulator and must give the
  NumPy backend's bits, flags and counts (tests/cuda_parity.py, in a subprocess:
  NUMBA_ENABLE_CUDASIM must be set before numba.cuda is imported). Its size is
  FPSIM_SIMULATOR_VALUES values per format, mode and kernel (default 32, which keeps
  every planted special value and edge case; 96 or more for a deeper run), each format
  and mode under one of the four subnormals/saturation settings, cycling so that every
  format and every mode meets all four (``--cover``; FPSIM_SIMULATOR_FULL=1: every
  combination, four times the launches).
- Compile check: a kernel of each kind (every kernel with FPSIM_CUDA_COMPILE_ALL=1)
  built offline for compute capability 9.0, with no floating-point contraction in the
  PTX or the machine code (tests/cuda_compile_check.py).
- Both checks must catch a planted bug: an off-by-one in launch bounds, a specialised
  loop folding the wrong format, a hardware loop's NaN, contraction left on.

The four subprocesses take minutes of one core each; when this module is collected
they start at once, one after another on a background thread (``start_checks``,
called by conftest.py), so that they run beside the rest of the suite.
"""

import concurrent.futures
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import needs_numba_cuda

HERE = Path(__file__).resolve().parent
VALUES = os.environ.get("FPSIM_SIMULATOR_VALUES", "32")


_running: list[subprocess.Popen] = []


def _kill(process: subprocess.Popen) -> None:
    """End ``process`` and the processes it started (the compile check's pool)."""
    if hasattr(os, "killpg"):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    else:
        process.kill()


def _run(script: str, *args: str, simulator: bool = False, timeout: int = 1800):
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    with subprocess.Popen([sys.executable, str(HERE / script), *args], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=hasattr(os, "killpg")) as process:
        _running.append(process)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(process)
            out, err = process.communicate()
        finally:
            _running.remove(process)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


# Passing reports of the compile check, by the digest of what decides them (its --cache).
COMPILE_CACHE = str(Path(tempfile.gettempdir()) / "fpsim-cuda-compile-check")
# The checks' subprocesses, longest first: (script, arguments, simulator, the tests that
# read its result).
# The bugs cuda_parity.py plants, and the check each must be caught by.
PLANTED = {"elementwise": "elementwise", "accumulate": "accumulate", "specialised": "variants",
           "hardware": "variants"}
COMPILE_TESTS = ("test_every_kernel_compiles_for_the_h100_without_contraction",
                 "test_contraction_left_on_is_caught")
# Every kernel with FPSIM_CUDA_COMPILE_ALL=1; else one of each kind (a cold CI machine
# compiles each for about 12 s of CPU).
COMPILE_ARGS = ("--cc", "9.0", "--cache", COMPILE_CACHE,
                *(() if os.environ.get("FPSIM_CUDA_COMPILE_ALL") else ("--representative",)))
CHECKS = (
    ("cuda_compile_check.py", COMPILE_ARGS, False, COMPILE_TESTS),
    ("cuda_parity.py", ("--values", VALUES, *(() if os.environ.get("FPSIM_SIMULATOR_FULL")
                                              else ("--cover",))), True,
     ("test_kernels_in_the_simulator_match_the_numpy_backend",)),
    *(("cuda_parity.py", ("--values", "4", "--first", "--plant", bug, "--only", only), True,
       ("test_a_planted_launch_bound_bug_is_caught",)) for bug, only in PLANTED.items()),
)
_pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
_started: dict[tuple, concurrent.futures.Future] = {}


def start_checks(tests: set[str]) -> None:
    """Queue on the background thread the subprocess of each check that one of ``tests``
    (the selected tests' names) reads."""
    if importlib.util.find_spec("numba_cuda") is not None:
        for script, args, simulator, readers in CHECKS:
            if tests.intersection(readers):
                run(script, *args, simulator=simulator, wait=False)


def stop_checks() -> None:
    """Drop the checks not yet started and end the one running (the session is over)."""
    for future in _started.values():
        future.cancel()
    for process in list(_running):
        _kill(process)


def run(script: str, *args: str, simulator: bool = False, wait: bool = True):
    """The finished subprocess ``script args`` (started in the background if queued)."""
    key = (script, args, simulator)
    if key not in _started:
        _started[key] = _pool.submit(_run, script, *args, simulator=simulator)
    return _started[key].result() if wait else None


@needs_numba_cuda
def test_kernels_in_the_simulator_match_the_numpy_backend():
    result = run("cuda_parity.py", "--values", VALUES, simulator=True)
    print(result.stdout[-3000:], result.stderr[-3000:])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert ", 0 differ" in result.stdout.splitlines()[-1]


@needs_numba_cuda
@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_a_planted_launch_bound_bug_is_caught(bug):
    """A loop's launch bounds off by one, a specialised loop folding the wrong format, or
    a hardware loop giving the GPU's NaN (its probe must refuse it: then the check that
    the path ran fails)."""
    result = run("cuda_parity.py", "--values", "4", "--first", "--plant", bug, "--only",
                 PLANTED[bug], simulator=True)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "DIFFERS" in result.stdout


@pytest.fixture(scope="module")
def compile_check():
    """One offline build of every kernel for compute capability 9.0 (the H100), with
    its control: a*b + c compiled with contraction left on and inside no_contraction()."""
    if importlib.util.find_spec("numba_cuda") is None:
        pytest.skip("numba-cuda is not installed (it comes with the test and gpu extras)")
    result = run("cuda_compile_check.py", *COMPILE_ARGS)
    print(result.stdout[-4000:], result.stderr[-3000:])
    return result


def test_every_kernel_compiles_for_the_h100_without_contraction(compile_check):
    out = compile_check.stdout
    assert compile_check.returncode == 0, out[-4000:] + compile_check.stderr[-3000:]
    assert "kernels, 0 with problems" in out
    if "machine-code check skipped" in out:
        pytest.skip("the PTX is checked; the machine-code check needs ptxas and nvdisasm: "
                    + out.splitlines()[0])


def test_contraction_left_on_is_caught(compile_check):
    assert "with contraction left on: caught" in compile_check.stdout, compile_check.stdout


@needs_numba_cuda
def test_kernels_compile_under_a_numpy_without_row_stack():
    """numba-cuda 0.30 overloads ``np.row_stack`` while loading its registries; NumPy 2.5
    removed it, and on the GPU machine no kernel compiled (found there). Here NumPy's
    alias is deleted first, as NumPy 2.5 has it, and one kernel is built offline."""
    # Numba's own CPU overload of np.row_stack is registered only for NumPy below 2.5 (it
    # checks the version, which this NumPy does not change): loaded before the deletion.
    code = ("import sys, numpy as np\n"
            "import numba.np.arrayobj\n"
            "if hasattr(np, 'row_stack'): del np.row_stack\n"
            f"sys.path.insert(0, {str(HERE)!r})\n"
            "import cuda_compile_check as check\n"
            "ptx, _ = check.compile_one('elementwise', 'op_add', 'float32', (9, 0))\n"
            "print('.entry' in ptx, hasattr(np, 'row_stack'))\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    # A kernel was built, and NumPy's namespace is as it was (no alias left behind).
    assert out.stdout.split() == ["True", "False"], out.stdout


def test_without_a_gpu_the_cupy_backend_says_what_is_missing():
    code = ("import fpsim\n"
            "from fpsim.backends import gpu_missing\n"
            "missing = gpu_missing()\n"
            "if missing is None: print('GPU'); raise SystemExit\n"
            "try:\n"
            "    fpsim.set_backend('cupy')\n"
            "except RuntimeError as exc:\n"
            "    print(exc)\n"
            "print(fpsim.get_backend_name())\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout.splitlines()
    if out[0] == "GPU":
        pytest.skip("this machine has a usable GPU")
    assert out[0].startswith("the cupy backend cannot run here: ")
    assert any(w in out[0] for w in ("numba-cuda", "CuPy", "GPU")), out[0]
    assert out[1] == "numba", "a refused backend must leave the backend in force unchanged"


def test_import_fpsim_never_imports_cupy_or_numba_cuda():
    code = ("import sys, fpsim\n"
            "fpsim.round(0.1, 'fp16'); fpsim.matmul([[1.0]], [[2.0]], model=fpsim.hw.H100)\n"
            "print(sorted(m for m in sys.modules\n"
            "             if m.split('.')[0] == 'cupy' or m.startswith('numba.cuda')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_gpu_arrays_need_the_gpu_backend():
    sys.path.insert(0, str(HERE))
    import fake_cupy

    import fpsim

    x = fake_cupy.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match="GPU arrays need the GPU backend"):
        fpsim.round(x, "fp16")
    with pytest.raises(ValueError, match="GPU arrays need the GPU backend"):
        fpsim.matmul(x.reshape(1, 2), [[1.0], [1.0]])
    with pytest.raises(ValueError, match="takes host arrays"):
        fpsim.to_bits(x, "fp16")
    with pytest.raises(ValueError, match="takes host arrays"):
        fpsim.from_bits(fake_cupy.asarray([1, 2]), "fp16")
    with pytest.raises(ValueError, match="GPU arrays need the GPU backend"):
        fpsim.conv2d(fake_cupy.zeros((1, 1, 2, 2)), [[[[1.0]]]])


def test_a_check_past_its_time_is_ended_with_the_processes_it_started(tmp_path):
    """The compile check runs a process pool: a check that runs out of time (or a session
    that ends) must not leave the pool's processes behind, nor wait for them."""
    psutil = pytest.importorskip("psutil")
    script = tmp_path / "pool.py"
    script.write_text("import subprocess, sys, time\n"
                      "child = subprocess.Popen([sys.executable, '-c', "
                      "'import time; time.sleep(60)'])\n"
                      "print(child.pid, flush=True)\n"
                      "time.sleep(60)\n")
    started = time.monotonic()
    result = _run(str(script), timeout=3)
    # Not held until the pool ends (it holds the pipes): ended with it.
    assert result.returncode != 0 and time.monotonic() - started < 30
    try:
        child = psutil.Process(int(result.stdout.split()[0]))
    except psutil.NoSuchProcess:
        return  # ended and gone
    _, alive = psutil.wait_procs([child], timeout=5)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []


@needs_numba_cuda
def test_the_compile_checks_report_is_kept_under_the_digest_of_what_decides_it(tmp_path):
    """cuda_compile_check's --cache: the digest changes with fpsim's source, the script,
    the compute capability and the tools; a kept report is printed instead of compiling,
    and only a passing run is kept (a planted failing report is never written)."""
    sys.path.insert(0, str(HERE))
    try:
        import cuda_compile_check as check
    finally:
        sys.path.remove(str(HERE))
    tools = (check.find_tool("ptxas"), check.find_tool("nvdisasm"))
    tools = None if None in tools else tools
    key = check.digest((9, 0), tools)
    assert key == check.digest((9, 0), tools) and key != check.digest((8, 0), tools)
    kept = tmp_path / f"{key}.txt"
    kept.write_text("19 kernels, 0 with problems\n")
    result = subprocess.run([sys.executable, str(HERE / "cuda_compile_check.py"), "--cc",
                             "9.0", "--cache", str(tmp_path)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "19 kernels, 0 with problems"
    assert "the report of a passing run with the same digest" in result.stdout
    # A failing check keeps nothing: its status is returned and no report is written.
    import unittest.mock as mock

    failing = tmp_path / "failing"
    with mock.patch.object(check, "check", return_value=1):
        assert check.main(["--cc", "9.0", "--cache", str(failing)]) == 1
    assert not failing.exists() or not any(failing.iterdir())
    with mock.patch.object(check, "check", return_value=0):  # and a passing one is
        assert check.main(["--cc", "9.0", "--cache", str(failing)]) == 0
    assert [p.name for p in failing.iterdir()] == [f"{key}.txt"]


def test_spread_writes_star_arguments_out_for_numba_cuda():
    """numba-cuda does not inline a device function called with ``*params``: the loop on
    whole arrays is built with them written out (cuda_arrays), as its Python runs the
    same."""
    from fpsim.backends import cuda_loops
    from fpsim.backends._instantiate import clone, spread

    calls = []

    def kernel(*args):
        calls.append(args)
        return sum(args)

    class Grid:
        @staticmethod
        def grid(_):
            return 0

        @staticmethod
        def gridsize(_):
            return 1

    namespace = dict(vars(cuda_loops), KERNEL=kernel, OPERANDS=2, RESULTS=1, cuda=Grid)
    import dis

    import numpy as np

    code = spread(cuda_loops.array_kernel, "params", 3)
    star = {i.opname for i in dis.get_instructions(cuda_loops.array_kernel)}
    assert "CALL_FUNCTION_EX" in star  # the source calls KERNEL(..., *params)
    assert "CALL_FUNCTION_EX" not in {i.opname for i in dis.get_instructions(code)}
    loop = clone(cuda_loops.array_kernel, namespace, "probe", code)
    first = np.zeros(2)
    loop(np.array([1.0, 2.0]), np.array([10.0, 20.0]), None, None, first, None,
         (100.0, 1000.0, 5.0))
    assert calls == [(1.0, 10.0, 100.0, 1000.0, 5.0), (2.0, 20.0, 100.0, 1000.0, 5.0)]
    assert first.tolist() == [1116.0, 1127.0]
    with pytest.raises(IndexError):  # the count written out is the count used
        clone(cuda_loops.array_kernel, namespace, "probe",
              spread(cuda_loops.array_kernel, "params", 4))(
            np.ones(1), np.ones(1), None, None, np.zeros(1), None, (1.0, 2.0, 3.0))
