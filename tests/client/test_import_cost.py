"""The device side stays light to import (issue 16): scipy, matplotlib and the
server are loaded only where they are used, never by ``import shoal.client``."""

import subprocess
import sys


def test_importing_the_device_side_loads_neither_scipy_nor_the_server():
    code = ("import sys, shoal.client.device, shoal.client.encoder; "
            "print(sorted(m for m in ('scipy', 'matplotlib', 'shoal.server', 'fastapi') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
