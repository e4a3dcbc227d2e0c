"""Every class of bad input gets a SpecError naming file, line and field; nothing else."""

from __future__ import annotations

import pytest

from reconciler.desired.loader import load_desired, open_source
from reconciler.errors import SpecError, SpecIssue
from tests.gitrepo import GitRepo

GOOD_PREPARE = """\
kind: Run
name: prepare
command: echo hi > {outputs.data.path}
outputs:
  data: data.txt
"""


def problems(repo: GitRepo, files: dict[str, str]) -> list[SpecIssue]:
    repo.commit(files)
    with pytest.raises(SpecError) as caught:
        load_desired(open_source(repo.root))
    return caught.value.issues


def only(repo: GitRepo, files: dict[str, str]) -> SpecIssue:
    found = problems(repo, files)
    assert len(found) == 1, found
    return found[0]


def test_malformed_yaml(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": "kind: Run\nname: [unclosed\ncommand: x\n"})
    assert issue.file == "specs/a.yaml"
    assert issue.line == 3
    assert "invalid YAML" in issue.message


def test_unknown_field(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": GOOD_PREPARE + "resources:\n  cpu: 4\n"})
    assert (issue.file, issue.line, issue.field) == ("specs/a.yaml", 7, "resources.cpu")
    assert "unknown field" in issue.message


def test_an_output_staged_takes_true_or_false(repo: GitRepo) -> None:
    spec = GOOD_PREPARE.replace(
        "  data: data.txt\n", "  data:\n    path: data.txt\n    staged: maybe\n"
    )
    issue = only(repo, {"specs/a.yaml": spec})
    assert (issue.file, issue.line, issue.field) == ("specs/a.yaml", 7, "outputs.data.staged")
    assert "must be a valid boolean" in issue.message


def test_duplicate_name_across_files(repo: GitRepo) -> None:
    issue = only(
        repo,
        {
            "specs/a.yaml": GOOD_PREPARE,
            "specs/b.yaml": "# again\nkind: Allocation\nname: prepare\ntime_limit: 1h\n",
        },
    )
    # Said once, at the first place, naming the other: no file is blamed over the other.
    assert (issue.file, issue.line, issue.field) == ("specs/a.yaml", 2, "name")
    assert issue.message == (
        "'prepare' names this Run and the Allocation at specs/b.yaml:3: names are unique "
        "per project; rename one"
    )


def test_duplicate_run_names_are_one_problem_not_also_a_shared_output(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": GOOD_PREPARE, "specs/b.yaml": GOOD_PREPARE})
    assert str(issue) == (
        "specs/a.yaml:2: name: 'prepare' names this Run and the Run at specs/b.yaml:2: names "
        "are unique per project; rename one"
    )


def test_a_document_with_its_own_problem_is_not_blamed_again_by_its_readers(
    repo: GitRepo,
) -> None:
    """train's own problem is reported; its readers (an input, a coupling, a run in an
    allocation) say nothing of it, since train exists but is invalid."""
    train = GOOD_PREPARE.replace("prepare", "train") + "resources:\n  memory: 2048\n"
    readers = (
        "kind: Run\nname: evaluate\ncommand: x\ninputs:\n  model: train.data\n"
        "coupled_with: [train]\n---\n"
        "kind: Allocation\nname: box\ntime_limit: 1h\nbogus: 1\n---\n"
        "kind: Run\nname: quick\ncommand: x\nallocation: box\n"
    )
    found = problems(repo, {"specs/a.yaml": train, "specs/b.yaml": readers})
    assert [str(issue) for issue in found] == [
        "specs/a.yaml:7: resources.memory: memory needs a unit: 2048MiB, which is 2GiB, if "
        "you meant Slurm's --mem=2048 (a bare number there is MiB); got the bare number 2048",
        "specs/b.yaml:11: bogus: unknown field: known here are container, description, "
        "idle_release, kind, labels, min_remaining, name, renamed_from, resources, setup, "
        "setup_retries, suspend, time_limit",
    ], found


def test_a_token_inside_quotes(repo: GitRepo) -> None:
    quoted = GOOD_PREPARE.replace("> {outputs.data.path}", '> "{outputs.data.path}"')
    issue = only(repo, {"specs/a.yaml": quoted})
    assert str(issue) == (
        "specs/a.yaml:3: command: {outputs.data.path} is inside quotes: recon fills it in "
        "shell-quoted already, so the quotes would become part of a path with a space or a "
        "bracket; write it bare (--out {outputs.data.path}, not --out "
        '"{outputs.data.path}"), or "$RECON_OUTPUT_DATA" inside quotes'
    )


def test_cycle_names_every_member(repo: GitRepo) -> None:
    def run(name: str, upstream: str) -> str:
        return (
            f"kind: Run\nname: {name}\ncommand: x\ninputs:\n  i: {upstream}.out\n"
            "outputs:\n  out: o\n"
        )

    issue = only(
        repo,
        {"specs/a.yaml": run("a", "c") + "---\n" + run("b", "a"), "specs/c.yaml": run("c", "b")},
    )
    assert issue.file == "specs/a.yaml" and issue.line == 1
    assert "cycle a -> b -> c -> a" in issue.message
    assert "c (specs/c.yaml:1)" in issue.message and "b (specs/a.yaml:9)" in issue.message


def test_dangling_input(repo: GitRepo) -> None:
    issue = only(
        repo,
        {
            "specs/a.yaml": GOOD_PREPARE
            + "---\nkind: Run\nname: train\ncommand: x\ninputs:\n  d: prepare.nothing\n"
        },
    )
    assert (issue.file, issue.line, issue.field) == ("specs/a.yaml", 11, "inputs.d")
    assert "declares no output 'nothing'" in issue.message and "data" in issue.message


def test_input_of_missing_run(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": "kind: Run\nname: t\ncommand: x\ninputs:\n  d: ghost.x\n"})
    assert (issue.line, issue.field) == (5, "inputs.d")
    assert "no run 'ghost'" in issue.message


@pytest.mark.parametrize(
    ("field", "value"),
    [("cpus", "lots"), ("memory", "32G"), ("gpus", "A100:0"), ("time", "forever")],
)
def test_bad_resource_string(repo: GitRepo, field: str, value: str) -> None:
    issue = only(repo, {"specs/a.yaml": GOOD_PREPARE + f"resources:\n  {field}: {value}\n"})
    assert (issue.file, issue.line, issue.field) == ("specs/a.yaml", 7, f"resources.{field}")


@pytest.mark.parametrize(
    "flag",
    [
        '"#SBATCH --partition=gpu"',
        '"--exclusive\\n#SBATCH --qos=high"',
        '"--mail-user=$(id)"',
        '"--exclusive; rm -rf /"',
        '"--partition=gpu"',
        '"-N 2"',
    ],
)
def test_sbatch_extra_refused(repo: GitRepo, flag: str) -> None:
    issue = only(
        repo, {"specs/a.yaml": GOOD_PREPARE + f"resources:\n  sbatch_extra:\n    - {flag}\n"}
    )
    assert (issue.file, issue.line, issue.field) == ("specs/a.yaml", 8, "resources.sbatch_extra.0")


@pytest.mark.parametrize(
    "name", ["has space", "semi;colon", "new\\nline", "$(id)", "-dash", "dot.ted"]
)
def test_unsafe_name(repo: GitRepo, name: str) -> None:
    issue = only(repo, {"specs/a.yaml": f'kind: Run\nname: "{name}"\ncommand: x\n'})
    assert (issue.file, issue.line, issue.field) == ("specs/a.yaml", 2, "name")


def test_unsafe_env_key(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": GOOD_PREPARE + 'env:\n  "A;B": x\n'})
    assert (issue.line, issue.field) == (7, "env.A;B")


def test_unknown_template_token(repo: GitRepo) -> None:
    issue = only(
        repo,
        {"specs/a.yaml": "kind: Run\nname: a\ncommand: cat {inputs.nope.path} ${HOME} {x,y}\n"},
    )
    assert (issue.file, issue.line, issue.field) == ("specs/a.yaml", 3, "command")
    assert "{inputs.nope.path}" in issue.message


def test_job_wide_setting_on_component(repo: GitRepo) -> None:
    spec = (
        "kind: Run\nname: het\ncommand: x\nresources:\n  components:\n"
        "    - cpus: 2\n    - gpus: 1\n      time: 1h\n"
    )
    issue = only(repo, {"specs/a.yaml": spec})
    assert (issue.file, issue.line, issue.field) == (
        "specs/a.yaml",
        8,
        "resources.components.1.time",
    )
    assert "job-wide" in issue.message


def test_node_shape_beside_components(repo: GitRepo) -> None:
    spec = (
        "kind: Run\nname: het\ncommand: x\nresources:\n  cpus: 4\n  components:\n"
        "    - cpus: 2\n    - gpus: 1\n"
    )
    issue = only(repo, {"specs/a.yaml": spec})
    assert (issue.line, issue.field) == (4, "resources")
    assert "cpus set beside components" in issue.message


def test_unknown_kind_and_missing_command(repo: GitRepo) -> None:
    found = problems(
        repo,
        {"specs/a.yaml": "kind: Job\nname: a\n---\nkind: Run\nname: b\n---\nkind: Allocation\n"},
    )
    assert [(i.line, i.field) for i in found] == [
        (1, "kind"),
        (4, ""),
        (7, "name"),
        (7, "time_limit"),
    ]
    assert "a run takes exactly one of `command` or `script`" in found[1].message


def test_every_error_is_listed_not_just_the_first(repo: GitRepo) -> None:
    found = problems(
        repo,
        {
            "specs/a.yaml": "kind: Run\nname: a\ncommand: x\nretries: -1\n",
            "specs/b.yaml": "kind: Run\nname: b b\ncommand: x\n",
            "specs/c.yaml": "kind: Run\n  bad: [\n",
        },
    )
    assert sorted(i.file for i in found) == ["specs/a.yaml", "specs/b.yaml", "specs/c.yaml"]


def test_duplicate_key(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": GOOD_PREPARE + "name: again\n"})
    assert (issue.line, issue.field) == (6, "name")
    assert "duplicate key" in issue.message


def test_missing_script_file(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": "kind: Run\nname: a\nscript: scripts/run.sh\n"})
    assert (issue.line, issue.field) == (3, "script")
    assert "not in the repo" in issue.message


def test_script_outside_repo(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": "kind: Run\nname: a\nscript: ../etc/passwd\n"})
    assert "inside the repo" in issue.message


def test_missing_project_file(repo: GitRepo) -> None:
    repo.remove("recon.yaml")
    issue = only(repo, {"specs/a.yaml": GOOD_PREPARE})
    assert issue.file == "recon.yaml" and "not found" in issue.message


def test_bad_project_file(repo: GitRepo) -> None:
    issue = only(repo, {"recon.yaml": "project: demo\nscheduler: pbs\n"})
    assert (issue.file, issue.line, issue.field) == ("recon.yaml", 2, "scheduler")


def test_not_utf8(repo: GitRepo) -> None:
    (repo.root / "specs").mkdir()
    (repo.root / "specs/a.yaml").write_bytes(b"kind: Run\nname: \xff\n")
    issue = only(repo, {})
    assert issue.file == "specs/a.yaml" and "UTF-8" in issue.message


def test_coupled_with_a_missing_run(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": GOOD_PREPARE + "coupled_with: [ghost]\n"})
    assert (issue.file, issue.line, issue.field) == ("specs/a.yaml", 6, "coupled_with")
    assert "no run 'ghost'" in issue.message


WARM = "kind: Allocation\nname: warm\ntime_limit: 1h\n"


def test_allocation_naming_nothing(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": GOOD_PREPARE + "allocation: ghost\n"})
    assert (issue.file, issue.line, issue.field) == ("specs/a.yaml", 6, "allocation")
    assert "names nothing" in issue.message


def test_allocation_naming_a_run(repo: GitRepo) -> None:
    other = GOOD_PREPARE.replace("prepare", "other")
    issue = only(
        repo, {"specs/a.yaml": GOOD_PREPARE + "allocation: other\n", "specs/b.yaml": other}
    )
    assert issue.field == "allocation" and "the Run 'other'" in issue.message


def test_run_in_an_allocation_loads(repo: GitRepo) -> None:
    repo.commit({"specs/a.yaml": GOOD_PREPARE + "allocation: warm\n", "specs/w.yaml": WARM})
    desired = load_desired(open_source(repo.root))
    assert desired.runs["prepare"].spec.allocation == "warm"
    assert set(desired.allocations) == {"warm"}


@pytest.mark.parametrize(
    ("resources", "refused"),
    [
        ("  partition: gpu\n", "resources.partition"),
        ("  components: [{cpus: 1}, {cpus: 2}]\n", "resources.components"),
        ("  nodes: 2\n  constraint: ib\n", "resources.constraint"),
    ],
)
def test_run_in_an_allocation_takes_only_step_resources(
    repo: GitRepo, resources: str, refused: str
) -> None:
    spec = GOOD_PREPARE + "allocation: warm\nresources:\n" + resources
    issue = only(repo, {"specs/a.yaml": spec, "specs/w.yaml": WARM})
    assert refused in issue.message
    assert (
        "cpus, memory, gpus, gpus_per_node, gpus_per_task, shards, gres, time, nodes, "
        "ntasks, ntasks_per_node" in issue.message
    )


def test_a_run_in_an_allocation_may_span_nodes_and_tasks(repo: GitRepo) -> None:
    layout = "resources:\n  nodes: 2\n  ntasks_per_node: 1\n  cpus: 2\n"
    repo.commit(
        {"specs/a.yaml": GOOD_PREPARE + "allocation: warm\n" + layout, "specs/w.yaml": WARM}
    )
    resources = load_desired(open_source(repo.root)).runs["prepare"].spec.resources
    assert (resources.step_nodes, resources.tasks_per_node) == (2, 1)


@pytest.mark.parametrize(
    ("lines", "field", "message"),
    [
        (
            "resources:\n  ntasks: 4\n",
            "resources.ntasks",
            "lays out the step of a run inside an allocation (set `allocation:`)",
        ),
        (
            "allocation: warm\nresources:\n  nodes: 2\n  ntasks: 1\n",
            "resources",
            "ntasks (1) is fewer than nodes (2)",
        ),
        (
            "allocation: warm\nresources:\n  nodes: 2\n  ntasks: 5\n  ntasks_per_node: 2\n",
            "resources",
            "ntasks (5) is more than nodes (2) x ntasks_per_node (2)",
        ),
        ("allocation: warm\nresources:\n  ntasks: 0\n", "resources.ntasks", ""),
    ],
)
def test_a_step_layout_that_cannot_be(repo: GitRepo, lines: str, field: str, message: str) -> None:
    issue = only(repo, {"specs/a.yaml": GOOD_PREPARE + lines, "specs/w.yaml": WARM})
    assert (issue.file, issue.field) == ("specs/a.yaml", field)
    assert issue.line is not None and issue.line > 1 and message in issue.message


def test_min_remaining_must_be_shorter_than_the_time_limit(repo: GitRepo) -> None:
    issue = only(repo, {"specs/w.yaml": WARM + "min_remaining: 2h\n"})
    assert "min_remaining" in issue.message and "never be reused" in issue.message


def test_a_tab_in_the_indentation_says_tab(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": GOOD_PREPARE + "resources:\n\tcpus: 4\n"})
    assert (issue.file, issue.line) == ("specs/a.yaml", 7)
    assert issue.message == "invalid YAML: a tab in the indentation: indent with spaces only"


def test_a_colon_in_flow_style_says_quote_it(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": GOOD_PREPARE + "resources: {time: 00:20:00}\n"})
    assert (issue.file, issue.line) == ("specs/a.yaml", 6)
    assert 'quote a value that holds a colon, as in {gpus: "A100:1"' in issue.message


@pytest.mark.parametrize(
    ("line", "field", "message"),
    [
        ("name: 123", "name", 'expected text, got the number 123: quote it, as in "123"'),
        ("description: [a]", "description", "expected text, got a list"),
        ("resources: gpu", "resources", "expected a mapping (one `key: value` a line), got 'gpu'"),
        ("coupled_with: x", "coupled_with", "expected a list ([a, b], or one `- item` a line)"),
        ("retries: 1.5", "retries", "expected a whole number (retries after any failure, 0 to"),
        ("update: sometimes", "update", "must be 'defer' or 'replace', got 'sometimes'"),
        ("inputs: {a: 5}", "inputs.a", "expected another run's output (prepare.dataset) or"),
        ("comand: x", "comand", "unknown field: did you mean command?"),
        ("resources: {partiton: cpu}", "resources.partiton", "did you mean partition?"),
        ("outputs: {data: {paht: x}}", "outputs.data.paht", "did you mean path?"),
        ("zzz: 1", "zzz", "unknown field: known here are allocation, checkpoint, code, command,"),
    ],
)
def test_messages_in_the_spec_s_words(repo: GitRepo, line: str, field: str, message: str) -> None:
    spec = "kind: Run\nname: x\ncommand: echo hi\n"
    spec = spec.replace("name: x\n", "") if line.startswith("name:") else spec
    found = [
        issue
        for issue in problems(repo, {"specs/a.yaml": spec + line + "\n"})
        if issue.field == field
    ]
    assert len(found) == 1, found
    assert message in found[0].message
    assert "Input should" not in found[0].message and "schemas/" not in found[0].message


def test_an_unknown_field_in_recon_yaml_suggests_the_known_one(repo: GitRepo) -> None:
    issue = only(repo, {"recon.yaml": "project: demo\nschedular: local\n"})
    assert (issue.file, issue.line, issue.field) == ("recon.yaml", 2, "schedular")
    assert issue.message == "unknown field: did you mean scheduler?"


def test_a_merge_key_does_not_stop_the_rest_of_the_file(repo: GitRepo) -> None:
    merged = "kind: Run\nname: b\nbase: &base {cpus: 1}\nresources:\n  <<: *base\n  memry: 1GB\n"
    found = problems(
        repo, {"specs/a.yaml": merged + "---\n" + GOOD_PREPARE + "retry: 2\nname: again\n"}
    )
    assert [(issue.line, issue.field, issue.message) for issue in found] == [
        (5, "resources", "merge keys (<<) are not supported: write the fields out"),
        (14, "name", "duplicate key 'name' (first on line 9)"),
    ]


def test_every_bad_key_of_a_document_is_listed(repo: GitRepo) -> None:
    found = problems(repo, {"specs/a.yaml": GOOD_PREPARE + "name: again\ncommand: twice\n"})
    assert [(issue.line, issue.field) for issue in found] == [(6, "name"), (7, "command")]


@pytest.mark.parametrize("path", ["../elsewhere.txt", "..", "out/../../x"])
def test_an_output_that_leaves_the_run_directory(repo: GitRepo, path: str) -> None:
    spec = f"kind: Run\nname: a\ncommand: x\noutputs:\n  data: {path}\n"
    issue = only(repo, {"specs/a.yaml": spec})
    assert (issue.line, issue.field) == (5, "outputs.data.path")
    assert "leaves the run's directory with '..'" in issue.message


def test_an_absolute_output_and_one_inside_stay_allowed(repo: GitRepo) -> None:
    spec = "kind: Run\nname: a\ncommand: x\noutputs:\n  a: /data/a.txt\n  b: out/../b.txt\n"
    repo.commit({"specs/a.yaml": spec})
    assert set(load_desired(open_source(repo.root)).runs) == {"a"}


def test_two_runs_declaring_the_same_output_file(repo: GitRepo) -> None:
    first = "kind: Run\nname: a\ncommand: x\noutputs:\n  data: /shared/data.csv\n"
    second = "kind: Run\nname: b\ncommand: x\noutputs:\n  copy: /shared/./data.csv\n"
    third = "kind: Run\nname: c\ncommand: x\nworkdir: runs/a\noutputs:\n  mine: other.csv\n"
    fourth = "kind: Run\nname: d\ncommand: x\nworkdir: runs/a\noutputs:\n  again: other.csv\n"
    found = problems(
        repo,
        {"specs/a.yaml": first, "specs/b.yaml": second, "specs/c.yaml": f"{third}---\n{fourth}"},
    )
    assert [(issue.file, issue.line, issue.field) for issue in found] == [
        ("specs/b.yaml", 5, "outputs.copy"),
        ("specs/c.yaml", 13, "outputs.again"),
    ]
    assert found[0].message.startswith(
        "/shared/data.csv is also output data of run a (specs/a.yaml:5): two runs would"
    )
    assert "runs/a/other.csv is also output mine of run c (specs/c.yaml:6)" in found[1].message


@pytest.mark.parametrize(
    ("lines", "field", "message"),
    [
        ("idle_release: 0\n", "idle_release", "time must be positive"),
        ("idle_release: soon\n", "idle_release", "time must look like"),
        ("container: {image: u, workdir: work}\n", "container.workdir", "not an absolute path"),
        ("container: {image: u, writable: maybe}\n", "container.writable", ""),
    ],
)
def test_allocation_options_that_cannot_be(
    repo: GitRepo, lines: str, field: str, message: str
) -> None:
    issue = only(repo, {"specs/w.yaml": WARM + lines})
    assert (issue.file, issue.line, issue.field) == ("specs/w.yaml", 4, field)
    assert message in issue.message


# -- renamed_from ------------------------------------------------------------------------

RENAMED = """\
kind: Run
name: {name}
renamed_from: {old}
command: echo hi > {{outputs.data.path}}
outputs:
  data: {name}.txt
"""


def test_renamed_from_a_run_still_in_the_project(repo: GitRepo) -> None:
    issue = only(
        repo,
        {"specs/a.yaml": GOOD_PREPARE, "specs/b.yaml": RENAMED.format(name="prep2", old="prepare")},
    )
    assert (issue.file, issue.line, issue.field) == ("specs/b.yaml", 3, "renamed_from")
    assert issue.message.startswith("names the Run 'prepare' (specs/a.yaml:2), which is still")


def test_renamed_from_itself(repo: GitRepo) -> None:
    issue = only(repo, {"specs/a.yaml": RENAMED.format(name="prep", old="prep")})
    assert (issue.file, issue.line, issue.field) == ("specs/a.yaml", 3, "renamed_from")
    assert "names the run itself" in issue.message


def test_two_runs_claiming_one_old_name(repo: GitRepo) -> None:
    found = problems(
        repo,
        {
            "specs/a.yaml": RENAMED.format(name="one", old="prep"),
            "specs/b.yaml": RENAMED.format(name="two", old="prep"),
        },
    )
    assert [(i.file, i.line, i.field) for i in found] == [
        ("specs/a.yaml", 3, "renamed_from"),
        ("specs/b.yaml", 3, "renamed_from"),
    ]
    assert "'prep' is claimed by two (specs/b.yaml:3) too" in found[0].message


def test_an_input_naming_a_renamed_run_by_its_old_name(repo: GitRepo) -> None:
    reader = "kind: Run\nname: train\ncommand: cat {inputs.d.path}\ninputs:\n  d: prep.data\n"
    issue = only(
        repo,
        {"specs/a.yaml": RENAMED.format(name="prepare", old="prep"), "specs/b.yaml": reader},
    )
    assert (issue.file, issue.line, issue.field) == ("specs/b.yaml", 5, "inputs.d")
    assert issue.message == (
        "'prep.data' names 'prep', renamed to 'prepare' (renamed_from): name 'prepare.data'"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "-1 is not GPUs: give a number of them (2) or their devices ([0, 1])"),
        ('"2"', "'2' is not GPUs: give a number of them (2) or their devices ([0, 1])"),
        (
            "[0, gpu1]",
            "'gpu1' is not a GPU device: give its index (0) or its UUID as nvidia-smi -L "
            "shows it (GPU-...)",
        ),
        ("[1, 1]", "1, 1: a device is listed twice"),
    ],
)
def test_a_bad_local_gpu_declaration_names_file_line_and_field(
    repo: GitRepo, value: str, message: str
) -> None:
    issue = only(repo, {"recon.yaml": f"project: demo\nlocal:\n  gpus: {value}\n"})
    assert (issue.file, issue.line, issue.field) == ("recon.yaml", 3, "local.gpus")
    assert issue.message == message


def test_local_gpus_are_a_count_or_devices() -> None:
    from reconciler.desired.models import LocalMachine

    assert LocalMachine.model_validate({"gpus": 2}).gpus == ("0", "1")
    assert LocalMachine.model_validate({"gpus": [3, "GPU-5a1c"]}).gpus == ("3", "GPU-5a1c")
    assert LocalMachine.model_validate({}).gpus is None
