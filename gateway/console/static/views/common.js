// Pieces the pages share: choosing a memory, and names for memory ids (looked up as the caller, so an id
// the caller cannot see stays an id).

import * as api from "../api.js";
import { el, field, input } from "../dom.js";

const names = new Map();

export async function memoryName(id) {
  if (!id) return "";
  if (!names.has(id)) {
    names.set(id, api.get(`/v1/memories/${encodeURIComponent(id)}`).then((m) => m.name, () => null));
  }
  return names.get(id);
}

export async function memoryLabel(id) {
  const name = await memoryName(id);
  return name === null ? `${id} (not visible to you)` : `${name} (${id})`;
}

// A form asking for a memory id, for pages opened without one.
export function memoryPicker(view, ctx, params = {}) {
  const box = input("memory", "", { required: true, placeholder: "hmem_…" });
  const form = el("form", { class: "inline-form", "aria-label": "Choose a memory" },
    field("Memory id", box, "Or pick one in the Tree and follow its link."),
    el("button", { type: "submit", text: "Open" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.go(view, { ...params, memory: box.value.trim() });
  });
  return form;
}

export function heading(memory) {
  return el("p", { class: "crumb" }, "Memory: ", el("a", { href: `#/tree?memory=${encodeURIComponent(memory.id)}`,
    text: memory.name }), ` (${memory.id})`);
}
