// The tree from the caller's entry points: each memory's provider, restricted mark, record count and the
// caller's privileges; create, rename, describe, restrict, move (to a memory within reach), delete.

import * as api from "../api.js";
import { button, clear, el, field, input, section, select, short } from "../dom.js";

const enc = encodeURIComponent;

export function memoryLine(memory) {
  const count = memory.records && memory.records.count !== null && memory.records.count !== undefined
    ? memory.records.count : "…";
  return [
    el("span", { class: "name", text: memory.name }),
    memory.restricted ? el("span", { class: "tag restricted", title: "restricted: inheritance stops here",
      text: "restricted" }) : null,
    el("span", { class: "tag", title: "provider", text: memory.provider }),
    el("span", { class: "tag", title: "records", text: `${count} rec` }),
    el("span", { class: "privs", title: "your privileges here", text: (memory.privileges || []).join(" ") }),
  ];
}

async function drawChildren(list, parentId, ctx, openIds, selected) {
  const children = parentId === null ? await api.all("/v1/memories") : await api.all("/v1/memories",
    { parent: parentId });
  clear(list);
  if (!children.length) {
    list.append(el("li", { class: "empty", text: parentId === null ? "No memory is within your reach." :
      "No children you can see." }));
  }
  for (const memory of children) {
    const sub = el("ul", { class: "tree-level", hidden: true });
    const hasChildren = memory.children && memory.children.count > 0;
    const toggle = el("button", { type: "button", class: "toggle", "aria-expanded": "false",
      "aria-label": `Show what is below ${memory.name}`, disabled: hasChildren ? undefined : true,
      text: hasChildren ? "▸" : "·" });
    const link = el("a", { href: `#/tree?memory=${enc(memory.id)}`, class: "node", "data-id": memory.id,
      "aria-current": memory.id === selected ? "true" : undefined }, memoryLine(memory));
    const open = async () => {
      const expanded = toggle.getAttribute("aria-expanded") === "true";
      toggle.setAttribute("aria-expanded", expanded ? "false" : "true");
      toggle.textContent = expanded ? "▸" : "▾";
      sub.hidden = expanded;
      if (!expanded) await drawChildren(sub, memory.id, ctx, openIds, selected);
    };
    toggle.addEventListener("click", () => open().catch(ctx.fail));
    list.append(el("li", { class: "tree-item" }, el("div", { class: "row" }, toggle, link), sub));
    if (hasChildren && openIds.has(memory.id)) await open();
  }
}

// Arrow keys move between the nodes shown, as in a file browser; Tab still walks every control.
function arrowKeys(container) {
  container.addEventListener("keydown", (event) => {
    if (!["ArrowDown", "ArrowUp", "ArrowRight", "ArrowLeft"].includes(event.key)) return;
    const nodes = [...container.querySelectorAll("a.node")].filter((n) => n.offsetParent !== null);
    const at = nodes.indexOf(document.activeElement);
    if (at < 0) return;
    event.preventDefault();
    if (event.key === "ArrowDown") nodes[Math.min(at + 1, nodes.length - 1)].focus();
    if (event.key === "ArrowUp") nodes[Math.max(at - 1, 0)].focus();
    const toggle = nodes[at].previousElementSibling;
    const expanded = toggle.getAttribute("aria-expanded") === "true";
    if ((event.key === "ArrowRight" && !expanded) || (event.key === "ArrowLeft" && expanded)) toggle.click();
  });
}

async function reachable() {
  // Every memory in the caller's reach: its entry points and every readable memory below each.
  const entries = await api.all("/v1/memories");
  const seen = new Map(entries.map((m) => [m.id, m]));
  for (const entry of entries) {
    for (const m of await api.all("/v1/memories", { ancestor: entry.id })) seen.set(m.id, m);
  }
  return [...seen.values()];
}

function createForm(parentId, ctx, label) {
  const name = input("name", "", { required: true, maxlength: 300 });
  const description = input("description", "", { maxlength: 4000 });
  const restricted = el("input", { type: "checkbox", name: "restricted" });
  const form = el("form", { class: "inline-form", "aria-label": label },
    field("Name", name), field("Description", description),
    el("div", { class: "field check" }, restricted, el("label", { text: "Restricted (inherits nothing from above)",
      for: (restricted.id = `r-${parentId || "root"}`) })),
    el("button", { type: "submit", text: label }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const made = await api.post("/v1/memories", { name: name.value, description: description.value,
        restricted: restricted.checked, parent_id: parentId || undefined });
      ctx.say(`Created ${made.name}.`, "ok");
      ctx.go("tree", { memory: made.id });
    } catch (error) { ctx.fail(error); }
  });
  return form;
}

