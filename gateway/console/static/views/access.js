// A memory's grants (the node each sits on, direct or inherited, through which group), adding and
// revoking them, and "why may X do Y here?" drawn from GET /v1/memories/{id}/access?principal=X.

import * as api from "../api.js";
import { button, el, field, input, section, select, table } from "../dom.js";
import { heading, memoryLabel, memoryPicker } from "./common.js";

const enc = encodeURIComponent;
const PRIVILEGES = ["read", "write", "create", "delete"];

async function grantsSection(memory, ctx) {
  const grants = (await api.get(`/v1/memories/${enc(memory.id)}/grants`)).data;
  const rows = [];
  for (const grant of grants) {
    const direct = grant.memory_id === memory.id;
    const revoke = grant.implicit ? el("span", { class: "hint", text: "creator's (implicit)" }) :
      button(`Revoke ${grant.principal} on ${direct ? "this memory" : "the node it sits on"}`, async () => {
        try {
          await api.del(`/v1/memories/${enc(grant.memory_id)}/grants/${enc(grant.id)}`);
          ctx.say(`Revoked ${grant.principal}'s grant.`, "ok");
          await ctx.refresh();
        } catch (error) { ctx.fail(error); }
      }, { class: "secondary" });
    rows.push(el("tr", {},
      el("td", { text: grant.principal }),
      el("td", { text: grant.privileges.join(", ") }),
      el("td", { text: direct ? "direct (this memory)" : `inherited from ${await memoryLabel(grant.memory_id)}` }),
      el("td", { text: grant.principal.startsWith("group:") ? `through ${grant.principal}` : "—" }),
      el("td", {}, revoke)));
  }
  const list = rows.length ? table("Grants that reach this memory (as far up as you can see)",
    ["Principal", "Privileges", "Sits on", "Group", ""], rows) : el("p", { text: "No grant reaches this memory." });
  const principal = input("principal", "", { required: true, placeholder: "member:mbr_… or group:grp_…" });
  const boxes = PRIVILEGES.map((p) => el("input", { type: "checkbox", name: "privilege", value: p,
    id: `grant-${p}`, checked: p === "read" }));
  const form = el("form", { class: "inline-form", "aria-label": "Add a grant" },
    field("Principal", principal),
    el("fieldset", { class: "field" }, el("legend", { text: "Privileges" }),
      PRIVILEGES.map((p, i) => el("span", { class: "field check" }, boxes[i], el("label", { for: `grant-${p}`, text: p })))),
    el("button", { type: "submit", text: "Grant" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const privileges = boxes.filter((b) => b.checked).map((b) => b.value);
    try {
      await api.post(`/v1/memories/${enc(memory.id)}/grants`, { principal: principal.value.trim(), privileges });
      ctx.say(`Granted ${privileges.join(", ")} to ${principal.value.trim()}.`, "ok");
      await ctx.refresh();
    } catch (error) { ctx.fail(error); }
  });
  const canChange = (memory.privileges || []).includes("delete") || ctx.me.admin;
  return section("Grants", list, canChange ? form : el("p", { class: "hint",
    text: "Changing grants needs delete on this memory." }));
}

async function explainSection(memory, params, ctx) {
  const principal = input("principal", params.get("principal") || `member:${ctx.me.id}`, { required: true });
  const privilege = select("privilege", PRIVILEGES.map((p) => [p, p]), params.get("privilege") || "read");
  const form = el("form", { class: "inline-form", "aria-label": "Why may this principal do this here" },
    field("Principal (X)", principal), field("Privilege (Y)", privilege),
    el("button", { type: "submit", text: "Explain" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.go("access", { memory: memory.id, principal: principal.value.trim(), privilege: privilege.value });
  });
  const out = el("div", { class: "explain", "aria-live": "polite" });
  const asked = params.get("principal");
  if (asked) {
    try { await explain(out, memory, asked, params.get("privilege") || "read"); } catch (error) {
      ctx.fail(error);
      out.append(el("p", { text: `Not explained: ${error.message}` }));
    }
  }
  return section("Why may X do Y here?", form, out);
}

async function explain(out, memory, asked, wanted) {
  {
    const doc = await api.get(`/v1/memories/${enc(memory.id)}/access`, { principal: asked });
    const may = doc.privileges.includes(wanted);
    out.append(el("p", { class: `verdict ${may ? "ok" : "broken"}`,
      text: `${doc.principal} ${may ? "may" : "may not"} ${wanted} here.` }),
    el("p", { text: doc.reasons[wanted] }),
    el("p", { text: `Effective privileges: ${doc.privileges.join(", ") || "none"}.` +
      (doc.groups.length ? ` Speaks through ${doc.groups.join(", ")}.` : "") }));
    const chain = el("ol", { class: "chain", "aria-label": "The chain of memories, from this one upwards" });
    for (const node of doc.path) {
      const contributing = doc.grants.filter((g) => g.memory_id === node);
      const cut = doc.cutoff_at === node;
      chain.append(el("li", { class: cut ? "cut" : contributing.length ? "contributes" : "" },
        el("div", { text: await memoryLabel(node) }),
        contributing.map((g) => el("div", { class: "hint", text: `${g.implicit ? "creator's implicit grant" : `grant ${g.grant_id}`} to ` +
          `${g.principal}${g.via_group ? " (through the group)" : ""}: ${g.privileges.join(", ")}` })),
        cut ? el("span", { class: "tag restricted", text: "restricted: inheritance stops here" }) : null));
    }
    if (doc.inherited_from_above_reach) {
      chain.append(el("li", { class: "contributes", text: "Inherited from above your reach (not shown to you)." }));
    }
    out.append(chain);
  }
}

export async function render(main, params, ctx) {
  const memoryId = params.get("memory");
  if (!memoryId) { main.append(memoryPicker("access", ctx)); return; }
  const memory = await api.get(`/v1/memories/${enc(memoryId)}`);
  main.append(heading(memory), await grantsSection(memory, ctx));
  main.append(await explainSection(memory, params, ctx));
}
