// A real recall as the signed-in member: any signals, depth, limit, as_of. It shows what an application
// gets: each result's memory, score and why, `degraded` in words, and each provider's time.

import * as api from "../api.js";
import { el, field, input, section, select, table } from "../dom.js";
import { heading, memoryPicker } from "./common.js";
import { textOf, writer } from "./records.js";

const enc = encodeURIComponent;
const FIELDS = ["query", "text", "filters", "types", "depth", "limit", "as_of", "include"];

// What each `degraded` entry means, in words (README, "degraded entries").
export function explainDegraded(entry) {
  let m;
  if ((m = /^subtree:capped_at_(\d+)_memories$/.exec(entry))) {
    return `Only the ${m[1]} nearest memories were searched (the recall cap); memories further down were not.`;
  }
  if ((m = /^provider:(.+?):(\w+):not_supported$/.exec(entry))) return `Provider ${m[1]} cannot search by ${m[2]}; it was not asked for it.`;
  if ((m = /^(\w+):not_supported$/.exec(entry))) return `No provider here can search by ${m[1]}.`;
  if ((m = /^provider:(.+?):(\w+):emulated$/.exec(entry))) return `Provider ${m[1]} approximates ${m[2]} (emulated), so its ranking is rougher.`;
  if (entry === "children:counts_pending") return "Some children's record counts were not known yet; they are being counted.";
  if (entry === "parent:count_pending") return "The parent's record count was not known yet; it is being counted.";
  if ((m = /^provider:(.+?):(timeout|unavailable|rate_limited|circuit_open|unauthorized|not_connected)$/.exec(entry))) {
    const why = { timeout: "did not answer in time", unavailable: "failed", rate_limited: "refused: rate limited",
      circuit_open: "is resting after repeated failures (breaker open) and was not asked",
      unauthorized: "refused memfed's own key (a configuration problem)", not_connected: "is not connected" }[m[2]];
    return `Provider ${m[1]} ${why}: its memories are missing from these results.`;
  }
  if ((m = /^provider:(.+?):record_limit$/.exec(entry))) return `Provider ${m[1]} holds a memory too large to list whole.`;
  if ((m = /^provider:(.+?):pool_limited$/.exec(entry))) return `Provider ${m[1]}'s largest search pool may have left out matches.`;
  if ((m = /^provider:(.+?):answered_outside_scope$/.exec(entry))) return `Provider ${m[1]} returned a record it was not asked about; it was dropped.`;
  if ((m = /^partial:(\d+)_of_(\d+)_memories_failed$/.exec(entry))) return `${m[1]} of ${m[2]} memories of one provider failed to answer.`;
  return "An entry memfed does not describe here: read it as written.";
}

function serverTiming(header) {
  const spans = {};
  for (const part of (header || "").split(",")) {
    const [name, ...rest] = part.trim().split(";");
    const dur = rest.map((r) => r.trim()).find((r) => r.startsWith("dur="));
    if (name && dur) spans[name] = Number(dur.slice(4));
  }
  return spans;
}

function form(memory, params, ctx) {
  const controls = {
    query: input("query", params.get("query") || ""),
    text: input("text", params.get("text") || ""),
    filters: input("filters", params.get("filters") || "", { placeholder: "{\"field\": \"type\", \"op\": \"eq\", \"value\": \"fact\"}" }),
    types: input("types", params.get("types") || "", { placeholder: "fact, note" }),
    depth: input("depth", params.get("depth") || "", { type: "number", min: 0 }),
    limit: input("limit", params.get("limit") || "", { type: "number", min: 1, max: 200 }),
    as_of: input("as_of", params.get("as_of") || "", { placeholder: "2026-11-30T12:00:00Z" }),
    include: select("include", [["active", "active"], ["all", "all (forgotten too)"]], params.get("include") || "active"),
  };
  const labels = { query: "Query (meaning)", text: "Text (words)", filters: "Filters (JSON)", types: "Types",
    depth: "Depth", limit: "Limit", as_of: "As of", include: "Include" };
  const recallForm = el("form", { class: "filters", "aria-label": "Recall test" },
    FIELDS.map((name) => field(labels[name], controls[name])), el("button", { type: "submit", text: "Recall" }));
  recallForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const state = { memory: memory.id };
    for (const name of FIELDS) state[name] = controls[name].value.trim();
    state.run = "1";
    ctx.go("recall", state);
  });
  return recallForm;
}

