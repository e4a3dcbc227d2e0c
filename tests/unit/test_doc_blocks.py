"""Every fenced block of README.md and docs/*.md is checked by a test, or says why not.

A block that shows what recon prints (a plan, an error, a log line, a listing, a script
or a command line recon runs), describes its command line (the synopses), or shows what
Slurm prints for recon to read (docs/arrays.md), is compared with what recon's code
produces or reads: YAML blocks and the errors shown after an invalid one
by tests/unit/test_doc_yaml.py, docs/cli.md's console blocks and diagram by
tests/local/test_doc_cli_output.py (which keeps its own list of the commands it does not
reproduce), every block of docs/tutorial.md by tests/local/test_doc_tutorial.py (which
writes each file it shows and runs each command, and fails on a block it cannot take),
and every other block by the test CHECKED names. A block that is not an
output of recon (a command to type, a diagram) is in NOT_OUTPUT with the reason. So a
new block cannot be added without a test or a reason.

Blocks are named `file: first line` (its first 60 characters; ` #2` for the second block
with the same name), as tests/docs.py's `Fence.key` makes it.
"""

from __future__ import annotations

from tests.docs import ROOT, Fence, all_fences, keyed

UNIT = "tests/unit/test_doc_outputs.py"
STORIES = "tests/local/test_doc_stories.py"
ARRAYS = "tests/unit/test_doc_arrays.py"

