"""`recon --help` and `recon version` stay quick: loading the command line imports no engine,
no networkx, no rocrate, no web or metrics server and not the dev cluster's bring-up; each
command imports what it needs when it runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo

HEAVY = (
    "reconciler.engine",
    "networkx",
    "rocrate",
    "starlette",
    "uvicorn",
    "prometheus_client",
    "reconciler.devcluster.lifecycle",
    "reconciler.devcluster.render",
)


def test_importing_the_command_line_imports_nothing_heavy() -> None:
    # A fresh interpreter: this test session has imported the engine long ago.
    probe = (
        "import json, sys; import reconciler.cli; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == []


def test_the_probe_sees_a_heavy_import_when_there_is_one() -> None:
    probe = (
        "import json, sys; import reconciler.commands.watchlog; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert "reconciler.engine.watch" in json.loads(done.stdout)


@pytest.mark.parametrize("args", [["plan", "--against", "HEAD~1"], ["plan"], ["status"]])
def test_plans_and_status_read_commits_without_gitpython(tmp_path: Path, args: list[str]) -> None:
    """Importing gitpython cost a tenth of a second of every `plan --against`; reading
    commits takes git's own commands. Only apply (snapshots) and watch use gitpython."""
    repo = GitRepo(tmp_path / "repo")
    run = "kind: Run\nname: a\ncommand: 'true'\noutputs:\n  out: o\n"
    repo.commit({"recon.yaml": "project: lean\nscheduler: local\n", "specs/a.yaml": run})
    repo.commit({"specs/a.yaml": run.replace("true", "false")})
    probe = (
        "import sys; from reconciler.cli import main; sys.argv = ['recon', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('gitpython' if 'git' in sys.modules else 'none', file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *args, str(repo.root)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert done.stderr.splitlines()[-1] == "none", done.stderr
    assert "Plan:" in done.stdout or "RUN" in done.stdout.upper(), done.stdout


def test_the_spec_diff_imports_only_what_it_needs(tmp_path: Path) -> None:
    """`plan --against` reads two commits and prints a diff: no scheduler, journal or
    graph library, no rich (its output is plain text), no worker pool for a warm load.
    Each cost a share of its start-up, which is most of its time."""
    repo = GitRepo(tmp_path / "repo")
    run = "kind: Run\nname: a\ncommand: 'true'\noutputs:\n  out: o\n"
    reader = "kind: Run\nname: b\ncommand: 'true'\ninputs:\n  i: a.out\n"
    repo.commit({"recon.yaml": "project: lean\n", "specs/a.yaml": run, "specs/b.yaml": reader})
    repo.commit({"specs/a.yaml": run.replace("true", "false")})
    unwanted = (
        "rich", "multiprocessing", "concurrent", "networkx", "git", "reconciler.scheduler",
        "reconciler.state", "reconciler.engine.plan", "reconciler.engine.reconcile",
    )  # fmt: skip
    probe = (
        "import json, sys; from reconciler.cli import main\n"
        "sys.argv = ['recon', 'plan', sys.argv[1], '--against', 'HEAD~1']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"found = sorted(m for m in sys.modules if m.split('.')[0] in {unwanted!r}"
        f" or m.startswith({unwanted!r}))\n"
        "print(json.dumps(found), file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(repo.root)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert "~ run a" in done.stdout, done.stdout + done.stderr
    assert json.loads(done.stderr.splitlines()[-1]) == []


def test_a_command_named_first_is_built_alone_and_reads_the_same(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """typer builds every command it holds at each start, so `recon plan ...` builds plan
    alone; its help (and so its options) is the whole command line's, word for word."""
    from reconciler import cli
    from tests.cli import recon

    for name in [*cli.COMMANDS, *cli.GROUPS]:
        alone = cli.assembled(name)
        assert [c.name for c in alone.registered_commands] + [
            g.name for g in alone.registered_groups
        ] == [name]
        capsys.readouterr()
        with pytest.raises(SystemExit):
            cli.app([name, "-h"], prog_name="recon")
        whole = capsys.readouterr().out
        assert recon(capsys, name, "-h").out == whole != ""
