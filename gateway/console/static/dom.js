// Building the page without ever parsing a string as HTML: every text a member or a vendor wrote is
// put in with textContent (a Text node), so "<script>" or a fence marker shows as the characters it is.

const BLOCKED = /^on/i;  // no handler attributes: they would need 'unsafe-inline' and are a way in

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (name === "text") {
      node.textContent = String(value);
    } else if (name === "value") {
      node.value = String(value);
    } else if (name === "checked") {
      node.checked = Boolean(value);
    } else if (BLOCKED.test(name) || name === "style" || name === "srcdoc") {
      throw new Error(`refused attribute ${name}`);
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

let fieldCount = 0;

// A labelled control: the label names it for a screen reader and a click focuses it.
export function field(label, control, hint) {
  fieldCount += 1;
  const id = control.id || `f${fieldCount}`;
  control.id = id;
  const parts = [el("label", { for: id, text: label }), control];
  if (hint) {
    const hintId = `${id}-hint`;
    control.setAttribute("aria-describedby", hintId);
    parts.push(el("small", { id: hintId, class: "hint", text: hint }));
  }
  return el("div", { class: "field" }, parts);
}

export function input(name, value = "", attrs = {}) {
  return el("input", { name, value, type: "text", autocomplete: "off", ...attrs });
}

export function select(name, options, chosen) {
  return el("select", { name }, options.map(([value, label]) =>
    el("option", { value, selected: value === chosen ? true : undefined, text: label })));
}

export function button(label, onClick, attrs = {}) {
  return el("button", { type: "button", ...attrs, on: { click: onClick } }, label);
}

export function table(caption, headers, rows) {
  // Each cell carries its column's name, so that a narrow screen can show a row as a labelled card.
  for (const row of rows) {
    [...row.children].forEach((cell, i) => { if (headers[i]) cell.setAttribute("data-label", headers[i]); });
  }
  return el("div", { class: "table-wrap" }, el("table", { class: "cards" },
    el("caption", { text: caption }),
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, rows)));
}

export function section(title, ...children) {
  return el("section", { class: "panel" }, el("h2", { text: title }), children);
}

export function short(id) {
  // Ids are long; the end is what tells two apart at a glance. The whole id stays in the title.
  return typeof id === "string" && id.length > 14 ? `${id.slice(0, 5)}…${id.slice(-6)}` : String(id ?? "");
}