async function details(pane, memoryId, ctx) {
  const memory = await api.get(`/v1/memories/${enc(memoryId)}`);
  const can = new Set(memory.privileges || []);
  const links = el("p", { class: "links" },
    el("a", { href: `#/records?memory=${enc(memory.id)}`, text: "Records" }),
    el("a", { href: `#/access?memory=${enc(memory.id)}`, text: "Access" }),
    el("a", { href: `#/recall?memory=${enc(memory.id)}`, text: "Recall test" }),
    can.has("delete") || ctx.me.admin ? el("a", { href: `#/audit?memory_id=${enc(memory.id)}`,
      text: "Decision log" }) : null);
  const facts = el("dl", { class: "facts" },
    el("dt", { text: "Id" }), el("dd", { text: memory.id }),
    el("dt", { text: "Description" }), el("dd", { text: memory.description || "—" }),
    el("dt", { text: "Provider" }), el("dd", { text: memory.provider }),
    el("dt", { text: "Restricted" }), el("dd", { text: memory.restricted ? "yes: nothing is inherited from above" :
      "no" }),
    el("dt", { text: "Records" }), el("dd", { text: memory.records?.count ?? "not counted yet" }),
    el("dt", { text: "Children" }), el("dd", { text: memory.children?.count ?? "—" }),
    el("dt", { text: "Your privileges" }), el("dd", { text: (memory.privileges || []).join(", ") || "none" }));
  pane.append(section(memory.name, facts, links));

  if (can.has("write") || can.has("delete")) {
    const name = input("name", memory.name, { maxlength: 300 });
    const description = input("description", memory.description, { maxlength: 4000 });
    const restricted = el("input", { type: "checkbox", name: "restricted", checked: memory.restricted,
      disabled: can.has("delete") ? undefined : true, id: "edit-restricted" });
    const form = el("form", { class: "inline-form", "aria-label": "Change this memory" },
      field("Name", name), field("Description", description),
      el("div", { class: "field check" }, restricted, el("label", { for: "edit-restricted",
        text: "Restricted (needs delete)" })),
      el("button", { type: "submit", text: "Save" }));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const change = {};
      if (name.value !== memory.name) change.name = name.value;
      if (description.value !== memory.description) change.description = description.value;
      if (restricted.checked !== memory.restricted) change.restricted = restricted.checked;
      if (!Object.keys(change).length) { ctx.say("Nothing changed."); return; }
      try {
        await api.put(`/v1/memories/${enc(memory.id)}`, change);
        ctx.say("Saved.", "ok");
        await ctx.refresh();
      } catch (error) { ctx.fail(error); }
    });
    pane.append(section("Rename, describe, restrict", form));
  }

  if (can.has("create")) pane.append(section("New child", createForm(memory.id, ctx, "Create child")));

  if (can.has("delete")) {
    const picker = el("div", {});
    const load = button("Choose a new parent…", async () => {
      try {
        const below = new Set((await api.all("/v1/memories", { ancestor: memory.id })).map((m) => m.id));
        const options = (await reachable()).filter((m) => m.id !== memory.id && !below.has(m.id) &&
          m.id !== memory.parent_id && (m.privileges || []).includes("create"));
        clear(picker);
        if (!options.length) { picker.append(el("p", { text: "No other memory within your reach takes children from you." })); return; }
        const choice = select("parent", options.map((m) => [m.id, `${m.name} (${short(m.id)})`]), options[0].id);
        const move = el("form", { class: "inline-form", "aria-label": "Move this memory" },
          field("New parent", choice), el("button", { type: "submit", text: "Move here" }));
        move.addEventListener("submit", async (event) => {
          event.preventDefault();
          try {
            await api.put(`/v1/memories/${enc(memory.id)}`, { parent_id: choice.value });
            ctx.say("Moved.", "ok");
            await ctx.refresh();
          } catch (error) { ctx.fail(error); }
        });
        picker.append(move);
        choice.focus();
      } catch (error) { ctx.fail(error); }
    });
    const confirmBox = el("div", {});
    const remove = button("Delete this memory…", async () => {
      try {
        const below = await api.all("/v1/memories", { ancestor: memory.id });
        clear(confirmBox);
        const names = [memory, ...below];
        const go = button(`Delete ${names.length} ${names.length === 1 ? "memory" : "memories"} for good`, async () => {
          try {
            const answer = await api.del(`/v1/memories/${enc(memory.id)}`);
            ctx.say(`Deleted ${answer?.memories_deleted ?? names.length} memories${answer?.unseen_memories_deleted ?
              ", and others you could not see" : ""}.`, "ok");
            ctx.go("tree", {});
          } catch (error) { ctx.fail(error); }
        }, { class: "danger", id: "confirm-delete" });
        confirmBox.append(el("div", { class: "confirm", role: "alertdialog", "aria-labelledby": "confirm-title" },
          el("p", { id: "confirm-title", text: "This deletes these memories and every record in them:" }),
          el("ul", { class: "doomed" }, names.map((m) => el("li", { text: `${m.name} (${m.id})` }))),
          el("p", { text: "Memories below it that you cannot see, if there are any, go too." }),
          go, button("Cancel", () => clear(confirmBox))));
        go.focus();
      } catch (error) { ctx.fail(error); }
    }, { class: "danger" });
    pane.append(section("Move or delete", load, picker, remove, confirmBox));
  }
}

export async function render(main, params, ctx) {
  const memoryId = params.get("memory");
  const treePane = el("nav", { class: "tree", "aria-label": "Memories" });
  const detailPane = el("div", { class: "details" });
  main.append(el("div", { class: "split" }, treePane, detailPane));
  const list = el("ul", { class: "tree-level" });
  treePane.append(list);
  arrowKeys(treePane);
  let openIds = new Set();
  if (memoryId) {
    try {
      const memory = await api.get(`/v1/memories/${enc(memoryId)}`);
      openIds = new Set(memory.ancestors || []);
      await details(detailPane, memoryId, ctx);
    } catch (error) { ctx.fail(error); }
  } else {
    detailPane.append(el("p", { text: "Choose a memory to see it and what you may do there." }));
  }
  if (ctx.me.admin) detailPane.append(section("New root memory", createForm(null, ctx, "Create root")));
  await drawChildren(list, null, ctx, openIds, memoryId);
}
