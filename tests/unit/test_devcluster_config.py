"""The dev cluster's config files, checked on their rendered text."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from reconciler.devcluster.accounting import bootstrap_sql, missing_records
from reconciler.devcluster.render import (
    fake_gpu_paths,
    render_all,
    render_cgroup_conf,
    render_gres_conf,
    render_slurm_conf,
    render_slurmdbd_conf,
)
from reconciler.devcluster.spec import (
    ClusterSpec,
    Gres,
    Node,
    Partition,
    PreemptMode,
    default_cluster,
)

CLUSTER = default_cluster("testhost")


def settings(text: str) -> dict[str, str]:
    """Top-level `Key=value` lines of a Slurm config (not NodeName/PartitionName lines)."""
    pairs = [
        line.split("=", 1)
        for line in text.splitlines()
        if line and not line.startswith("#") and " " not in line
    ]
    keys = [key for key, _ in pairs]
    assert len(keys) == len(set(keys)), f"a key is set twice: {keys}"
    return dict(pairs)


def test_slurm_conf_keys_the_bring_up_and_the_tests_depend_on() -> None:
    conf = settings(render_slurm_conf(CLUSTER))
    assert conf["ClusterName"] == "recondev"
    assert conf["SlurmctldHost"] == "testhost(127.0.0.1)"
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert conf["AccountingStoreFlags"] == "job_comment"
    assert conf["DefMemPerCPU"] == "500"
    assert conf["SchedulerParameters"] == "bf_interval=1"
    assert conf["MinJobAge"] == "5"
    assert conf["ReturnToService"] == "2"
    assert conf["MaxJobCount"] == "100000"
    assert conf["SlurmdParameters"] == "config_overrides"
    assert conf["ProctrackType"] == "proctrack/linuxproc"
    assert conf["TaskPlugin"] == "task/cgroup"
    assert conf["JobAcctGatherType"] == "jobacct_gather/linux"
    assert conf["PreemptType"] == "preempt/partition_prio"
    assert conf["PreemptMode"] == "REQUEUE"
    assert conf["AuthInfo"] == "cred_expire=30"
    assert conf["SelectType"] == "select/cons_tres"
    assert conf["SelectTypeParameters"] == "CR_Core_Memory"
    assert conf["GresTypes"] == "gpu"
    assert conf["AccountingStorageTRES"] == "gres/gpu"
    assert conf["SlurmdPidFile"] == "/run/slurm/slurmd-%n.pid"
    assert conf["SlurmdSpoolDir"] == "/var/spool/slurmd/%n"
    assert conf["SlurmdLogFile"] == "/var/log/slurm/slurmd-%n.log"
    assert conf["AccountingStoragePort"] == str(CLUSTER.slurmdbd_port)


def test_slurm_conf_has_one_line_per_node_all_on_this_host() -> None:
    node_lines = [
        line for line in render_slurm_conf(CLUSTER).splitlines() if line.startswith("NodeName=")
    ]
    assert node_lines == [
        "NodeName=cpu1 NodeHostname=testhost NodeAddr=127.0.0.1 Port=6821 CPUs=8 "
        "RealMemory=16000 State=UNKNOWN",
        "NodeName=cpu2 NodeHostname=testhost NodeAddr=127.0.0.1 Port=6822 CPUs=8 "
        "RealMemory=16000 State=UNKNOWN",
        "NodeName=gpu1 NodeHostname=testhost NodeAddr=127.0.0.1 Port=6823 CPUs=8 "
        "RealMemory=16000 Gres=gpu:a100:4 State=UNKNOWN",
    ]


def test_slurm_conf_partitions_with_cpu_the_default() -> None:
    partition_lines = [
        line
        for line in render_slurm_conf(CLUSTER).splitlines()
        if line.startswith("PartitionName=")
    ]
    assert partition_lines == [
        "PartitionName=cpu Nodes=cpu1,cpu2 Default=YES MaxTime=INFINITE State=UP "
        "PriorityTier=1 PreemptMode=OFF",
        "PartitionName=gpu Nodes=gpu1 Default=NO MaxTime=INFINITE State=UP "
        "PriorityTier=2 PreemptMode=OFF",
        "PartitionName=preempt Nodes=gpu1 Default=NO MaxTime=INFINITE State=UP "
        "PriorityTier=1 PreemptMode=REQUEUE",
    ]


def test_only_the_preempt_partition_can_lose_its_jobs_and_only_to_gpu() -> None:
    # partition_prio preempts jobs of a lower tier on shared nodes: cpu shares no node,
    # gpu is the highest tier on gpu1, so jobs the other tests run there are never preempted.
    tiers = {p.name: (p.priority_tier, p.preempt_mode, p.nodes) for p in CLUSTER.partitions}
    assert tiers == {
        "cpu": (1, PreemptMode.OFF, ("cpu1", "cpu2")),
        "gpu": (2, PreemptMode.OFF, ("gpu1",)),
        "preempt": (1, PreemptMode.REQUEUE, ("gpu1",)),
    }


def test_slurm_conf_without_gres_nodes_declares_no_gres_types() -> None:
    cpu_only = CLUSTER.model_copy(
        update={"nodes": CLUSTER.nodes[:2], "partitions": CLUSTER.partitions[:1]}
    )
    assert "GresTypes" not in settings(render_slurm_conf(cpu_only))
    assert "AccountingStorageTRES" not in settings(render_slurm_conf(cpu_only))
    assert render_gres_conf(cpu_only).splitlines()[1:] == []


def test_gres_conf_points_the_gpus_at_fake_device_files() -> None:
    lines = render_gres_conf(CLUSTER).splitlines()
    assert lines[0].startswith("#")
    assert lines[1:] == ["NodeName=gpu1 Name=gpu Type=a100 File=/dev/fakegpu/nvidia[0-3]"]
    gpu1 = CLUSTER.nodes[2]
    assert fake_gpu_paths(CLUSTER, gpu1) == tuple(Path(f"/dev/fakegpu/nvidia{i}") for i in range(4))
    assert fake_gpu_paths(CLUSTER, CLUSTER.nodes[0]) == ()


def test_gres_conf_with_a_single_gpu_names_its_file_without_a_range() -> None:
    one = Node(name="g", cpus=2, real_memory_mb=1000, port=7000, gres=Gres(type="t4", count=1))
    cluster = CLUSTER.model_copy(
        update={
            "nodes": (one,),
            "partitions": (Partition(name="gpu", nodes=("g",)),),
            "default_partition": "gpu",
        }
    )
    assert render_gres_conf(cluster).splitlines()[1:] == [
        "NodeName=g Name=gpu Type=t4 File=/dev/fakegpu/nvidia0"
    ]


def test_cgroup_conf_is_the_v1_setup_slurmd_22_05_starts_with() -> None:
    assert settings(render_cgroup_conf()) == {
        "CgroupPlugin": "cgroup/v1",
        "CgroupMountpoint": "/sys/fs/cgroup",
        "CgroupAutomount": "no",
        "IgnoreSystemd": "yes",
        "ConstrainRAMSpace": "yes",
    }


def test_slurmdbd_conf_stores_in_mariadb_as_the_slurm_user() -> None:
    assert settings(render_slurmdbd_conf(CLUSTER)) == {
        "AuthType": "auth/munge",
        "DbdHost": "localhost",
        "DbdPort": "6819",
        "SlurmUser": "slurm",
        "PidFile": "/run/slurm/slurmdbd.pid",
        "LogFile": "/var/log/slurm/slurmdbd.log",
        "StorageType": "accounting_storage/mysql",
        "StorageHost": "localhost",
        "StorageLoc": "slurm_acct_db",
        "StorageUser": "slurm",
        "StoragePass": "recon-dev",
    }


def test_only_slurmdbd_conf_is_private_to_the_slurm_user() -> None:
    files = {file.path.name: (file.mode, file.owner) for file in render_all(CLUSTER)}
    assert files == {
        "slurm.conf": (0o644, "root"),
        "gres.conf": (0o644, "root"),
        "cgroup.conf": (0o644, "root"),
        "slurmdbd.conf": (0o600, "slurm"),
    }
    assert {file.path.parent for file in render_all(CLUSTER)} == {Path("/etc/slurm")}


def test_every_rendered_file_ends_with_a_newline_and_says_it_is_generated() -> None:
    for file in render_all(CLUSTER):
        assert file.text.endswith("\n")
        assert file.text.startswith("# Written by `recon dev-cluster up`")


def test_partitions_and_nodes_in_declaration_order() -> None:
    assert [(p.name, p.nodes) for p in CLUSTER.partitions] == [
        ("cpu", ("cpu1", "cpu2")),
        ("gpu", ("gpu1",)),
        ("preempt", ("gpu1",)),
    ]
    assert CLUSTER.node_names == ("cpu1", "cpu2", "gpu1")


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"nodes": (*default_cluster("h").nodes[:2], default_cluster("h").nodes[0])}, "unique"),
        ({"slurmdbd_port": 6821}, "own port"),
        ({"default_partition": "bigmem"}, "not declared"),
        ({"partitions": ({"name": "cpu", "nodes": ("cpu1",)},)}, "in no partition"),
        ({"partitions": ({"name": "cpu", "nodes": ("cpu1", "cpu2", "gpu1", "gpu9")},)}, "gpu9"),
        ({"partitions": ({"name": "cpu", "nodes": ("cpu1", "cpu2", "gpu1")},) * 2}, "unique"),
    ],
)
def test_cluster_spec_rejects_inconsistent_descriptions(
    update: dict[str, object], message: str
) -> None:
    fields = {**CLUSTER.model_dump(), **update}
    with pytest.raises(ValidationError, match=message):
        ClusterSpec.model_validate(fields)


def test_cluster_spec_is_frozen_and_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        ClusterSpec.model_validate({**CLUSTER.model_dump(), "nodez": ()})
    with pytest.raises(ValidationError):
        CLUSTER.cluster_name = "other"  # type: ignore[misc]


def test_bootstrap_sql_is_rerunnable_and_quotes_the_password() -> None:
    cluster = CLUSTER.model_copy(update={"db_password": "it's"})
    assert bootstrap_sql(cluster).splitlines() == [
        "CREATE DATABASE IF NOT EXISTS `slurm_acct_db`;",
        "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'it''s';",
        "ALTER USER 'slurm'@'localhost' IDENTIFIED BY 'it''s';",
        "GRANT ALL ON `slurm_acct_db`.* TO 'slurm'@'localhost';",
    ]


def test_accounting_records_on_an_empty_database_are_all_added_in_order() -> None:
    def account(name: str) -> list[str]:
        return [
            "add",
            "account",
            name,
            "cluster=recondev",
            "Description=recon dev cluster",
            "Organization=recon",
        ]

    assert missing_records(CLUSTER, assoc_rows="", root_default="") == [
        ["add", "cluster", "recondev"],
        account("recon"),
        ["add", "user", "root", "account=recon", "cluster=recondev"],
        account("recon-other-acct"),
        ["add", "user", "root", "account=recon-other-acct", "cluster=recondev"],
        ["modify", "user", "root", "set", "DefaultAccount=recon"],
    ]


def test_accounting_records_already_there_are_left_alone() -> None:
    # Literal `sacctmgr -n -P list assoc format=Cluster,Account,User` of a set-up cluster.
    rows = (
        "recondev|root|\nrecondev|root|root\nrecondev|recon|\nrecondev|recon|root\n"
        "recondev|recon-other-acct|\nrecondev|recon-other-acct|root\n"
    )
    assert missing_records(CLUSTER, rows, root_default="recon\n") == []
    fresh_cluster = "recondev|root|\nrecondev|root|root\n"
    assert [args[:3] for args in missing_records(CLUSTER, fresh_cluster, "root\n")] == [
        ["add", "account", "recon"],
        ["add", "user", "root"],
        ["add", "account", "recon-other-acct"],
        ["add", "user", "root"],
        ["modify", "user", "root"],
    ]


def test_a_cluster_set_up_before_the_second_account_only_gains_that_account() -> None:
    # What `recon dev-cluster up` finds on a cluster brought up by an earlier version.
    rows = "recondev|root|\nrecondev|root|root\nrecondev|recon|\nrecondev|recon|root\n"
    assert missing_records(CLUSTER, rows, root_default="recon\n") == [
        [
            "add",
            "account",
            "recon-other-acct",
            "cluster=recondev",
            "Description=recon dev cluster",
            "Organization=recon",
        ],
        ["add", "user", "root", "account=recon-other-acct", "cluster=recondev"],
    ]
