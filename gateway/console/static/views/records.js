// Records of one memory: a list with filters (type, status, attributes), one record's parts, references
// (available to the caller or not), versions and history; write, revise, forget and erase.

import * as api from "../api.js";
import { button, clear, el, field, input, section, select, table } from "../dom.js";
import { heading, memoryLabel, memoryPicker } from "./common.js";

const enc = encodeURIComponent;

export function textOf(record) {
  return (record.content || []).filter((p) => typeof p.text === "string").map((p) => p.text).join("\n");
}

export function writer(record) {
  const by = record.written_by || {};
  return [by.kind, by.id].filter(Boolean).join(":") + (by.type ? ` (${by.type})` : "");
}

function attributeFilter(text) {
  // "key=value" pairs separated by commas; a value is compared with the attribute as text.
  const pairs = [];
  for (const part of (text || "").split(",")) {
    const at = part.indexOf("=");
    if (at > 0) pairs.push([part.slice(0, at).trim(), part.slice(at + 1).trim()]);
  }
  return (record) => pairs.every(([k, v]) => record.attributes && k in record.attributes &&
    String(typeof record.attributes[k] === "object" ? JSON.stringify(record.attributes[k]) : record.attributes[k]) === v);
}

function filters(memory, params, ctx) {
  const type = input("type", params.get("type") || "", { placeholder: "any" });
  const status = select("status", [["active", "active"], ["all", "all (forgotten too)"], ["forgotten", "forgotten only"]],
    params.get("status") || "active");
  const attrs = input("attrs", params.get("attrs") || "", { placeholder: "account=acme, tier=gold" });
  const form = el("form", { class: "filters", "aria-label": "Filter records" },
    field("Type", type), field("Status", status),
    field("Attributes", attrs, "key=value, comma separated; matched among the records listed"),
    el("button", { type: "submit", text: "Filter" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.go("records", { memory: memory.id, type: type.value.trim(), status: status.value, attrs: attrs.value.trim() });
  });
  return form;
}

async function listSection(memory, params, ctx) {
  const status = params.get("status") || "active";
  const all = await api.all(`/v1/memories/${enc(memory.id)}/records`, {
    type: params.get("type") || undefined, include: status === "active" ? "active" : "all" }, 1000);
  const keep = attributeFilter(params.get("attrs"));
  const shown = all.filter((r) => (status !== "forgotten" || r.status !== "active") && keep(r));
  const rows = shown.map((record) => el("tr", {},
    el("td", {}, el("a", { href: `#/records?${new URLSearchParams({ ...Object.fromEntries(params), record: record.id })}`,
      text: record.title || textOf(record).slice(0, 120) || record.id })),
    el("td", { text: record.type }), el("td", { text: record.status }), el("td", { text: String(record.version) }),
    el("td", { text: writer(record) }), el("td", { text: record.time?.written_at || "" })));
  return section(`Records (${shown.length}${all.length >= 1000 ? "+, first 1000 listed" : ""})`,
    filters(memory, params, ctx),
    rows.length ? table("Records in this memory", ["Record", "Type", "Status", "Version", "Written by", "Written at"], rows)
      : el("p", { class: "empty", text: "No record matches." }));
}

function contentParts(memory, record) {
  return el("ol", { class: "parts", "aria-label": "Parts" }, (record.content || []).map((part, index) => el("li", {},
    el("span", { class: "tag", text: part.type }), part.role ? el("span", { class: "tag", text: part.role }) : null,
    typeof part.text === "string" ? el("pre", { class: "content", text: part.text }) : null,
    part.file ? el("a", { href: `/console/api/v1/memories/${enc(memory.id)}/records/${enc(record.id)}/content/${index}`,
      download: "", text: `file ${part.file.id}` }) : null)));
}

async function references(record) {
  const items = [];
  for (const ref of record.references || []) {
    if (!ref.available) {  // the API names neither the memory nor the relation of a target out of reach
      items.push(el("li", {}, `→ ${ref.record_id}: `, el("span", { class: "tag deny", text: "not available to you" })));
      continue;
    }
    let state = "available";
    try {
      await api.get(`/v1/memories/${enc(ref.memory_id)}/records/${enc(ref.record_id)}`);
    } catch (error) {
      state = `gone (${error.code})`;
    }
    items.push(el("li", {}, `${ref.rel || "refers to"} → `,
      el("a", { href: `#/records?memory=${enc(ref.memory_id)}&record=${enc(ref.record_id)}`, text: ref.record_id }),
      ` in ${await memoryLabel(ref.memory_id)}: `,
      el("span", { class: `tag ${state === "available" ? "allow" : "deny"}`, text: state })));
  }
  return items.length ? el("ul", { "aria-label": "References" }, items) : el("p", { class: "empty", text: "No references." });
}

async function recordSection(memory, recordId, params, ctx) {
  const path = `/v1/memories/${enc(memory.id)}/records/${enc(recordId)}`;
  const record = await api.get(path);
  const history = (await api.get(`${path}/history`)).data || [];
  const facts = el("dl", { class: "facts" },
    el("dt", { text: "Id" }), el("dd", { text: record.id }),
    el("dt", { text: "Title" }), el("dd", { text: record.title ?? "—" }),
    el("dt", { text: "Type" }), el("dd", { text: record.type }),
    el("dt", { text: "Status" }), el("dd", { text: record.status }),
    el("dt", { text: "Version" }), el("dd", { text: String(record.version) }),
    el("dt", { text: "Written by" }), el("dd", { text: writer(record) }),
    el("dt", { text: "Written at" }), el("dd", { text: record.time?.written_at || "" }),
    el("dt", { text: "Attributes" }), el("dd", {}, el("pre", { class: "content", text: JSON.stringify(record.attributes ?? {}, null, 2) })));
  const versions = table("Versions, oldest first", ["Version", "Status", "Written by", "Written at", "Content"],
    history.map((v) => el("tr", {}, el("td", { text: String(v.version) }), el("td", { text: v.status }),
      el("td", { text: writer(v) }), el("td", { text: v.time?.written_at || "" }),
      el("td", {}, el("pre", { class: "content", text: textOf(v) })))));

  const title = input("title", record.title || "", { maxlength: 300 });
  const text = el("textarea", { name: "content", id: "revise-content" });
  text.value = textOf(record);
  const revise = el("form", { class: "inline-form", "aria-label": "Revise this record" },
    field("Title", title), field("Content", text), el("button", { type: "submit", text: "Revise" }));
  revise.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const change = { content: text.value };
      if (title.value !== (record.title || "")) change.title = title.value || null;
      await api.patch(path, change);
      ctx.say("Revised: a new version was written.", "ok");
      await ctx.refresh();
    } catch (error) { ctx.fail(error); }
  });
  const outcome = el("div", { "aria-live": "polite" });
  const forget = button("Forget (keep its trace)", async () => {
    try { await api.del(path); ctx.say("Forgotten.", "ok"); await ctx.refresh(); } catch (error) { ctx.fail(error); }
  }, { class: "secondary" });
  const erase = button("Erase for good…", () => {
    clear(outcome);
    const sure = button("Erase its content everywhere", async () => {
      try {
        const answer = (await api.call("POST", `/v1/memories/${enc(memory.id)}/erase`, { body: { record_ids: [record.id] } })).body;
        clear(outcome);
        outcome.append(el("p", { text: `Erased: ${(answer.erased || []).join(", ") || "none"}.` }),
          el("p", { text: `Unreachable (the provider still holds them): ${(answer.unreachable || []).join(", ") || "none"}.` }));
        ctx.say("Erased.", "ok");
      } catch (error) {
        ctx.fail(error);
        if (error.detail) outcome.append(el("p", { text: `Unreachable: ${(error.detail.unreachable || []).join(", ") || "none"}; ` +
          `remaining: ${(error.detail.remaining || []).join(", ") || "none"}.` }));
      }
    }, { class: "danger" });
    outcome.append(el("div", { class: "confirm", role: "alertdialog", "aria-label": "Confirm erase" },
      el("p", { text: `This removes the content of ${record.id} and all its versions for good.` }), sure,
      button("Cancel", () => clear(outcome))));
    sure.focus();
  }, { class: "danger" });
  const back = new URLSearchParams(params);
  back.delete("record");
  const writable = (memory.privileges || []).includes("write");
  return section(`Record ${record.title || record.id}`, el("p", {}, el("a", { href: `#/records?${back}`, text: "Back to the list" })),
    facts, el("h3", { text: "Parts" }), contentParts(memory, record), el("h3", { text: "References" }),
    await references(record), el("h3", { text: "History" }), versions,
    writable ? [el("h3", { text: "Change" }), revise, el("p", { class: "links" }, forget, erase), outcome] : null);
}

