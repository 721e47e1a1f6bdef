// The console's shell: sign-in, the sections, and the state of each page kept in the URL's fragment
// (#/records?memory=…&type=fact), so that a page can be shared, bookmarked and reloaded as it was.

import * as api from "./api.js";
import { clear, el, field, input } from "./dom.js";
import * as tree from "./views/tree.js";
import * as access from "./views/access.js";
import * as records from "./views/records.js";
import * as recall from "./views/recall.js";
import * as audit from "./views/audit.js";
import * as providers from "./views/providers.js";

const VIEWS = {
  tree: ["Tree", tree],
  access: ["Access", access],
  records: ["Records", records],
  recall: ["Recall test", recall],
  audit: ["Decision log", audit],
  providers: ["Providers", providers],
};

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const signOutButton = document.getElementById("sign-out");
const statusLine = document.getElementById("status");
let me = null;

export function location_() {
  const hash = window.location.hash.replace(/^#\/?/, "");
  const [name, query] = hash.split("?");
  return { view: VIEWS[name] ? name : "tree", params: new URLSearchParams(query || "") };
}

function hashFor(view, params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== "") query.set(k, String(v));
  }
  const text = query.toString();
  return `#/${view}${text ? `?${text}` : ""}`;
}

// Go to a page: a new entry in the history (Back returns).
export function go(view, params) {
  carry = true;
  window.location.hash = hashFor(view, params);
}

// Record the page's state without rendering it again (filters typed in, a record opened).
export function remember(view, params) { history.replaceState(null, "", hashFor(view, params)); }

let carry = false;

export function say(message, kind = "info") {
  statusLine.textContent = message;
  statusLine.className = `status ${kind}`;
}

export function fail(error) {
  const code = error && error.code ? ` (${error.code}${error.param ? `, ${error.param}` : ""})` : "";
  say(`${error.message || error}${code}`, "error");
}

function drawNav(current) {
  clear(nav);
  for (const [name, [label]] of Object.entries(VIEWS)) {
    nav.append(el("a", { href: hashFor(name, {}), "aria-current": name === current ? "page" : undefined,
      text: label }));
  }
}

async function render() {
  if (!me) return;
  const { view, params } = location_();
  drawNav(view);
  clear(main);
  main.removeAttribute("data-ready");
  if (!carry) say("");  // a message from the action that led here (a save, a create) stays
  carry = false;
  const [label, module] = VIEWS[view];
  document.title = `${label} · memfed console`;
  main.append(el("h1", { text: label }));
  try {
    await module.render(main, params, { me, go, remember, say, fail, refresh: () => { carry = true; return render(); } });
  } catch (error) {
    fail(error);
  }
  main.dataset.ready = view;  // the page is drawn (tests and assistive tools can wait for this)
}

function drawSignIn(message) {
  me = null;
  nav.hidden = true;
  signOutButton.hidden = true;
  who.textContent = "";
  clear(main);
  const credential = input("credential", "", { type: "password", autocomplete: "current-password",
    required: true });
  const form = el("form", { class: "sign-in", "aria-labelledby": "sign-in-title" },
    el("h1", { id: "sign-in-title", text: "Sign in" }),
    el("p", { text: "With your member API key (mf_…), or a token from your identity provider where the " +
      "gateway is configured for OIDC. The console acts as you: it sees exactly what you may see." }),
    field("API key or OIDC token", credential),
    el("button", { type: "submit", text: "Sign in" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const doc = await api.signIn(credential.value);
      credential.value = "";
      await start(doc);
    } catch (error) {
      fail(error);
    }
  });
  main.append(form);
  if (message) say(message, "error");
  credential.focus();
}

async function start(doc) {
  me = doc.member;
  nav.hidden = false;
  signOutButton.hidden = false;
  who.textContent = `${me.name} (${me.type}${me.admin ? ", admin" : ""})`;
  who.title = `member:${me.id}`;
  await render();
}

// The skip link moves the focus without touching the fragment, which holds the page's state.
document.querySelector(".skip").addEventListener("click", (event) => {
  event.preventDefault();
  main.focus();
});

signOutButton.addEventListener("click", async () => {
  await api.signOut();
  drawSignIn();
  say("Signed out.");
});
document.addEventListener("signed-out", () => drawSignIn("Your session has ended; sign in again."));
window.addEventListener("hashchange", render);

const existing = await api.session();
if (existing) await start(existing);
else drawSignIn();
