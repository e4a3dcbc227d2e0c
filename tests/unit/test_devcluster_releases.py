"""The Slurm 24.11 dev cluster beside the host's 22.05: nothing they both bind, write or
run under may be the same, and the host's cluster is rendered exactly as before."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import typer

from reconciler.devcluster import cli, rootfs
from reconciler.devcluster.daemons import all_daemons, program_links
from reconciler.devcluster.render import MARIADB_CONF, render_all, render_cgroup_conf
from reconciler.devcluster.rootfs import dependencies, parse_mirror
from reconciler.devcluster.spec import ClusterSpec, cluster_for
from tests.cli import recon

HOST = cluster_for("22.05", "testhost")
ROOT = cluster_for("24.11", "testhost")


def ports(cluster: ClusterSpec) -> set[int]:
    found = {cluster.slurmctld_port, cluster.slurmdbd_port, *(n.port for n in cluster.nodes)}
    return found | {cluster.mariadb_port or 3306}


def test_the_two_clusters_share_no_port_and_no_name() -> None:
    assert ports(HOST) & ports(ROOT) == set()
    assert ROOT.cluster_name != HOST.cluster_name
    assert (ROOT.slurmctld_port, ROOT.slurmdbd_port, ROOT.mariadb_port) == (6917, 6919, 3307)


def test_the_24_11_cluster_has_the_host_clusters_nodes_partitions_and_accounts() -> None:
    # The same tests run on both: they name partitions, GPUs and accounts.
    assert ROOT.partitions == HOST.partitions
    assert [(n.cpus, n.gres) for n in ROOT.nodes] == [(n.cpus, n.gres) for n in HOST.nodes]
    assert (ROOT.account, ROOT.other_accounts) == (HOST.account, HOST.other_accounts)


def test_the_host_cluster_is_unchanged() -> None:
    assert (HOST.cluster_name, HOST.slurmctld_port, HOST.mariadb_port) == ("recondev", 6817, None)
    assert [d.start for d in all_daemons(HOST)][:3] == [
        ("/usr/sbin/runuser", "-u", "munge", "--", "/usr/sbin/munged", "--force"),
        (
            "/usr/bin/setsid",
            "/usr/bin/mysqld_safe",
            "--user=mysql",
            "--nowatch",
            "--log-error=/var/log/mysql/error.log",
        ),
        ("/usr/sbin/runuser", "-u", "slurm", "--", "/usr/sbin/slurmdbd"),
    ]
    assert program_links(HOST) == {}
    assert MARIADB_CONF not in {file.path for file in render_all(HOST)}


def test_munge_and_mariadb_run_under_names_of_their_own_slurm_under_its_own() -> None:
    names = {d.name: d.programs for d in all_daemons(ROOT)}
    assert names["munged"] == {"munged-24.11"}
    assert names["mariadb"] == {"mariadbd-24.11", "mysqld-24.11"}
    # Slurm's daemons learn which they are from their name: only their root tells them apart.
    assert names["slurmctld"] == {"slurmctld"} and names["slurmd cpu1"] == {"slurmd"}
    assert {str(link): str(target) for link, target in program_links(ROOT).items()} == {
        "/usr/local/sbin/munged-24.11": "/usr/sbin/munged",
        "/usr/local/sbin/mariadbd-24.11": "/usr/sbin/mariadbd",
    }
    host_matcher = {d.name: d for d in all_daemons(HOST)}
    assert not host_matcher["munged"].matches(("/usr/local/sbin/munged-24.11", "--force"))
    assert not host_matcher["mariadb"].matches(("/usr/local/sbin/mariadbd-24.11",))


def test_mariadb_of_the_24_11_cluster_listens_on_its_own_port_under_its_own_name() -> None:
    (conf,) = [f.text for f in render_all(ROOT) if f.path == MARIADB_CONF]
    assert conf.splitlines()[1:] == [
        "[mysqld]",
        "bind-address=127.0.0.1",
        "port=3307",
        "[mysqld_safe]",
        "ledir=/usr/local/sbin",
        "mysqld=mariadbd-24.11",
    ]


def test_cgroup_conf_leaves_out_what_24_11_calls_defunct() -> None:
    assert "CgroupAutomount=no" in render_cgroup_conf("22.05").splitlines()
    assert "CgroupAutomount" not in render_cgroup_conf("24.11")


def test_no_cluster_for_an_unknown_release() -> None:
    with pytest.raises(ValueError, match=r"choose one of 22\.05, 24\.11"):
        cluster_for("23.02", "testhost")


DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
"""


