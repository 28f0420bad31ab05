// The server's JSON API: the key that opens it, GET requests, and failures as error boxes.
//
// The API key lives in this tab's sessionStorage (gone when the tab closes) and travels only
// in the Authorization header: never in a URL, where history, logs and Referer would keep it.

import { h } from "./dom.js";

const KEY_STORAGE = "episodic.inspector.key";
const STATUS_TITLES = {
  0: "Server unreachable",
  400: "Invalid request",
  401: "Unauthenticated",
  403: "Permission denied",
  404: "Not found",
  409: "Conflict",
  412: "Precondition failed",
  429: "Too many requests",
  500: "Internal error",
  503: "Unavailable",
};

let onKeyRefused = () => {};

export function storedKey() {
  try {
    return sessionStorage.getItem(KEY_STORAGE) || "";
  } catch {
    return "";
  }
}

// False when the browser allows no session storage.
export function storeKey(key) {
  try {
    sessionStorage.setItem(KEY_STORAGE, key);
    return true;
  } catch {
    return false;
  }
}

export function forgetKey() {
  try {
    sessionStorage.removeItem(KEY_STORAGE);
  } catch {
    /* storage unavailable: nothing kept anyway */
  }
}

// `handler(keyWasSent)` runs on every 401, before the request's promise rejects.
export function whenKeyRefused(handler) {
  onKeyRefused = handler;
}

export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || (status ? `HTTP ${status}` : "The server could not be reached."));
    this.status = status;
    this.code = error.code || "";
    this.reason = error.reason || "";
    this.fieldViolations = Array.isArray(error.field_violations) ? error.field_violations : [];
  }
}

// GETs an /api path as JSON; rejects with an ApiError (status 0: the server was not reached).
export async function api(path) {
  const headers = { Accept: "application/json" };
  const key = storedKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  let response;
  try {
    response = await fetch(path, { headers, credentials: "omit", cache: "no-store", redirect: "error" });
  } catch {
    throw new ApiError(0, null);
  }
  const body = await jsonOrNull(response);
  if (!response.ok) {
    const error = new ApiError(response.status, body);
    if (response.status === 401) onKeyRefused(Boolean(key));
    throw error;
  }
  return body;
}

async function jsonOrNull(response) {
  try {
    return await response.json();
  } catch {
    return null;
  }
}

export function errorBox(error, context = "") {
  if (!(error instanceof ApiError)) {
    console.error(error);
    error = new ApiError(500, { error: { message: String(error && error.message ? error.message : error) } });
  }
  const title = STATUS_TITLES[error.status] || "Error";
  return h(
    "div",
    { class: "error-box", role: "alert", testid: "error", dataset: { status: String(error.status) } },
    h("strong", {}, context ? `${title}: ${context}` : title),
    h("span", { class: "error-message" }, ` — ${error.message}`),
    error.reason ? h("span", { class: "muted error-reason" }, ` (${error.reason})`) : null,
    error.fieldViolations.length ? fieldViolations(error.fieldViolations) : null,
  );
}

function fieldViolations(violations) {
  return h(
    "ul",
    { class: "violations" },
    violations.map((v) => h("li", { testid: "field-violation" }, h("code", {}, v.field), `: ${v.description}`)),
  );
}

// An error inside a view; a 401 is left out, as the key prompt has already replaced the page.
export function showError(container, error, context = "") {
  if (error instanceof ApiError && error.status === 401) return;
  container.replaceChildren(errorBox(error, context));
}
