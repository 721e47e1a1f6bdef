// The decision log (admins; holders of delete for their subtree, who must name the memory): filters,
// pages, verify (where the chain breaks) and an NDJSON export of what the filters select.

import * as api from "../api.js";
import { button, clear, el, field, input, section, select, table } from "../dom.js";

const FILTERS = ["principal", "memory_id", "operation", "decision", "since", "until", "order"];
const EXPORT_MOST = 100000;

function query(params) {
  const out = {};
  for (const name of FILTERS) if (params.get(name)) out[name] = params.get(name);
  return out;
}

function filterForm(params, ctx) {
  const controls = {
    principal: input("principal", params.get("principal") || "", { placeholder: "member:mbr_…" }),
    memory_id: input("memory_id", params.get("memory_id") || "", { placeholder: "hmem_…" }),
    operation: input("operation", params.get("operation") || "", { placeholder: "records.get" }),
    decision: select("decision", [["", "any"], ["allow", "allow"], ["deny", "deny"]], params.get("decision") || ""),
    since: input("since", params.get("since") || "", { placeholder: "2026-12-01T00:00:00Z" }),
    until: input("until", params.get("until") || "", { placeholder: "2026-12-02T00:00:00Z" }),
    order: select("order", [["oldest", "oldest first"], ["newest", "newest first"]], params.get("order") || "oldest"),
  };
  const labels = { principal: "Principal", memory_id: "Memory", operation: "Operation", decision: "Decision",
    since: "Since", until: "Until", order: "Order" };
  const form = el("form", { class: "filters", "aria-label": "Filter the decision log" },
    FILTERS.map((name) => field(labels[name], controls[name])), el("button", { type: "submit", text: "Filter" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const state = {};
    for (const name of FILTERS) state[name] = controls[name].value.trim();
    ctx.go("audit", state);
  });
  return form;
}

function verifySection(ctx, brokenAt) {
  const out = el("div", { "aria-live": "polite" });
  const run = button("Verify the chain", async () => {
    clear(out);
    try {
      const report = await api.get("/v1/audit/verify");
      brokenAt.value = report.broken_at;
      out.append(report.ok
        ? el("p", { class: "verdict ok", text: `The chain holds: ${report.checked} entries checked.` })
        : el("div", {}, el("p", { class: "verdict broken", text: `The chain breaks at entry ${report.broken_at}.` }),
          el("p", { text: report.problem || "" })));
      for (const row of document.querySelectorAll("tr[data-seq]")) {
        row.classList.toggle("broken-row", Number(row.dataset.seq) === report.broken_at);
      }
    } catch (error) { ctx.fail(error); }
  });
  return section("Verify", el("p", { text: "Recomputes every entry's hash from the first and says where an " +
    "edited, deleted, inserted or reordered entry breaks it (admins)." }), run, out);
}

async function exportNdjson(params, ctx, link) {
  const entries = await api.all("/v1/audit", { ...query(params), limit: 1000 }, EXPORT_MOST);
  const blob = new Blob(entries.map((e) => `${JSON.stringify(e)}\n`), { type: "application/x-ndjson" });
  link.href = URL.createObjectURL(blob);
  link.download = "memfed-decisions.ndjson";
  link.textContent = `Download ${entries.length} decisions (NDJSON)`;
  link.hidden = false;
  link.focus();
  ctx.say(`${entries.length} decisions ready${entries.length >= EXPORT_MOST ? " (the first 100,000; narrow the filters)" : ""}.`, "ok");
}

export async function render(main, params, ctx) {
  main.append(section("Filters", filterForm(params, ctx)));
  const brokenAt = { value: null };
  if (ctx.me.admin) main.append(verifySection(ctx, brokenAt));
  const link = el("a", { class: "download", hidden: true });
  main.append(section("Export", el("p", { text: "Every decision the filters select, one JSON object a line." }),
    button("Prepare the export", () => exportNdjson(params, ctx, link).catch(ctx.fail), { class: "secondary" }), " ", link));
  if (!ctx.me.admin && !params.get("memory_id")) {
    main.append(el("p", { text: "Give the id of a memory you hold delete on: you read the log of its subtree." }));
    return;
  }
  const page = await api.get("/v1/audit", { ...query(params), cursor: params.get("cursor") || undefined, limit: 50 });
  const rows = page.data.map((e) => el("tr", { "data-seq": e.seq },
    el("td", { text: e.part ? `${e.seq}.${e.part}` : String(e.seq) }), el("td", { text: e.at }),
    el("td", { text: e.principal }), el("td", { text: e.operation }), el("td", { text: e.memory_id ?? "—" }),
    el("td", { text: e.privilege ?? "—" }),
    el("td", {}, el("span", { class: `tag ${e.decision}`, text: e.decision })), el("td", { text: e.reason })));
  const nav = el("p", { class: "links" });
  if (params.get("cursor")) {
    const first = { ...Object.fromEntries(params) };
    delete first.cursor;
    nav.append(el("a", { href: `#/audit?${new URLSearchParams(first)}`, text: "First page" }));
  }
  if (page.next) nav.append(el("a", { href: `#/audit?${new URLSearchParams({ ...Object.fromEntries(params), cursor: page.next })}`,
    text: "Next page" }));
  main.append(section("Decisions", rows.length ? table("Decisions, as the filters select",
    ["#", "At", "Principal", "Operation", "Memory", "Privilege", "Decision", "Reason"], rows)
    : el("p", { class: "empty", text: "No decision matches." }), nav));
}