function writeSection(memory, ctx) {
  const type = input("type", "note", { required: true });
  const title = input("title", "", { maxlength: 300 });
  const text = el("textarea", { name: "content", id: "new-content", required: true });
  const attrs = input("attributes", "", { placeholder: "{\"account\": \"acme\"}" });
  const form = el("form", { class: "inline-form", "aria-label": "Write a record" },
    field("Type", type), field("Title", title), field("Content", text), field("Attributes (JSON)", attrs),
    el("button", { type: "submit", text: "Remember" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let attributes;
    try { attributes = attrs.value.trim() ? JSON.parse(attrs.value) : undefined; } catch {
      ctx.say("Attributes must be a JSON object.", "error"); return;
    }
    try {
      const made = await api.post(`/v1/memories/${enc(memory.id)}/records`,
        { type: type.value.trim(), title: title.value || undefined, content: text.value, attributes });
      ctx.say(`Remembered ${made.id}.`, "ok");
      ctx.go("records", { memory: memory.id, record: made.id });
    } catch (error) { ctx.fail(error); }
  });
  return section("Write a record", form);
}

export async function render(main, params, ctx) {
  const memoryId = params.get("memory");
  if (!memoryId) { main.append(memoryPicker("records", ctx)); return; }
  const memory = await api.get(`/v1/memories/${enc(memoryId)}`);
  main.append(heading(memory));
  const recordId = params.get("record");
  if (recordId) {
    main.append(await recordSection(memory, recordId, params, ctx));
    return;
  }
  main.append(await listSection(memory, params, ctx));
  if ((memory.privileges || []).includes("write")) main.append(writeSection(memory, ctx));
}