function body(params) {
  const out = {};
  for (const name of ["query", "text", "as_of"]) if (params.get(name)) out[name] = params.get(name);
  if (params.get("filters")) out.filters = JSON.parse(params.get("filters"));
  if (params.get("types")) out.types = params.get("types").split(",").map((t) => t.trim()).filter(Boolean);
  for (const name of ["depth", "limit"]) if (params.get(name)) out[name] = Number(params.get(name));
  if (params.get("include") && params.get("include") !== "active") out.include = params.get("include");
  return out;
}

async function results(memory, params, ctx) {
  let request;
  try { request = body(params); } catch { ctx.say("Filters must be JSON.", "error"); return null; }
  const answer = await api.call("POST", `/v1/memories/${enc(memory.id)}/recall`, { body: request });
  const doc = answer.body;
  const spans = serverTiming(answer.headers.get("server-timing"));
  const rows = doc.results.map((r, i) => el("tr", {},
    el("td", { text: String(i + 1) }), el("td", { text: `${r.memory.name ?? ""} (${r.memory.id})` }),
    el("td", { text: r.score.toFixed(4) }), el("td", { text: r.why.join(", ") }),
    el("td", {}, el("a", { href: `#/records?memory=${enc(r.record.memory_id)}&record=${enc(r.record.id)}`,
      text: r.record.title || r.record.id }), el("pre", { class: "content", text: textOf(r.record) })),
    el("td", { text: writer(r.record) })));
  const providerRows = Object.entries(spans).filter(([name]) => name.startsWith("provider."))
    .map(([name, ms]) => el("tr", {}, el("td", { text: name.slice("provider.".length) }), el("td", { text: `${ms.toFixed(1)} ms` })));
  return section(`${doc.results.length} results${doc.abstain ? " (the providers abstain: nothing here answers this)" : ""}`,
    doc.results.length ? table("What an application gets, best first",
      ["#", "Memory", "Score", "Why", "Record", "Written by"], rows) : el("p", { class: "empty", text: "No results." }),
    el("h3", { text: "Degraded" }),
    doc.degraded.length ? el("ul", { "aria-label": "Degraded" }, doc.degraded.map((d) => el("li", {},
      el("code", { text: d }), ": ", explainDegraded(d)))) : el("p", { text: "Nothing degraded: every memory in reach was searched by every signal asked." }),
    el("h3", { text: "Time" }),
    table("Each provider's time on this recall", ["Provider", "Time"], [...providerRows,
      el("tr", {}, el("td", { text: "gateway total" }), el("td", { text: `${(spans.app ?? 0).toFixed(1)} ms` }))]),
    doc.children?.length ? [el("h3", { text: "Below" }), el("ul", {}, doc.children.map((c) =>
      el("li", { text: `${c.name} (${c.id}): ${c.records?.count ?? "not counted yet"} records` })))] : null);
}

export async function render(main, params, ctx) {
  const memoryId = params.get("memory");
  if (!memoryId) { main.append(memoryPicker("recall", ctx)); return; }
  const memory = await api.get(`/v1/memories/${enc(memoryId)}`);
  main.append(heading(memory), section("Ask", form(memory, params, ctx)));
  if (params.get("run") && FIELDS.some((f) => f !== "include" && params.get(f))) {
    const shown = await results(memory, params, ctx);
    if (shown) main.append(shown);
  }
}
