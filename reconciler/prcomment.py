"""Post `recon plan --against`'s markdown on a pull request (GitHub) or merge request
(GitLab), updating the comment posted before instead of adding one per push.

Run by the GitHub Action (action.yml) and the GitLab CI component (templates/) after the
plan, as `python -m reconciler.prcomment github|gitlab --project P --plan FILE
--errors FILE --exit-code N`. The comment recon posted is found again by a hidden
marker naming the project folder, so two projects of one repository get one comment
each, and a comment anyone else wrote is never touched. Only the standard library: it
talks to one REST API with a token, nothing else.

Where it reads the request from (what each CI sets):
    github  GITHUB_API_URL, GITHUB_REPOSITORY, GITHUB_EVENT_PATH (the pull request's
            number), GITHUB_TOKEN
    gitlab  CI_API_V4_URL, CI_PROJECT_ID, CI_MERGE_REQUEST_IID, RECON_NOTE_TOKEN (a
            token with the api scope: CI_JOB_TOKEN may not write notes)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# GitHub holds 65,536 characters per comment; the rest of a longer plan is in the job's log.
LONGEST = 60_000
PAGE = 100


def marker(project: str) -> str:
    return f"<!-- recon-plan: {project} -->"


def body(project: str, plan: str, errors: str, exit_code: int) -> str:
    """The comment: the marker, then the plan, or what recon said when it failed."""
    if exit_code in (0, 2):
        text = plan
    else:
        text = (
            f"**recon plan failed** (exit code {exit_code}) for `{project}`:\n\n"
            f"```\n{errors.strip() or plan.strip()}\n```\n"
        )
    if len(text) > LONGEST:
        text = text[:LONGEST] + "\n\n… (cut: the whole plan is in the job's log)\n"
    return f"{marker(project)}\n{text}"


class ApiError(Exception):
    """The CI's API refused a call, or the variables it needs are not set."""


@dataclass(frozen=True)
class Api:
    """Comments of one pull or merge request over its host's REST API."""

    comments_url: str  # list and create
    comment_url: str  # update one: {id} filled in
    headers: Mapping[str, str]
    update_method: str

    def call(self, method: str, url: str, data: Mapping[str, str] | None = None) -> Any:
        payload = None if data is None else json.dumps(data).encode()
        request = urllib.request.Request(
            url,
            payload,
            {**self.headers, "Content-Type": "application/json"},
            method=method,
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:500]
            raise ApiError(f"{method} {url}: HTTP {error.code} {error.reason}: {detail}") from None
        except urllib.error.URLError as error:
            raise ApiError(f"{method} {url}: {error.reason}") from None

    def comments(self) -> Iterator[Mapping[str, Any]]:
        page = 1
        while True:
            found = self.call("GET", f"{self.comments_url}?per_page={PAGE}&page={page}")
            yield from found
            if len(found) < PAGE:
                return
            page += 1

    def post_or_update(self, project: str, text: str) -> str:
        mine = next(
            (c for c in self.comments() if str(c.get("body", "")).startswith(marker(project))),
            None,
        )
        if mine is None:
            made = self.call("POST", self.comments_url, {"body": text})
            return f"posted comment {made['id']}"
        url = self.comment_url.format(id=mine["id"])
        self.call(self.update_method, url, {"body": text})
        return f"updated comment {mine['id']}"


def _needed(environment: Mapping[str, str], *names: str) -> list[str]:
    missing = [name for name in names if not environment.get(name)]
    if missing:
        raise ApiError(f"{', '.join(missing)} not set: {_WHY.get(missing[0], 'set by the CI')}")
    return [environment[name] for name in names]


_WHY = {
    "GITHUB_TOKEN": "give the action's github-token input (the default is the job's token)",
    "RECON_NOTE_TOKEN": "store a token with the api scope as the masked CI/CD variable "
    "RECON_NOTE_TOKEN (CI_JOB_TOKEN may not write merge request notes)",
    "CI_MERGE_REQUEST_IID": "the job runs only in merge request pipelines "
    '(rules: if: $CI_PIPELINE_SOURCE == "merge_request_event")',
}


def github(environment: Mapping[str, str]) -> Api:
    api, repository, event_path, token = _needed(
        environment, "GITHUB_API_URL", "GITHUB_REPOSITORY", "GITHUB_EVENT_PATH", "GITHUB_TOKEN"
    )
    event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    number = event.get("pull_request", {}).get("number") or event.get("number")
    if not number:
        raise ApiError(f"{event_path} is not a pull request's event: run on pull_request")
    return Api(
        comments_url=f"{api}/repos/{repository}/issues/{number}/comments",
        comment_url=f"{api}/repos/{repository}/issues/comments/{{id}}",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        },
        update_method="PATCH",
    )


def gitlab(environment: Mapping[str, str]) -> Api:
    api, project, merge_request, token = _needed(
        environment, "CI_API_V4_URL", "CI_PROJECT_ID", "CI_MERGE_REQUEST_IID", "RECON_NOTE_TOKEN"
    )
    notes = f"{api}/projects/{project}/merge_requests/{merge_request}/notes"
    return Api(
        comments_url=notes,
        comment_url=notes + "/{id}",
        headers={"PRIVATE-TOKEN": token},
        update_method="PUT",
    )


HOSTS = {"github": github, "gitlab": gitlab}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reconciler.prcomment",
        description="Post recon plan's markdown on the pull or merge request, updated in place.",
    )
    parser.add_argument("host", choices=sorted(HOSTS))
    parser.add_argument("--project", required=True, help="the project folder planned")
    parser.add_argument("--plan", required=True, type=Path, help="recon plan's stdout")
    parser.add_argument("--errors", type=Path, help="recon plan's stderr")
    parser.add_argument("--exit-code", required=True, type=int, help="recon plan's exit code")
    options = parser.parse_args(argv)
    try:
        plan = options.plan.read_text(encoding="utf-8")
        errors = options.errors.read_text(encoding="utf-8") if options.errors else ""
        api = HOSTS[options.host](os.environ)
        text = body(options.project, plan, errors, options.exit_code)
        print(api.post_or_update(options.project, text))
    except (ApiError, OSError) as error:
        print(f"error: could not comment the plan: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