# Blocks showing what recon prints, and the test that compares them with it.
COST = "tests/unit/test_doc_cost.py::test_the_pages_outputs_are_what_recon_prints"
CHECKED = {
    "docs/cost.md: $ recon cost": COST,
    "docs/cost.md: $ recon cost embed": COST,
    'docs/cost.md: $ git commit -am "train on 4 GPUs, add finetune"': COST,
    "docs/cost.md: $ recon plan --against HEAD~1 --format markdown": COST,
    "docs/cost.md: $ recon cost --format json > recon-durations.json": COST,
    "docs/cost.md: $ recon plan --against HEAD~1 --durations recon-durations.js": COST,
    "docs/cost.md: error: Invalid value for --durations: recon-durations.json h": (
        "tests/unit/test_doc_cost.py::test_a_bad_durations_file_is_one_error_naming_it"
    ),
    "docs/specs.md: <output's folder>/.recon-staging/<output's name>     what {o": (
        "tests/unit/test_staged_outputs.py::test_the_staging_path_the_docs_show"
    ),
    "docs/cli.md: note: uncommitted changes (specs/train.yaml) are not in this": (
        f"{STORIES}::test_the_uncommitted_note"
    ),
    "docs/cli.md: recon plan for project cartpole at commit dfb3ee034c2a (sche": (
        f"{UNIT}::test_the_illustration_with_more_action_kinds"
    ),
    "docs/cli.md: recon plan for project cartpole at commit dfb3ee034c2a (sche #2": (
        f"{UNIT}::test_the_illustration_with_sacct_failing"
    ),
    "docs/cli.md: recon plan for project cartpole at commit 3244295f3508 (sche": (
        f"{UNIT}::test_the_fit_check_in_a_plan"
    ),
    "docs/cli.md: error: revision 'origin/main' not found in .: name a commit,": (
        f"{STORIES}::test_a_revision_that_is_not_there"
    ),
    "docs/cli.md: Apply this plan? [y/N]:": f"{STORIES}::test_the_prompt_at_a_terminal",
    "docs/cli.md: HEAD moved to 3f1c0e9a7b21: not applied; run `recon apply` a": (
        "tests/local/test_apply_wait.py::test_a_commit_made_while_waiting_is_reported_not_applied"
    ),
    "docs/cli.md: cancelled job 4099": f"{UNIT}::test_the_other_lines_apply_prints",
    "docs/cli.md: error: another recon apply (pid 20915 on vm, since 23:54:23)": (
        f"{STORIES}::test_the_lock_held_by_another_apply"
    ),
    "docs/cli.md: recon plan for project cartpole at commit 5e1d0c000000 (sche": (
        f"{UNIT}::test_a_held_plan"
    ),
    "docs/cli.md: recon version": f"{UNIT}::test_the_synopsis_is_the_command_line",
    "docs/cli.md: recon dev-cluster up [--timeout SECONDS]": (
        f"{UNIT}::test_the_synopsis_is_the_command_line"
    ),
    "docs/cli.md: ro-crate/ro-crate-metadata.json   the crate's description": (
        f"{STORIES}::test_the_ro_crate_files_and_an_action"
    ),
    "docs/cli.md: {": f"{STORIES}::test_the_ro_crate_files_and_an_action",
    # Slurm's own output, read with recon's parsers.
    "docs/arrays.md: MaxArraySize            = 1001": (
        f"{ARRAYS}::test_max_array_size_reads_as_its_default_and_the_local_backend_matches"
    ),
    "docs/arrays.md: SLURM_ARRAY_JOB_ID=14782": (
        f"{ARRAYS}::test_the_local_backend_sets_the_array_variables_slurm_set"
    ),
    "docs/arrays.md: 14769_0|14770|COMPLETED|None|cpu1|cpu|2026-12-01T17:34:22|20": (
        f"{ARRAYS}::test_the_shown_pass_reads_as_the_table_says"
    ),
    "docs/arrays.md: 14769_0|14770|COMPLETED|0:0|None|2026-12-01T17:34:22|2026-12": (
        f"{ARRAYS}::test_the_shown_pass_reads_as_the_table_says"
    ),
    "docs/het.md: $ recon plan": f"{STORIES}::test_the_plan_of_a_het_run",
    "docs/het.md: environments on: vm, learner on: vm": f"{STORIES}::test_the_rendezvous_log",
    "docs/het.md: recon plan for project cartpole at commit 209efed50411 (sche": (
        f"{UNIT}::test_a_teardown_in_a_plan"
    ),
    "docs/het.md: $ recon apply --auto-approve --wait": f"{STORIES}::test_coupled_runs",
    "docs/het.md: $ recon apply --auto-approve": f"{STORIES}::test_coupled_runs",
    "docs/specs.md: ! blocked   train          does not fit the cluster: asks 1": (
        "tests/local/test_local_gpus.py::test_a_gpu_run_is_blocked_on_a_machine_with_no_gpu"
    ),
    "docs/het.md: ! blocked   train          does not fit the cluster: partiti": (
        f"{UNIT}::test_the_fit_check_in_a_plan"
    ),
    "docs/operations.md: 2026-11-29T23:55:05.559+00:00 INFO    started commit=5333d91": (
        f"{STORIES}::test_a_watch_session"
    ),
    'docs/operations.md: {"time": "2026-11-29T23:56:08.857+00:00", "level": "info", "': (
        f"{STORIES}::test_a_watch_in_json_and_its_notifications"
    ),
    'docs/operations.md: {"commit": "516ff603b522e18e1e7a24fb54b4ec26b0927a1e", "coun': (
        f"{STORIES}::test_a_watch_in_json_and_its_notifications"
    ),
    "docs/operations.md: 2026-12-02T13:54:40.664+00:00 INFO    started commit=4a1e83c": (
        "tests/local/test_watch_look.py::"
        "test_a_watch_looks_again_when_a_running_job_reaches_its_time_limit"
    ),
    "docs/operations.md: recon watch . --branch main --interval 30s --pull --log-form": (
        f"{UNIT}::test_the_lines_the_examples_hold"
    ),
    "docs/operations.md: *   *  *   *   *     cd /srv/recon/my-project && /opt/recon/": (
        f"{UNIT}::test_the_lines_the_examples_hold"
    ),
    "docs/specs.md: specs/sweep.yaml:3: command: unknown template token {output.": (
        f"{UNIT}::test_an_unknown_template_token"
    ),
    "docs/specs.md: #SBATCH --job-name=cartpole.actor-learner": (
        f"{UNIT}::test_the_directives_of_a_het_job"
    ),
    "docs/specs.md: resources.components.1.time: is a job-wide setting: Slurm ta": (
        f"{UNIT}::test_a_job_wide_setting_in_a_component"
    ),
    "docs/specs.md: resources.sbatch_extra.0: --part (short for --partition) is": (
        f"{UNIT}::test_a_prefix_of_a_refused_flag"
    ),
    "docs/specs.md: #!/bin/bash": f"{UNIT}::test_the_whole_batch_script",
    "docs/specs.md: No environment declared for runs actor-learner, prepare, see": (
        "tests/unit/test_environment.py::test_a_plan_that_submits_runs_declaring_nothing_says_so"
    ),
    "docs/specs.md: recon plan for project cartpole at commit 7a1c3e9f0b42 (sche": (
        f"{UNIT}::test_a_retry_by_kind_in_a_plan"
    ),
    "docs/specs.md: recon plan for project cartpole at commit 7a1c3e9f0b42 (sche #2": (
        f"{UNIT}::test_a_requeue_in_a_plan"
    ),
    "docs/specs.md: recon plan for project cartpole at commit dfb3ee034c2a (sche": (
        f"{UNIT}::test_a_cascade_in_a_plan"
    ),
    "docs/specs.md: {": f"{STORIES}::test_the_provenance_manifest",
    "docs/specs.md: salloc --no-shell --job-name=<project>.<name> --comment=<tag": (
        f"{UNIT}::test_the_salloc_command_line"
    ),
    "docs/specs.md: srun --jobid=<job> --overlap|--exact --job-name=recon2:<proj": (
        f"{UNIT}::test_the_srun_command_line"
    ),
}

