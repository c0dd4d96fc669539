"""Without torch, ``import fpsim.torch`` says which extra to install (and fpsim works)."""

import subprocess
import sys


def test_import_fpsim_torch_without_torch_names_the_extra():
    code = ("import sys; sys.modules['torch'] = None\n"  # as if torch were not installed
            "import fpsim\n"
            "assert float(fpsim.round(0.1, 'fp16')) == 0.0999755859375\n"
            "try:\n"
            "    import fpsim.torch\n"
            "except ImportError as exc:\n"
            "    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ("MissingDependency fpsim.torch needs torch, which is not "
                                  "installed: pip install 'fpsim[torch]'")
