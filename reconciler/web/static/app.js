// recon serve: the page's only script. It reads the JSON API and redraws; every text
// from the server goes in through textContent, the graph through the SVG parser.
"use strict";

let selected = null;
let lastVersion = null;

function byId(id) {
  return document.getElementById(id);
}

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "-" : String(text);
  row.appendChild(td);
  return td;
}

function fillTable(id, rows, columns, onClick) {
  const body = byId(id).querySelector("tbody");
  body.replaceChildren();
  for (const item of rows) {
    const tr = document.createElement("tr");
    for (const column of columns) {
      cell(tr, typeof column === "function" ? column(item) : item[column]);
    }
    if (onClick) {
      tr.classList.add("clickable");
      tr.dataset.name = item.name;
      tr.addEventListener("click", () => onClick(item.name));
    }
    body.appendChild(tr);
  }
}

function when(iso) {
  return iso ? iso.replace("T", " ").slice(0, 19) : "-";
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  return h + "h" + String(m).padStart(2, "0") + "m";
}

function drawGraph(svgText) {
  const parsed = new DOMParser().parseFromString(svgText, "image/svg+xml");
  const svg = document.importNode(parsed.documentElement, true);
  const box = byId("graph");
  box.replaceChildren(svg);
  for (const node of svg.querySelectorAll("g.node")) {
    if (node.dataset.kind !== "run") continue;
    node.addEventListener("click", () => show(node.dataset.name));
    node.addEventListener("keydown", (event) => {
      if (event.key === "Enter") show(node.dataset.name);
    });
    if (node.dataset.name === selected) node.classList.add("selected");
  }
}

async function getJSON(url) {
  const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
  if (!response.ok && response.status !== 404 && response.status !== 503) {
    throw new Error(url + ": " + response.status);
  }
  return response.json();
}

async function refresh() {
  const state = await getJSON("/api/state");
  lastVersion = state.version;
  const problem = byId("problem");
  problem.hidden = !state.error;
  problem.textContent = state.error ? "Last look failed: " + state.error : "";
  if (!state.project) return;
  byId("project").textContent = state.project;
  const commit = state.commit ? state.commit.slice(0, 12) : "the work tree";
  byId("status-line").textContent =
    "at " + commit + " · scheduler " + state.scheduler + " · looked at " +
    new Date(state.observed_at).toLocaleTimeString() +
    (state.observation_complete ? "" : " · observation incomplete") +
    (state.notes.length ? " · " + state.notes.join("; ") : "");
  drawGraph(state.graph_svg);
  fillTable("runs", state.runs, ["name", "sync", (r) => r.health || "-", "job_id", "reason"], show);
  byId("plan").textContent = state.plan;
  fillTable("allocations", state.allocations, [
    "name", "job_id", "health", "nodes", (a) => duration(a.time_left),
    (a) => a.steps_running.join(", ") || "-", "reason",
  ]);
  if (selected !== null) await show(selected);
}

async function show(name) {
  selected = name;
  for (const node of document.querySelectorAll("#graph g.node")) {
    node.classList.toggle("selected", node.dataset.name === name);
  }
  const run = await getJSON("/api/runs/" + encodeURIComponent(name));
  const details = byId("details");
  details.hidden = false;
  if (run.error) {
    byId("details-name").textContent = name;
    byId("details-reason").textContent = run.error;
    return;
  }
  byId("details-name").textContent = run.name;
  byId("details-where").textContent =
    run.location + (run.commit ? " at " + run.commit.slice(0, 12) : "") +
    " · spec " + run.spec_hash.slice(0, 12);
  const status = run.status;
  byId("details-reason").textContent = status
    ? status.sync + ", " + (status.health || "no job yet") +
      (status.how ? " (" + status.how + ")" : "") + ". " + status.reason +
      (status.note ? " — " + status.note : "")
    : "not in the plan";
  fillTable("details-jobs", run.jobs, [
    "job_id", "state", (j) => j.exit_code, "nodes", (j) => when(j.start), (j) => when(j.end),
  ]);
  byId("details-log-job").textContent = run.log.job_id ? "(job " + run.log.job_id + ")" : "";
  byId("details-log").textContent = run.log.stdout ?? "(no log)";
  const err = byId("details-log-err");
  err.hidden = !run.log.stderr;
  err.textContent = run.log.stderr || "";
  fillTable("details-outputs", run.outputs, [
    "name", "path", (o) => (o.version ? o.version.kind + " " + o.version.digest.slice(0, 16) + " · " + o.version.bytes + " bytes" : "missing"),
  ]);
  fillTable("details-history", run.history, [
    (h) => when(h.created_at), (h) => (h.commit ? h.commit.slice(0, 12) : "-"), "job_id", "status", "health", "reason",
  ]);
  byId("details-spec").textContent = run.spec;
  byId("details-manifest").textContent = run.manifest ? JSON.stringify(run.manifest, null, 2) : "(none yet)";
}

function listen() {
  const events = new EventSource("/api/events");
  events.addEventListener("state", (event) => {
    const version = JSON.parse(event.data).version;
    if (version !== lastVersion) refresh().catch(report);
  });
}

function report(error) {
  const problem = byId("problem");
  problem.hidden = false;
  problem.textContent = String(error);
}

document.addEventListener("DOMContentLoaded", () => {
  refresh().catch(report);
  listen();
});
