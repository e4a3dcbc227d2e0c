"""The Debian 13 root that the Slurm 24.11 dev cluster, recon and its tests run in.

Debian 13's Slurm (24.11) and Python (3.13) need Debian 13's libc, so they cannot run on
a Debian 12 host directly. `debootstrap` makes a Debian 13 root under ROOT from the same
package mirror the host uses, once; every later `up` finds it and only checks it.

Inside the root, recon runs the same `dev-cluster up` as on the host, with the 24.11
cluster's spec (its own ports, name and program names: spec.root_release_cluster), and the
tests run there too (`recon dev-cluster run --slurm 24.11 -- ...`): the Slurm commands,
the job scripts slurmd starts and recon all see the same files, at the same paths, under
one Python. /proc, /dev, /sys, /tmp, /work and the source tree recon runs from are
mounted at their own paths inside, so a job's script and working directory are the same
inside and out.

Every step is idempotent: it looks at what is there and changes only what differs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from reconciler.devcluster.host import PACKAGES as CLUSTER_PACKAGES
from reconciler.devcluster.runner import run, run_attached
from reconciler.devcluster.spec import ROOT_RELEASE
from reconciler.errors import DevClusterError

Report = Callable[[str], None]

ROOT = Path("/var/lib/recon-dev/trixie")
SUITE = "trixie"
# What the root needs beyond debootstrap's minimal base: the cluster's packages, Python
# with venv for recon's own dependencies, and what recon and its tests call (git, ps; node
# and npm check the Mermaid diagrams recon draws; zsh, recon's zsh completion).
PACKAGES = (
    *CLUSTER_PACKAGES,
    "python3",
    "python3-venv",
    "git",
    "ca-certificates",
    "procps",
    "nodejs",
    "npm",
    "zsh",
)
# One program of each package that must be there (as the root sees them).
_REQUIRED = tuple(
    Path(path)
    for path in (
        "/usr/sbin/munged",
        "/usr/bin/mysqld_safe",
        "/usr/sbin/slurmctld",
        "/usr/sbin/slurmd",
        "/usr/sbin/slurmdbd",
        "/usr/bin/sbatch",
        "/usr/bin/python3",
        "/usr/bin/git",
        "/usr/bin/ps",
        "/usr/bin/npm",
        "/usr/bin/zsh",
    )
)
# recon's dependencies, inside the root: Debian 13's Python marks its own site-packages
# as the system's (PEP 668), so they go into a virtual environment.
VENV = Path("/opt/recon-venv")
# Inside the root: names the release of the dev cluster recon runs there.
RELEASE_MARKER = Path("/etc/recon-dev-cluster-release")
# Inside the root: the hash of the dependency list the venv was made from.
_VENV_STAMP = VENV / "recon-dependencies.sha256"

# Where Debian takes local certificate authorities from (update-ca-certificates).
_HOST_EXTRA_CERTIFICATES = Path("/usr/local/share/ca-certificates")

# Mounted inside the root at the same path. /run stays the root's own: the munge socket,
# MariaDB's socket, the pid files and the dev cluster's lock are each cluster's own.
SHARED_PATHS = (Path("/dev"), Path("/sys"), Path("/tmp"), Path("/work"))
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def release_here() -> str | None:
    """The release of the root this process runs in, or None on the host itself."""
    try:
        return RELEASE_MARKER.read_text().strip() or None
    except OSError:
        return None


def parse_mirror(sources: str) -> str | None:
    """The Debian archive URI of apt's sources (deb822 .sources or one-line .list text):
    the first `deb` entry that is neither the security archive nor a third party's."""
    for entry in sources.split("\n\n"):
        fields = {}
        for line in entry.splitlines():
            key, sep, value = line.partition(":")
            if sep and not line.startswith((" ", "#")):
                fields[key.strip().lower()] = value.strip()
        for uri in fields.get("uris", "").split():
            if "deb" in fields.get("types", "").split() and _is_debian_archive(uri):
                return uri
    for line in sources.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "deb":
            uri = next((word for word in words[1:] if not word.startswith("[")), "")
            if _is_debian_archive(uri):
                return uri
    return None


