"""One recon command from two source trees, alternating, in fresh processes: medians.

    python bench/versus.py OLD_TREE=OLD_REPO NEW_TREE=NEW_REPO [--repeat 8] [--cold] -- ARGS

`{repo}` in ARGS stands for each tree's repo: give each tree a copy of the same repo of
its own (a parse cache written by one release is a miss for another, so a shared one
would make every load cold). The first round warms the caches and is not counted;
`--cold` removes the repo's state directory (`.recon`) before every run instead. On a
machine shared with other work, alternating the two trees and reading the CPU time (user
+ system of the whole command) keeps the comparison fair where one wall-time figure per
tree is not. For instance, before and after a change, on the bench's repos:

    git archive <old commit> | tar -x -C /tmp/old
    python bench/versus.py /tmp/old=/tmp/r-old .=/tmp/r-new -- validate {repo}
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs=2, metavar="TREE=REPO")
    parser.add_argument("--repeat", type=int, default=8)
    parser.add_argument("--cold", action="store_true")
    own, _, after = " ".join(sys.argv[1:]).partition(" -- ")  # ARGS follow the --
    if not after:
        parser.error("give the recon command after --")
    options = parser.parse_args(own.split())
    args = after.split()
    pairs = [tuple(pair.split("=", 1)) for pair in options.pairs]
    walls: dict[str, list[float]] = {tree: [] for tree, _ in pairs}
    cpus: dict[str, list[float]] = {tree: [] for tree, _ in pairs}
    for round_ in range(options.repeat + (0 if options.cold else 1)):
        for tree, repo in pairs:
            if options.cold:
                shutil.rmtree(Path(repo) / ".recon", ignore_errors=True)
            argv = [sys.executable, "-m", "reconciler", *(a.replace("{repo}", repo) for a in args)]
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
            start = time.perf_counter()
            process = subprocess.Popen(
                argv, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            _, _, usage = os.wait4(process.pid, 0)
            if round_ == 0 and not options.cold:
                continue  # warms the parse cache and the page cache
            walls[tree].append(time.perf_counter() - start)
            cpus[tree].append(usage.ru_utime + usage.ru_stime)
    for tree, _ in pairs:
        print(
            f"{tree}: wall {statistics.median(walls[tree]):.3f} s, cpu "
            f"{statistics.median(cpus[tree]):.3f} s (medians of {len(walls[tree])})"
        )


if __name__ == "__main__":
    main()
