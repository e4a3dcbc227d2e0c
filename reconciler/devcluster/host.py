"""Prepare this machine for the dev cluster: platform checks, packages, files on disk.

Every step is idempotent: it looks at what is there and changes only what differs.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
from pathlib import Path

from reconciler.devcluster.daemons import program_links
from reconciler.devcluster.render import ConfigFile, fake_gpu_paths
from reconciler.devcluster.runner import run
from reconciler.devcluster.spec import ClusterSpec
from reconciler.errors import DevClusterError

PACKAGES = ("slurm-wlm", "slurmdbd", "slurm-client", "munge", "mariadb-server")

# One binary per package is enough to tell whether the packages are installed.
REQUIRED_PROGRAMS = (
    "munged",
    "mysqld_safe",
    "mariadb-admin",
    "slurmdbd",
    "slurmctld",
    "slurmd",
    "sbatch",
    "sacct",
    "sacctmgr",
)

# Linux character-device major number of NVIDIA GPUs; the gres plugin only needs
# the file to be a character device, nothing ever opens it.
_NVIDIA_MAJOR = 195

MUNGE_KEY = Path("/etc/munge/munge.key")
MARIADB_DATADIR = Path("/var/lib/mysql")

# sudo and cron may hand us a PATH without the sbin directories.
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def is_debian_like(os_release: str) -> bool:
    """Whether /etc/os-release text describes Debian or a derivative such as Ubuntu."""
    fields = {}
    for line in os_release.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip("\"'")
    families = {fields.get("ID", ""), *fields.get("ID_LIKE", "").split()}
    return bool(families & {"debian", "ubuntu"})


def platform_problem(os_release: str, euid: int) -> str | None:
    """Why this machine cannot run the dev cluster, or None when it can."""
    if not is_debian_like(os_release):
        return (
            "the dev cluster needs Debian or Ubuntu (apt and the Debian Slurm packages); "
            "/etc/os-release describes neither"
        )
    if euid != 0:
        return (
            "the dev cluster starts system daemons and must run as root: sudo recon dev-cluster up"
        )
    return None


def check_platform() -> None:
    try:
        os_release = Path("/etc/os-release").read_text()
    except OSError:
        os_release = ""
    problem = platform_problem(os_release, os.geteuid())
    if problem:
        raise DevClusterError(problem)


def ensure_packages() -> bool:
    """Install the Debian packages if any of their programs is missing; True if it did."""
    missing = [name for name in REQUIRED_PROGRAMS if shutil.which(name, path=_SYSTEM_PATH) is None]
    if not missing:
        return False
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "update"], env=env, timeout=600)
    run(
        ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES],
        env=env,
        timeout=1800,
    )
    still_missing = [n for n in REQUIRED_PROGRAMS if shutil.which(n, path=_SYSTEM_PATH) is None]
    if still_missing:
        raise DevClusterError(
            f"installed {' '.join(PACKAGES)} but these programs are still missing: "
            + ", ".join(still_missing)
        )
    return True


def prepare_directories(cluster: ClusterSpec) -> None:
    layout = cluster.layout
    wanted: list[tuple[Path, str, int]] = [
        (Path("/run/munge"), "munge", 0o755),
        (Path("/var/log/munge"), "munge", 0o700),
        (Path("/var/lib/munge"), "munge", 0o711),
        (Path("/run/mysqld"), "mysql", 0o755),
        (layout.mysql_log.parent, "mysql", 0o750),
        (layout.config_dir, "root", 0o755),
        (layout.run_dir, "slurm", 0o755),
        (layout.log_dir, "slurm", 0o755),
        (layout.state_dir, "slurm", 0o700),
        *((layout.slurmd_spool_root / node, "root", 0o755) for node in cluster.node_names),
    ]
    for path, owner, mode in wanted:
        path.mkdir(parents=True, exist_ok=True)
        _own(path, owner, mode)


def ensure_munge_key() -> None:
    if not MUNGE_KEY.exists():
        MUNGE_KEY.parent.mkdir(parents=True, exist_ok=True)
        MUNGE_KEY.write_bytes(os.urandom(1024))
    # munged refuses a key that anyone but its owner can read.
    _own(MUNGE_KEY, "munge", 0o400)


def ensure_fake_gpus(cluster: ClusterSpec) -> None:
    for node in cluster.nodes:
        for minor, path in enumerate(fake_gpu_paths(cluster, node)):
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and stat.S_ISCHR(path.stat().st_mode):
                continue
            path.unlink(missing_ok=True)
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(_NVIDIA_MAJOR, minor))


def ensure_program_links(cluster: ClusterSpec) -> None:
    """The suffixed names a cluster's daemons run under (daemons.program_links)."""
    for link, target in program_links(cluster).items():
        if link.is_symlink() and os.readlink(link) == str(target):
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(target)


def ensure_mariadb_datadir() -> bool:
    """Create MariaDB's system tables if they are missing; True if it had to.

    The package's install script does this, but a wiped /var/lib/mysql would
    otherwise make mariadbd exit at once.
    """
    if (MARIADB_DATADIR / "mysql").is_dir():
        return False
    run(
        ["/usr/bin/mariadb-install-db", "--user=mysql", f"--datadir={MARIADB_DATADIR}"],
        timeout=300,
    )
    return True


def write_configs(files: tuple[ConfigFile, ...]) -> set[Path]:
    """Write each file whose text differs; return the paths that changed."""
    changed = set()
    for file in files:
        try:
            current = file.path.read_text()
        except OSError:
            current = None
        if current != file.text:
            # Write then rename: a daemon starting meanwhile never reads half a file.
            partial = file.path.with_name(file.path.name + ".recon-new")
            partial.write_text(file.text)
            _own(partial, file.owner, file.mode)
            partial.replace(file.path)
            changed.add(file.path)
        _own(file.path, file.owner, file.mode)
    return changed


def _own(path: Path, owner: str, mode: int) -> None:
    try:
        user = pwd.getpwnam(owner)
    except KeyError as error:
        raise DevClusterError(
            f"user {owner!r} does not exist; reinstall its package: "
            f"apt-get install --reinstall {' '.join(PACKAGES)}"
        ) from error
    os.chown(path, user.pw_uid, user.pw_gid)
    os.chmod(path, mode)
