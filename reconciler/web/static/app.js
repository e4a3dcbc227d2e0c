// recon serve: the page's only script. It reads the JSON API and redraws; every text
// from the server goes in through textContent, the graph through the SVG parser.
"use strict";

let selected = null;
let lastVersion = null;
const expanded = new Set(); // sweeps whose members the run table shows

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

// One row of the run table (or of a sweep's members): clickable, red when it failed.
function runRow(item, name, onClick) {
  const tr = document.createElement("tr");
  cell(tr, name);
  cell(tr, item.sync).classList.add("nowrap");
  cell(tr, item.health).classList.add("nowrap");
  cell(tr, item.job_id).classList.add("nowrap");
  cell(tr, item.why ?? item.next);
  tr.classList.add("clickable");
  tr.classList.toggle("failed", Boolean(item.failed));
  tr.dataset.name = item.name;
  tr.addEventListener("click", () => onClick(item.name));
  return tr;
}

// The run table: a sweep as one row, as the graph draws it, its members under it once
// its toggle opens them.
function fillRuns(table) {
  const body = byId("runs").querySelector("tbody");
  body.replaceChildren();
  for (const item of table) {
    if (item.kind !== "sweep") {
      body.appendChild(runRow(item, item.name, show));
      continue;
    }
    const open = expanded.has(item.name);
    const tr = runRow(item, item.name + " (" + item.members.length + " members)", show);
    tr.classList.add("sweep");
    tr.classList.toggle("failed", item.members.some((m) => m.failed));
    const toggle = document.createElement("button");
    toggle.type = "button";
    toggle.className = "toggle";
    toggle.textContent = open ? "▾" : "▸";
    toggle.title = open ? "hide its members" : "show its members";
    toggle.addEventListener("click", (event) => {
      event.stopPropagation();
      if (open) expanded.delete(item.name); else expanded.add(item.name);
      fillRuns(table);
    });
    tr.firstChild.prepend(toggle);
    body.appendChild(tr);
    for (const member of item.members) {
      const row = runRow(member, member.name, show);
      row.classList.add("member");
      row.hidden = !open;
      body.appendChild(row);
    }
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
  byId("banner").hidden = state.banner.length === 0;
  byId("banner").textContent = state.banner.join(" ");
  const commit = state.commit ? state.commit.slice(0, 12) : "the work tree";
  byId("status-line").textContent =
    "at " + commit + " · scheduler " + state.scheduler + " · looked at " +
    new Date(state.observed_at).toLocaleTimeString() +
    (state.observation_complete ? "" : " · observation incomplete") +
    (state.notes.length ? " · " + state.notes.join("; ") : "");
  drawGraph(state.graph_svg);
  fillRuns(state.runs);
  byId("plan").textContent = state.plan;
  // A project without allocations has no card for them.
  byId("allocations-section").hidden = state.allocations.length === 0;
  fillTable("allocations", state.allocations, [
    "name", "job_id", "health", "nodes", (a) => duration(a.time_left),
    (a) => a.steps_running.join(", ") || "-", "reason",
  ]);
  fillCost(state.cost);
  if (selected !== null) await show(selected);
}

// The ways hours were spent, as `recon cost` names them, and the page's words for them.
const SPENT = [
  ["current", "current successes"], ["superseded", "superseded successes"],
  ["failed", "failed attempts"], ["cancelled", "cancelled or torn down"],
  ["idle", "allocations idle"], ["allocation_work", "allocations working"],
  ["running", "running so far"],
];

function hours(value) {
  return value ? value.toFixed(3) : "-";
}

function jobs(count) {
  return count + (count === 1 ? " job" : " jobs");
}

// The project's cost card: hidden until a job has ended with its usage known.
function fillCost(cost) {
  const total = cost && cost.total;
  byId("cost-section").hidden = !total || total.jobs === 0;
  if (!total) return;
  const rows = SPENT.map(([key, words]) => ({
    name: words, gpu: total.gpu_hours_by[key], cpu: total.cpu_hours_by[key],
  }));
  rows.push({ name: "total", gpu: total.gpu_hours, cpu: total.cpu_hours });
  fillTable("cost", rows, ["name", (r) => hours(r.gpu), (r) => hours(r.cpu)]);
  byId("cost-notes").textContent =
    "Queue wait " + hours(total.queue_wait_hours) + " h over " + jobs(total.jobs) +
    (cost.jobs_running_counted
      ? "; " + jobs(cost.jobs_running_counted) + " still running, counted as held so far" : "") +
    (cost.jobs_running ? "; " + cost.jobs_running + " not ended yet, counted once ended." : ".");
  const saved = byId("cost-saved");
  saved.replaceChildren(...Object.values(cost.saved || {}).map((s) => {
    const li = document.createElement("li");
    li.textContent = "Saved " + hours(s.gpu_hours) + " GPU-h, " + hours(s.cpu_hours) +
      " CPU-h over " + jobs(s.jobs) + ": " + s.how;
    return li;
  }));
}

// A run's cost in its details: its hours and how they were spent.
function costWords(cost) {
  if (!cost) return "";
  const spent = SPENT.filter(([key]) => cost.gpu_hours_by[key] || cost.cpu_hours_by[key])
    .map(([key, words]) => words + " " + hours(cost.gpu_hours_by[key]) + " GPU-h, " +
      hours(cost.cpu_hours_by[key]) + " CPU-h");
  return "Cost: " + hours(cost.gpu_hours) + " GPU-h, " + hours(cost.cpu_hours) + " CPU-h over " +
    jobs(cost.jobs) + (spent.length ? " (" + spent.join("; ") + ")" : "") +
    (cost.in_allocation_job ? ", held within its allocation's job." : ".");
}

async function show(name) {
  selected = name;
  for (const node of document.querySelectorAll("#graph g.node")) {
    node.classList.toggle("selected", node.dataset.name === name);
  }
  const shown = await getJSON("/api/runs/" + encodeURIComponent(name));
  const details = byId("details");
  details.hidden = false;
  byId("details-sweep").hidden = shown.kind !== "sweep";
  byId("details-cost").hidden = true;
  byId("details-run").hidden = shown.kind !== "run";
  byId("details-documents").hidden = !shown.kind;
  if (shown.error) {
    byId("details-name").textContent = name;
    byId("details-where").textContent = "";
    byId("details-reason").textContent = shown.error;
    return;
  }
  byId("details-name").textContent = shown.kind === "sweep"
    ? "sweep " + shown.name + " (" + shown.members.length + " members)"
    : shown.name;
  const at = shown.commit ? " at " + shown.commit.slice(0, 12) : "";
  byId("details-spec").textContent = shown.spec ?? "(not in the repo at this commit)";
  byId("details-provenance").hidden = shown.kind === "sweep";
  if (shown.kind === "sweep") {
    byId("details-where").textContent = (shown.location ?? "not in the repo") + at;
    byId("details-reason").textContent = shown.sync + "; " + shown.health + ".";
    const body = byId("details-members").querySelector("tbody");
    body.replaceChildren(...shown.members.map((m) => runRow(m, m.values, show)));
    return;
  }
  byId("details-where").textContent = shown.location
    ? shown.location + at + " · spec " + shown.spec_hash.slice(0, 12)
    : "no longer in the repo" + at + ": its jobs as recon knows them";
  byId("details-reason").textContent = shown.why;
  const cost = byId("details-cost");
  cost.hidden = !shown.cost;
  cost.textContent = costWords(shown.cost);
  fillTable("details-jobs", shown.jobs, [
    "job_id", "state", (j) => j.exit_code, "nodes", (j) => when(j.start), (j) => when(j.end),
  ]);
  byId("details-log-job").textContent = shown.log.job_id ? "(job " + shown.log.job_id + ")" : "";
  byId("details-log").textContent = shown.log.stdout ?? "(no log)";
  const err = byId("details-log-err");
  err.hidden = !shown.log.stderr;
  err.textContent = shown.log.stderr || "";
  fillTable("details-outputs", shown.outputs, [
    "name", "path", (o) => (o.version ? o.version.kind + " " + o.version.digest.slice(0, 16) + " · " + o.version.bytes + " bytes" : "missing"),
  ]);
  fillTable("details-history", shown.history, [
    (h) => when(h.created_at), (h) => (h.commit ? h.commit.slice(0, 12) : "-"), "job_id", "status", "ended",
  ]);
  byId("details-manifest").textContent = shown.manifest ? JSON.stringify(shown.manifest, null, 2) : "(none yet)";
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