def _is_debian_archive(uri: str) -> bool:
    return uri.rstrip("/").endswith("/debian")


def host_mirror() -> str:
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in sources:
        if path.suffix not in {".list", ".sources"}:
            continue
        try:
            mirror = parse_mirror(path.read_text())
        except OSError:
            continue
        if mirror:
            return mirror
    raise DevClusterError(
        "found no Debian archive in /etc/apt/sources.list or /etc/apt/sources.list.d: "
        "debootstrap needs one to build the Debian 13 root"
    )


def source_tree() -> Path:
    """The directory the running recon is imported from (it holds `reconciler/`)."""
    return Path(__file__).resolve().parents[2]


def shared_paths() -> tuple[Path, ...]:
    """What is mounted into the root: SHARED_PATHS, and the source tree if outside them."""
    tree = source_tree()
    if any(tree.is_relative_to(path) for path in SHARED_PATHS):
        return SHARED_PATHS
    return (*SHARED_PATHS, tree)


def ensure_root(report: Report) -> None:
    """Build the root if it is not there, then install what it lacks."""
    if not (ROOT / "etc" / "debian_version").is_file():
        _debootstrap(report)
    _write_root_files()
    ensure_mounts(report)
    # lexists: most are links to absolute paths (/etc/alternatives/...), which would be
    # followed into the host's own files.
    missing = [path for path in _REQUIRED if not os.path.lexists(_in_root(path))]
    if missing:
        env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": _SYSTEM_PATH}
        chroot = ["/usr/sbin/chroot", str(ROOT)]
        run([*chroot, "apt-get", "update"], env=env, timeout=600)
        run(
            [*chroot, "apt-get", "install", "-y", "--no-install-recommends", *PACKAGES],
            env=env,
            timeout=1800,
        )
        report(f"installed {' '.join(PACKAGES)} in {ROOT}")
    _trust_host_certificates(report)
    _ensure_venv(report)
    _in_root(RELEASE_MARKER).write_text(ROOT_RELEASE + "\n")


def _debootstrap(report: Report) -> None:
    if shutil.which("debootstrap", path=_SYSTEM_PATH) is None:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        # On a fresh machine apt's index may be missing or stale.
        run(["apt-get", "update"], env=env, timeout=600)
        run(["apt-get", "install", "-y", "--no-install-recommends", "debootstrap"], env=env)
    # Built aside and renamed when complete: a root half-made by a killed run is not
    # taken for a finished one.
    partial = ROOT.with_name(ROOT.name + ".partial")
    _unmount_under(partial)
    if partial.exists():
        shutil.rmtree(partial)
    partial.parent.mkdir(parents=True, exist_ok=True)
    mirror = host_mirror()
    run(
        ["debootstrap", "--variant=minbase", SUITE, str(partial), mirror],
        env={**os.environ, "PATH": _SYSTEM_PATH},
        timeout=1800,
    )
    partial.rename(ROOT)
    report(f"built a Debian 13 root in {ROOT} from {mirror}")


def _write_root_files() -> None:
    # The package scripts must not start services: the dev cluster starts its own.
    policy = _in_root(Path("/usr/sbin/policy-rc.d"))
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    # Name resolution as on the host: apt, pip, and the nodes' host name.
    for name in ("resolv.conf", "hosts"):
        host_file = Path("/etc") / name
        if host_file.is_file():
            _in_root(host_file).write_bytes(host_file.read_bytes())


def _trust_host_certificates(report: Report) -> None:
    """The certificate authorities the host added to Debian's (a proxy's, say, in front of
    the package registries) are added to the root's trust store too, so pip, npm and git
    inside reach what they reach outside; the environment's SSL_CERT_FILE and the like
    name the same path inside and out."""
    added = []
    for certificate in sorted(_HOST_EXTRA_CERTIFICATES.rglob("*.crt")):
        copy = _in_root(certificate)
        if copy.is_file() and copy.read_bytes() == certificate.read_bytes():
            continue
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(certificate.read_bytes())
        added.append(certificate.name)
    if added:
        run(["/usr/sbin/chroot", str(ROOT), "update-ca-certificates"], env={"PATH": _SYSTEM_PATH})
        report(f"trusted the host's certificate authorities in {ROOT}: {', '.join(added)}")


