// memfed's API as the signed-in member: every call goes to /console/api/v1/..., which the gateway
// hands to its own API with the session's credential. A change carries the session's CSRF token.

let csrfToken = "";

export function setCsrf(token) { csrfToken = token || ""; }

export class ApiError extends Error {
  constructor(status, envelope) {
    const inner = (envelope && envelope.error) || {};
    super(inner.message || `The gateway answered ${status}.`);
    this.status = status;
    this.code = inner.code || "unknown";
    this.param = inner.param || null;
    this.detail = inner.detail || null;
  }
}

async function parse(response) {
  const text = await response.text();
  if (!text) return null;
  try { return JSON.parse(text); } catch { return { raw: text }; }
}

export async function call(method, path, { body, query, raw, contentType } = {}) {
  const url = new URL(`/console/api${path}`, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, String(v));
  }
  const headers = {};
  if (method !== "GET" && method !== "HEAD") headers["X-CSRF-Token"] = csrfToken;
  let payload;
  if (raw !== undefined) { payload = raw; headers["Content-Type"] = contentType || "application/octet-stream"; }
  else if (body !== undefined) { payload = JSON.stringify(body); headers["Content-Type"] = "application/json"; }
  const response = await fetch(url, { method, headers, body: payload, credentials: "same-origin" });
  const parsed = await parse(response);
  if (!response.ok) {
    const error = new ApiError(response.status, parsed);
    if (response.status === 401) document.dispatchEvent(new CustomEvent("signed-out"));
    throw error;
  }
  return { body: parsed, headers: response.headers };
}

export const get = (path, query) => call("GET", path, { query }).then((a) => a.body);
export const post = (path, body) => call("POST", path, { body }).then((a) => a.body);
export const put = (path, body) => call("PUT", path, { body }).then((a) => a.body);
export const patch = (path, body) => call("PATCH", path, { body }).then((a) => a.body);
export const del = (path) => call("DELETE", path).then((a) => a.body);

export async function session() {
  const response = await fetch("/console/session", { credentials: "same-origin" });
  if (!response.ok) return null;
  const doc = await response.json();
  setCsrf(doc.csrf_token);
  return doc;
}

export async function signIn(credential) {
  const response = await fetch("/console/session", {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ credential }),
  });
  const doc = await parse(response);
  if (!response.ok) throw new ApiError(response.status, doc);
  setCsrf(doc.csrf_token);
  return doc;
}

export async function signOut() {
  await fetch("/console/session/end", { method: "POST", credentials: "same-origin",
    headers: { "X-CSRF-Token": csrfToken } });
  setCsrf("");
}

// Every page of a list, up to `most` items (the console never pages through a whole log by accident).
export async function all(path, query = {}, most = 1000) {
  const items = [];
  let cursor = null;
  do {
    const page = await get(path, { ...query, cursor, limit: query.limit || 200 });
    items.push(...page.data);
    cursor = page.next;
  } while (cursor && items.length < most);
  return items;
}