@pytest.mark.parametrize(
    ("sources", "mirror"),
    [
        (DEB822, "http://deb.debian.org/debian"),
        ("deb http://mirror.example/debian bookworm main\n", "http://mirror.example/debian"),
        (
            "deb [arch=amd64] http://security.example/debian-security bookworm-security main\n"
            "deb [arch=amd64] http://mirror.example/debian/ bookworm main\n",
            "http://mirror.example/debian/",
        ),
        ("deb https://packages.cloud.example/apt cloud-sdk main\n", None),
        ("", None),
    ],
)
def test_the_mirror_debootstrap_uses_is_the_hosts_debian_archive(
    sources: str, mirror: str | None
) -> None:
    assert parse_mirror(sources) == mirror


def test_the_roots_python_gets_recons_runtime_and_test_dependencies() -> None:
    wanted = dependencies(Path(__file__).parents[2] / "pyproject.toml")
    assert any(d.startswith("pydantic") for d in wanted)
    assert any(d.startswith("pytest") for d in wanted)


@pytest.mark.parametrize(
    ("here", "asked", "elsewhere"),
    [
        (None, None, False),  # on the host, the default is the host's cluster
        (None, "22.05", False),
        (None, "24.11", True),  # carried out inside the Debian 13 root
        ("24.11", None, False),  # inside the root, its own cluster is the default
        ("24.11", "24.11", False),
    ],
)
def test_which_cluster_a_command_acts_on(
    monkeypatch: pytest.MonkeyPatch, here: str | None, asked: str | None, elsewhere: bool
) -> None:
    monkeypatch.setattr(rootfs, "release_here", lambda: here)
    assert cli._in_root_instead(asked) is elsewhere
    assert cli.this_cluster().slurm_release == (here or "22.05")


@pytest.mark.parametrize(
    ("here", "asked", "words"),
    [
        (None, "23.02", "no dev cluster for Slurm '23.02': choose one of 22.05, 24.11"),
        ("24.11", "22.05", "run the command outside the root"),
    ],
)
def test_a_release_that_cannot_be_had_here_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, here: str | None, asked: str, words: str
) -> None:
    monkeypatch.setattr(rootfs, "release_here", lambda: here)
    with pytest.raises(typer.BadParameter) as raised:
        cli._in_root_instead(asked)
    assert words in str(raised.value)


def test_run_on_the_host_gives_the_commands_exit_code_and_a_clear_error_for_none(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rootfs, "release_here", lambda: None)
    assert recon(capsys, "dev-cluster", "run", "--", "sh", "-c", "exit 3").code == 3
    missing = recon(capsys, "dev-cluster", "run", "--", "no-such-command-here")
    assert (missing.code, missing.err) == (1, "error: no-such-command-here: command not found\n")


@pytest.mark.parametrize(
    ("may_run", "done"), [(True, ["mount", "down", "unmount"]), (False, ["unmount"])]
)
def test_down_stops_the_roots_daemons_though_a_shared_folder_went_stale(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    may_run: bool,
    done: list[str],
) -> None:
    # /work made anew leaves its mount inside the root stale: the daemons run on (they
    # need only /proc, /dev and /sys), so down mounts it again and stops them.
    import reconciler.devcluster.host

    carried: list[str] = []
    monkeypatch.setattr(rootfs, "release_here", lambda: None)
    monkeypatch.setattr(reconciler.devcluster.host, "check_platform", lambda: None)
    monkeypatch.setattr(rootfs, "locked", contextlib.nullcontext)
    monkeypatch.setattr(rootfs, "is_built", lambda: True)
    monkeypatch.setattr(rootfs, "daemons_may_run", lambda: may_run)
    monkeypatch.setattr(rootfs, "ensure_mounts", lambda report: carried.append("mount"))
    monkeypatch.setattr(rootfs, "unmount_all", lambda report: carried.append("unmount"))

    def recon_inside(args: list[str]) -> int:
        carried.append(" ".join(args[1:]))
        return 0

    monkeypatch.setattr(rootfs, "recon_inside", recon_inside)
    assert recon(capsys, "dev-cluster", "down", "--slurm", "24.11").code == 0
    assert carried == done