def _ensure_venv(report: Report) -> None:
    wanted = dependencies(source_tree() / "pyproject.toml")
    stamp = hashlib.sha256("\n".join(wanted).encode()).hexdigest()
    try:
        current = _in_root(_VENV_STAMP).read_text().strip()
    except OSError:
        current = None
    if current == stamp:
        return
    env = {"PATH": _SYSTEM_PATH, "HOME": "/root", "LANG": "C.UTF-8"}
    chroot = ["/usr/sbin/chroot", str(ROOT)]
    run([*chroot, "/usr/bin/python3", "-m", "venv", str(VENV)], env=env, timeout=300)
    run([*chroot, str(VENV / "bin" / "pip"), "install", "--quiet", *wanted], env=env, timeout=1800)
    _in_root(_VENV_STAMP).write_text(stamp + "\n")
    report(f"installed recon's dependencies into {VENV} in {ROOT}")


def dependencies(pyproject: Path) -> list[str]:
    """recon's runtime and test requirements, as pyproject.toml lists them."""
    try:
        project = tomllib.loads(pyproject.read_text())["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as error:
        raise DevClusterError(
            f"cannot read recon's dependencies from {pyproject} ({error}): the 24.11 dev "
            "cluster runs recon from a source checkout"
        ) from error
    return [*project["dependencies"], *project.get("optional-dependencies", {}).get("test", [])]


def mounted_paths() -> set[Path]:
    """Mount points under the root, from this process's mount table."""
    return {point for point in _mount_points() if point.is_relative_to(ROOT)}


# Mounted from the kernel (or with their submounts): never replaced by another folder.
_SYSTEM_MOUNTS = (Path("/proc"), Path("/dev"), Path("/sys"))


def missing_mounts() -> list[Path]:
    """The paths that should be mounted inside the root and are not, or are stale."""
    mounted = mounted_paths()
    wanted = [Path("/proc"), *shared_paths()]
    return [
        path
        for path in wanted
        if _in_root(path) not in mounted
        or (path not in _SYSTEM_MOUNTS and not _shows(_in_root(path), path))
    ]


def daemons_may_run() -> bool:
    """Whether the root's daemons can be running: they cannot without its /proc, /dev
    and /sys mounted (the shared folders' mounts do not matter to them)."""
    mounted = mounted_paths()
    return all(_in_root(path) in mounted for path in _SYSTEM_MOUNTS)


def _shows(target: Path, path: Path) -> bool:
    """True if the folder mounted at ``target`` is ``path`` itself. A bind mount keeps the
    folder it was made from: once that folder is deleted and one made again at the same
    path (a fresh clone, a machine's /work set up anew), the mount still shows the
    deleted one, and recon inside the root finds no source tree."""
    try:
        inside, outside = target.stat(), path.stat()
    except OSError:
        return False
    return (inside.st_dev, inside.st_ino) == (outside.st_dev, outside.st_ino)


def ensure_mounts(report: Report) -> None:
    mounted = mounted_paths()
    for path in missing_mounts():
        target = _in_root(path)
        if target in mounted:
            _unmount_under(target)
            # Until none is left: a bind mount made again over a stale one stacks on it.
            for _ in range(10):
                if target not in mounted_paths():
                    break
                run(["umount", "--lazy", str(target)], check=False)
            report(f"unmounted {target}: it showed a folder since deleted from {path}")
        target.mkdir(parents=True, exist_ok=True)
        if path == Path("/proc"):
            # The root's own /proc: same processes, mounted afresh.
            run(["mount", "-t", "proc", "proc", str(target)])
        elif path in (Path("/dev"), Path("/sys")):
            # With what is mounted below them (/dev/shm, /dev/pts, the cgroup tree); as
            # a slave, so that unmounting them here never reaches the host's.
            run(["mount", "--rbind", str(path), str(target)])
            run(["mount", "--make-rslave", str(target)])
        else:
            run(["mount", "--bind", str(path), str(target)])
        report(f"mounted {path} at {target}")


def unmount_all(report: Report) -> None:
    if _unmount_under(ROOT):
        report(f"unmounted everything under {ROOT}")


def _unmount_under(root: Path) -> bool:
    """Unmount every mount below ``root``, deepest first. True if there was any."""
    points = sorted(
        (p for p in _mount_points() if p != root and p.is_relative_to(root)),
        key=lambda p: len(p.parts),
        reverse=True,
    )
    for point in points:
        # --lazy: a shell or test still inside keeps its view until it leaves; the mount
        # is gone from the tree at once, so nothing below the root reaches /work any more.
        run(["umount", "--lazy", str(point)], check=False)
    return bool(points)


def _mount_points() -> list[Path]:
    """Every mount point of this process's mount table."""
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    # Field 5 is the mount point, with spaces and the like escaped as \\ooo.
    return [Path(line.split()[4].encode().decode("unicode_escape")) for line in lines]


def _in_root(path: Path) -> Path:
    return ROOT / path.relative_to("/")


def environment(base: dict[str, str]) -> dict[str, str]:
    """The environment of a command run inside the root: the caller's, with the root's
    Python (recon's venv first on PATH) and recon's source tree importable."""
    kept = {
        key: value
        for key, value in base.items()
        if not key.startswith(("PYENV", "VIRTUAL_ENV", "PYTHONHOME", "PIP_"))
    }
    return {
        **kept,
        "PATH": f"{VENV / 'bin'}:{_SYSTEM_PATH}",
        "PYTHONPATH": str(source_tree()),
        "HOME": "/root",
    }


def inside(argv: Sequence[str], cwd: Path) -> list[str]:
    """``argv`` run inside the root in directory ``cwd`` (the same path inside)."""
    if not any(cwd == path or cwd.is_relative_to(path) for path in shared_paths()):
        raise DevClusterError(
            f"{cwd} is not visible inside the Debian 13 root: run from a directory under "
            + ", ".join(str(path) for path in shared_paths())
        )
    # chroot starts in the root's /: go to the same directory as outside, then run.
    return [
        "/usr/sbin/chroot",
        str(ROOT),
        "/bin/sh",
        "-c",
        'cd "$1" && shift && exec "$@"',
        "sh",
        str(cwd),
        *argv,
    ]


def run_inside(argv: Sequence[str], cwd: Path | None = None) -> int:
    """Run a command inside the root, its output to ours; return its exit code."""
    where = cwd if cwd is not None else Path.cwd()
    return run_attached(inside(argv, where), env=environment(dict(os.environ)))


def recon_inside(args: Sequence[str]) -> int:
    """Run `recon <args>` inside the root, under the root's Python, from the same source."""
    return run_inside([str(VENV / "bin" / "python3"), "-m", "reconciler", *args], Path("/tmp"))


def is_built() -> bool:
    return _in_root(RELEASE_MARKER).is_file()


def not_ready() -> str | None:
    """Why commands cannot run inside the root now, or None when they can."""
    if not is_built():
        return f"the Debian 13 root of the Slurm {ROOT_RELEASE} dev cluster is not built ({ROOT})"
    missing = missing_mounts()
    if missing:
        return (
            f"{', '.join(map(str, missing))} not mounted inside {ROOT} "
            "(or showing a folder since deleted)"
        )
    return None


# Two `up --slurm 24.11` at once would debootstrap and mount twice.
_LOCK = Path("/run/recon-dev-root.lock")


@contextmanager
def locked() -> Iterator[None]:
    try:
        with FileLock(str(_LOCK), timeout=1800):
            yield
    except Timeout as error:
        raise DevClusterError(f"another recon dev-cluster command still holds {_LOCK}") from error
