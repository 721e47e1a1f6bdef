// Every provider's capability document side by side, its breaker and its recent calls; and, for
// admins, a provider swap (migrate) with its progress, export and import of a memory.

import * as api from "../api.js";
import { button, clear, el, field, input, section, select, table } from "../dom.js";

const enc = encodeURIComponent;
const ROWS = [
  ["Adapter", (d) => d["x.memfed"]?.adapter],
  ["Breaker", (d) => `${d["x.memfed"]?.breaker?.state} (${d["x.memfed"]?.breaker?.consecutive_failures} failures in a row)`],
  ["Recent calls", (d) => String(d["x.memfed"]?.recent?.calls ?? "—")],
  ["Latency p50 / p95", (d) => { const r = d["x.memfed"]?.recent || {}; return r.p50_ms === null || r.p50_ms === undefined ? "no calls yet" : `${r.p50_ms} ms / ${r.p95_ms} ms`; }],
  ["Recent failures", (d) => { const r = d["x.memfed"]?.recent || {}; const by = Object.entries(r.failures_by_reason || {}).map(([k, v]) => `${k} ${v}`).join(", "); return `${r.failures ?? 0}${by ? ` (${by})` : ""}`; }],
  ["Last failure", (d) => { const f = d["x.memfed"]?.recent?.last_failure; return f ? `${f.reason}, ${f.seconds_ago} s ago` : "none"; }],
  ["Isolation", (d) => d.isolation],
  ["Signals", (d) => (d.recall?.signals || []).join(", ") + ((d.recall?.emulated || []).length ? ` (emulated: ${d.recall.emulated.join(", ")})` : "")],
  ["History", (d) => d.history ? `${d.history.content} / ${d.history.structure}` : ""],
  ["Revise / forget", (d) => `${d.revise} / ${d.forget}`],
  ["Erase", (d) => d.erase?.unreachable ? `unreachable ${d.erase.unreachable}` : JSON.stringify(d.erase)],
  ["as_of", (d) => String(d["x.memfed"]?.as_of ?? "")],
  ["Records per memory", (d) => String(d["x.memfed"]?.records_per_memory ?? "no limit")],
  ["Timeout", (d) => `${d["x.memfed"]?.timeout_seconds} s`],
  ["Concurrency", (d) => String(d["x.memfed"]?.concurrency ?? "")],
];

function sideBySide(documents) {
  const rows = ROWS.map(([label, value]) => el("tr", {}, el("th", { scope: "row", text: label }),
    documents.map((d) => { let v; try { v = value(d); } catch { v = ""; } return el("td", { text: v ?? "" }); })));
  const details = documents.map((d) => el("details", {}, el("summary", { text: `${d.id}: the whole capability document` }),
    el("pre", { class: "content", text: JSON.stringify(d, null, 2) })));
  return [el("div", { class: "table-wrap" }, el("table", { class: "wide" }, el("caption", { text: "Capability documents, side by side" }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "" }), documents.map((d) => el("th", { scope: "col", text: d.id })))),
    el("tbody", {}, rows))), details];
}

function progressView(doc) {
  const bar = el("progress", { max: doc.total || 1, value: doc.done || 0, "aria-label": "Records copied in this pass" });
  const words = doc.state === "running"
    ? `Copying to ${doc.to}: pass ${doc.passes || 1}, ${doc.done} of ${doc.total ?? "?"} records.`
    : doc.state === "completed"
      ? `Completed: ${doc.report?.copied ?? doc.done} records copied to ${doc.to}; the memory is now bound to ${doc.to}.`
      : `Failed: ${doc.error?.message || "the migration stopped"} (${doc.error?.code || ""}). The binding is unchanged; running it again resumes.`;
  return el("div", { class: "progress" }, bar, el("p", { class: `verdict ${doc.state === "failed" ? "broken" : "ok"}`, text: words }));
}

function swapSection(documents, params, ctx) {
  const memory = input("memory", params.get("memory") || "", { required: true, placeholder: "hmem_…" });
  const to = select("to", documents.map((d) => [d.id, d.id]), params.get("to") || documents[0]?.id);
  const recursive = el("input", { type: "checkbox", id: "swap-recursive", checked: params.get("recursive") === "1" });
  const out = el("div", { "aria-live": "polite", id: "swap-progress" });
  const form = el("form", { class: "inline-form", "aria-label": "Swap a memory's provider" },
    field("Memory id", memory), field("To provider", to),
    el("div", { class: "field check" }, recursive, el("label", { for: "swap-recursive", text: "With every memory below" })),
    el("button", { type: "submit", text: "Start the swap" }));
  let watching = null;
  const watch = async (memoryId) => {
    try {
      const doc = await api.get(`/v1/memories/${enc(memoryId)}/migrate`);
      clear(out).append(progressView(doc));
      if (doc.state !== "running") { clearInterval(watching); watching = null; }
    } catch (error) {
      if (error.status !== 404) ctx.fail(error);
    }
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const memoryId = memory.value.trim();
    ctx.remember("providers", { memory: memoryId, to: to.value, recursive: recursive.checked ? "1" : "" });
    clear(out).append(el("p", { text: "Starting…" }));
    const started = api.post(`/v1/memories/${enc(memoryId)}/migrate`, { to: to.value, recursive: recursive.checked });
    if (watching) clearInterval(watching);
    watching = setInterval(() => watch(memoryId), 300);
    try {
      await started;
    } catch (error) {
      ctx.fail(error);
    }
    await watch(memoryId);
  });
  if (params.get("memory")) watch(params.get("memory"));
  return section("Swap a provider", el("p", { text: "Copies every version of every record to the other provider, " +
    "catches up with writes made meanwhile, then switches the binding; old record ids keep resolving (admins)." }), form, out);
}

function moveSection(params, ctx) {
  const memory = input("memory", params.get("memory") || "", { placeholder: "hmem_…", id: "io-memory" });
  const link = el("a", { hidden: true, text: "Download the export (NDJSON)" });
  const exportButton = button("Export", () => {
    link.href = `/console/api/v1/memories/${enc(memory.value.trim())}/export`;
    link.download = `${memory.value.trim()}.ndjson`;
    link.hidden = false;
    link.focus();
  }, { class: "secondary" });
  const file = el("input", { type: "file", accept: ".ndjson,application/x-ndjson", id: "io-file" });
  const importButton = button("Import the file", async () => {
    if (!file.files.length) { ctx.say("Choose an NDJSON file first.", "error"); return; }
    try {
      const answer = (await api.call("POST", `/v1/memories/${enc(memory.value.trim())}/import`,
        { raw: await file.files[0].arrayBuffer(), contentType: "application/x-ndjson" })).body;
      ctx.say(`Imported ${answer.imported} records (${answer.skipped} were there already).`, "ok");
    } catch (error) { ctx.fail(error); }
  });
  return section("Export and import", field("Memory id", memory), el("p", { class: "links" }, exportButton, link),
    field("NDJSON file to import into that memory", file), importButton);
}

export async function render(main, params, ctx) {
  const documents = (await api.get("/v1/memories/providers")).data;
  main.append(section("Providers", sideBySide(documents),
    button("Refresh", () => ctx.refresh(), { class: "secondary" })));
  if (ctx.me.admin) main.append(swapSection(documents, params, ctx), moveSection(params, ctx));
  else main.append(el("p", { text: "Swaps, exports and imports are for administrators." }));
}