TYPED = "commands the reader types, not an output of recon"
# Blocks that are not an output of recon, and why.
NOT_OUTPUT = {
    "README.md: pip install -e . && recon apply examples/repo --auto-approve": (
        f"{TYPED}; tests/e2e/test_quickstart.py runs it"
    ),
    "README.md: recon apply examples/repo --scheduler slurm --auto-approve -": (
        f"{TYPED}; tests/e2e/test_quickstart.py checks it is the first one sent to Slurm, "
        "and plans it"
    ),
    "README.md: pip install -e '.[test]' && recon dev-cluster up && RECON_RE": TYPED,
    "README.md: recon validate examples/repo             # every problem in": TYPED,
    "docs/architecture.md: recon.yaml + journal  ─▶  observe (one squeue; sacct: the jo": (
        "a diagram of how a pass flows through the modules"
    ),
    "docs/cli.md: git fetch origin main": f"{TYPED}: a CI job's script",
    "docs/cli.md: recon plan --out tonight.plan      # review it": TYPED,
    "docs/cli.md: recon serve                          # then open http://127.": (
        f"{TYPED}; tests/local/test_serve_browser.py serves the example and opens it"
    ),
    "docs/web.md: recon serve examples/repo            # then open http://127.": (
        f"{TYPED}; tests/local/test_serve_browser.py serves the example and opens it"
    ),
    "docs/exit-codes.md: recon plan . --against origin/main --detailed-exitcode --for": (
        f"{TYPED}: a CI job's script"
    ),
    "docs/exit-codes.md: # cron: converge every minute; skip quietly while another ap": (
        f"{TYPED}: a cron line"
    ),
    "docs/exit-codes.md: # a batch pipeline: run everything to the end, fail the scri": (
        f"{TYPED}: a batch script"
    ),
    "docs/operations.md: recon watch . --branch main --interval 30s": TYPED,
    "docs/specs.md: cartpole/": "a diagram of a project's files",
    "docs/specs.md: <state_dir>/checkouts/<full commit sha>/<project folder's pa": (
        "the form of a path; the batch script recon renders shows one, checked by "
        f"{UNIT}::test_the_whole_batch_script"
    ),
}


def checked_elsewhere(fence: Fence, after_invalid_yaml: bool) -> bool:
    """The blocks the YAML test, docs/cli.md's console test and the tutorial's test go
    through themselves."""
    if fence.lang == "yaml" or after_invalid_yaml or fence.file == "docs/tutorial.md":
        return True
    return fence.file == "docs/cli.md" and fence.lang in ("console", "mermaid")


def inventory() -> dict[str, Fence]:
    found = all_fences()
    following_invalid = {
        id(found[index + 1])
        for index, fence in enumerate(found[:-1])
        if fence.lang == "yaml" and fence.preceded_by == "<!-- doc-test: invalid -->"
    }
    return {
        key: fence
        for key, fence in keyed(found).items()
        if not checked_elsewhere(fence, id(fence) in following_invalid)
    }


def test_every_block_is_checked_or_says_why_not() -> None:
    blocks = inventory()
    unlisted = sorted(set(blocks) - set(CHECKED) - set(NOT_OUTPUT))
    assert not unlisted, "blocks with neither a test nor a reason:\n" + "\n".join(
        f"{blocks[key].where}: {key!r}" for key in unlisted
    )
    assert not set(CHECKED) & set(NOT_OUTPUT)
    gone = sorted((set(CHECKED) | set(NOT_OUTPUT)) - set(blocks))
    assert not gone, f"listed, but no such block: {gone}"


def test_the_tests_named_exist() -> None:
    for key, node in CHECKED.items():
        path, _, name = node.partition("::")
        assert f"def {name}(" in (ROOT / path).read_text(), f"{key}: no test {node}"


def test_the_inventory_sees_every_kind_of_block() -> None:
    # The extraction itself must not silently find nothing (a changed fence style), and
    # indented blocks (inside a list item) count.
    blocks = inventory()
    assert len(blocks) >= 40
    assert "docs/specs.md: resources.components.1.time: is a job-wide setting: Slurm ta" in blocks
