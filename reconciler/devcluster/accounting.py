"""Accounting storage: the MariaDB database slurmdbd writes to, and the Slurm
cluster, account and user records that must exist before jobs are accepted."""

from __future__ import annotations

from reconciler.devcluster.runner import run
from reconciler.devcluster.spec import ClusterSpec


def bootstrap_sql(cluster: ClusterSpec) -> str:
    """SQL that creates the database and slurmdbd's login, safe to run again."""
    user = f"'{_sql_text(cluster.db_user)}'@'localhost'"
    password = f"'{_sql_text(cluster.db_password)}'"
    return (
        "\n".join(
            [
                f"CREATE DATABASE IF NOT EXISTS `{cluster.db_name}`;",
                f"CREATE USER IF NOT EXISTS {user} IDENTIFIED BY {password};",
                # The user may survive from an earlier run with another password.
                f"ALTER USER {user} IDENTIFIED BY {password};",
                f"GRANT ALL ON `{cluster.db_name}`.* TO {user};",
            ]
        )
        + "\n"
    )


def _sql_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "''")


def ensure_database(cluster: ClusterSpec) -> None:
    # Debian's MariaDB lets the system root in through the unix socket, no password.
    run(["/usr/bin/mysql", "--user=root"], input=bootstrap_sql(cluster))


def ensure_cluster_records(cluster: ClusterSpec) -> None:
    """Register the cluster, its account, and root as a member using it by default.

    The cluster must be known to slurmdbd before slurmctld first registers with it.
    Each record is looked up first: `sacctmgr add` of an existing record is an error.
    """
    name, account = cluster.cluster_name, cluster.account
    if name not in _column(["list", "cluster"], "Cluster"):
        _sacctmgr("add", "cluster", name)
    if account not in _column(["list", "account"], "Account"):
        _sacctmgr(
            "add",
            "account",
            account,
            f"cluster={name}",
            "Description=recon dev cluster",
            "Organization=recon",
        )
    associations = _column(["list", "assoc", "user=root", f"cluster={name}"], "Account")
    if account not in associations:
        _sacctmgr("add", "user", "root", f"account={account}", f"cluster={name}")
    if _column(["list", "user", "root"], "DefaultAccount") != [account]:
        _sacctmgr("modify", "user", "root", "set", f"DefaultAccount={account}")


def _column(query: list[str], field: str) -> list[str]:
    done = run(["/usr/bin/sacctmgr", "--noheader", "--parsable2", *query, f"format={field}"])
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def _sacctmgr(*args: str) -> None:
    run(["/usr/bin/sacctmgr", "--immediate", *args])
