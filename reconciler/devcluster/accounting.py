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


def missing_records(cluster: ClusterSpec, assoc_rows: str, root_default: str) -> list[list[str]]:
    """The `sacctmgr add/modify` arguments still needed, in order, given what exists.

    `assoc_rows` is `sacctmgr -n -P list assoc format=Cluster,Account,User`; an account
    row has an empty User. `root_default` is root's DefaultAccount.
    """
    rows = {tuple(line.split("|")) for line in assoc_rows.splitlines() if line.strip()}
    name, account = cluster.cluster_name, cluster.account
    needed = []
    if not any(row[0] == name for row in rows):
        needed.append(["add", "cluster", name])
    for member_of in (account, *cluster.other_accounts):
        if (name, member_of, "") not in rows:
            needed.append(
                [
                    "add",
                    "account",
                    member_of,
                    f"cluster={name}",
                    "Description=recon dev cluster",
                    "Organization=recon",
                ]
            )
        if (name, member_of, "root") not in rows:
            needed.append(["add", "user", "root", f"account={member_of}", f"cluster={name}"])
    if root_default.strip() != account:
        needed.append(["modify", "user", "root", "set", f"DefaultAccount={account}"])
    return needed


def ensure_cluster_records(cluster: ClusterSpec) -> list[str]:
    """Register the cluster, its accounts, and root as a member of each, using the first
    by default.

    The cluster must be known to slurmdbd before slurmctld first registers with it.
    Each record is looked up first: `sacctmgr add` of an existing record is an error.
    Returns the sacctmgr commands it ran.
    """
    sacctmgr = ["/usr/bin/sacctmgr", "--noheader", "--parsable2"]
    assoc = run([*sacctmgr, "list", "assoc", "format=Cluster,Account,User"]).stdout
    root_default = run([*sacctmgr, "list", "user", "root", "format=DefaultAccount"]).stdout
    done = []
    for args in missing_records(cluster, assoc, root_default):
        run(["/usr/bin/sacctmgr", "--immediate", *args])
        done.append("sacctmgr " + " ".join(args))
    return done
