"""A bin folder whose `python3` runs this checkout's recon with this interpreter's
packages, as an installed recon's venv would.

A symlink to ``sys.executable`` is not enough where that is itself a venv's python (the
Debian 13 root's /opt/recon-venv): outside its venv's folder it no longer finds the
venv's packages. A venv of its own made from this interpreter, with a ``.pth`` naming
this checkout and this interpreter's site-packages, finds both, wherever it runs.
"""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def checkout_venv(where: Path) -> Path:
    """A venv in ``where`` that imports this checkout and this interpreter's packages;
    its bin folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", where], check=True)
    (site_dir,) = (where / "lib").glob("python3*/site-packages")
    added = [f"import site; site.addsitedir({path!r})" for path in site.getsitepackages()]
    (site_dir / "recon-test.pth").write_text("\n".join([str(ROOT), *added]) + "\n")
    return where / "bin"
