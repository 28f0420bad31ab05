// Episodic context inspector: a read-only page over the server's /api/... JSON.
//
// Rules this file keeps (the page runs under a strict Content-Security-Policy and shows
// whatever agents and users wrote):
// - data only ever reaches the DOM through textContent / text nodes (the h() helper);
//   never innerHTML, outerHTML, insertAdjacentHTML or document.write;
// - no inline styles in markup: classes from inspector.css, and CSSOM (el.style.width)
//   for the token bars only;
// - the API key lives in sessionStorage and in the Authorization header, never in a URL.

const KEY_STORAGE = "episodic.inspector.key";
const CALL_PAGES_MAX = 20; // model-call summaries loaded up front (50 a page)

const SECTION_LABELS = {
  system: "system",
  known_facts: "known facts",
  past_conversations: "past conversations",
  summary: "summary",
  history: "history",
  user_message: "user message",
};
const FATE_LABELS = {
  verbatim: "verbatim",
  stubbed: "stubbed",
  summarized: "summarized",
  pruned: "pruned",
  not_yet: "not yet written",
};
const FATE_SHORT = { verbatim: "V", stubbed: "S", summarized: "Σ", pruned: "✕", not_yet: "·" };
const DROP_REASONS = {
  window: "pushed out by the sliding window (pruned: the history budget no longer held it)",
  compaction: "compacted: from then on present only through the summary",
  stub: "tool result replaced by a short stub",
};
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

// --- DOM helpers ---------------------------------------------------------------------------

function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "testid") el.dataset.testid = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "style") throw new Error("inline styles are forbidden by the CSP");
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child)); // strings become text nodes
  }
  return el;
}

function link(href, text, props = {}) {
  return h("a", { href, ...props }, text);
}

function chip(text, cls, props = {}) {
  return h("span", { class: `chip ${cls}`, ...props }, text);
}

function sectionChip(section) {
  return chip(SECTION_LABELS[section] || section, `sec sec-${cssName(section)}`, { testid: "section-chip" });
}

function fateChip(fate, props = {}) {
  return chip(FATE_LABELS[fate] || fate, `fate fate-${cssName(fate)}`, props);
}

function cssName(value) {
  return String(value).replace(/[^a-z0-9_-]/gi, "_");
}

function pre(text, cls = "content") {
  return h("pre", { class: cls }, text);
}

function json(value) {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

function fmtTime(rfc3339) {
  if (!rfc3339) return "—";
  const d = new Date(rfc3339);
  if (Number.isNaN(d.getTime())) return rfc3339;
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function time(rfc3339) {
  return h("time", { datetime: rfc3339 || null, title: rfc3339 || null }, fmtTime(rfc3339));
}

function num(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : "—";
}

function count(n, noun) {
  return `${num(n)} ${noun}${n === 1 ? "" : "s"}`;
}

function pct(part, whole) {
  if (!whole) return "—";
  return `${((100 * part) / whole).toFixed(part / whole < 0.1 ? 1 : 0)}%`;
}

function span(from, to) {
  return from === to ? `${from}` : `${from}–${to}`;
}

function enc(part) {
  return encodeURIComponent(part);
}

function episodeHref(episodeId) {
  return `#/episodes/${enc(episodeId)}`;
}

function callHref(episodeId, callId, tab = "") {
  return `${episodeHref(episodeId)}/calls/${enc(callId)}${tab ? `/${tab}` : ""}`;
}

function safeHttpUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : "";
  } catch {
    return "";
  }
}

function loading(text = "Loading…") {
  return h("p", { class: "muted loading", testid: "loading" }, text);
}

// --- the API -------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || (status ? `HTTP ${status}` : "The server could not be reached."));
    this.status = status;
    this.code = error.code || "";
    this.reason = error.reason || "";
    this.fieldViolations = Array.isArray(error.field_violations) ? error.field_violations : [];
  }
}

const state = {
  session: null,
  askingKey: false,
  gen: 0, // bumped by every navigation: a late answer of an older one is dropped
  view: null,
};

function storedKey() {
  try {
    return sessionStorage.getItem(KEY_STORAGE) || "";
  } catch {
    return "";
  }
}

async function api(path) {
  const headers = { Accept: "application/json" };
  const key = storedKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  let response;
  try {
    response = await fetch(path, { headers, credentials: "omit", cache: "no-store", redirect: "error" });
  } catch {
    throw new ApiError(0, null);
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const error = new ApiError(response.status, body);
    if (response.status === 401) askForKey(key ? "The server refused this key. Enter another one." : "");
    throw error;
  }
  return body;
}

function errorBox(error, context = "") {
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
    error.fieldViolations.length
      ? h(
          "ul",
          { class: "violations" },
          error.fieldViolations.map((v) =>
            h("li", { testid: "field-violation" }, h("code", {}, v.field), `: ${v.description}`),
          ),
        )
      : null,
  );
}

// An error inside a view: a 401 has already replaced the page with the key prompt.
function showError(container, error, context = "") {
  if (error instanceof ApiError && error.status === 401) return;
  container.replaceChildren(errorBox(error, context));
}

// --- chrome: key prompt, header, breadcrumbs ------------------------------------------------

const app = () => document.getElementById("app");

function setCrumbs(items) {
  const nav = document.querySelector('[data-testid="breadcrumbs"]');
  nav.replaceChildren();
  items.forEach((item, i) => {
    if (i > 0) nav.append(h("span", { class: "crumb-sep", "aria-hidden": "true" }, "/"));
    nav.append(
      item.href && i < items.length - 1
        ? link(item.href, item.label, { class: "crumb" })
        : h("span", { class: "crumb current" }, item.label),
    );
  });
}

function showSession(session) {
  const tenant = document.querySelector('[data-testid="tenant"]');
  const forget = document.querySelector('[data-testid="forget-key"]');
  if (session) {
    tenant.replaceChildren(h("span", { class: "muted" }, "tenant "), h("strong", {}, session.tenant_id));
    tenant.hidden = false;
  } else {
    tenant.hidden = true;
  }
  // with a key: forget it; without one (a dev server served us anyway): offer to enter one
  forget.textContent = storedKey() ? "Forget key" : "Enter a key";
  forget.hidden = !session && !storedKey();
}

function askForKey(message) {
  if (state.askingKey) return;
  state.askingKey = true;
  state.gen += 1;
  state.view = null;
  state.session = null;
  try {
    sessionStorage.removeItem(KEY_STORAGE);
  } catch {
    /* storage unavailable: nothing kept anyway */
  }
  showSession(null);
  setCrumbs([{ label: "API key" }]);
  document.title = "API key · Episodic inspector";
  const input = h("input", {
    type: "password",
    id: "key-input",
    name: "key",
    testid: "key-input",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    placeholder: "epk_…",
  });
  const problem = h("p", { class: "error-box", testid: "key-error", role: "alert", hidden: !message }, message);
  const form = h(
    "form",
    { class: "key-form card", testid: "key-form", novalidate: true },
    h("h1", {}, "API key"),
    h(
      "p",
      { class: "muted" },
      "The inspector shows the episodes of the tenant an API key belongs to. The key is kept in this " +
        "tab's session storage only and sent as a bearer token; it never appears in a URL.",
    ),
    problem,
    h("label", { for: "key-input" }, "Key"),
    h(
      "div",
      { class: "key-row" },
      input,
      h("button", { type: "submit", class: "primary", testid: "key-submit" }, "Open"),
    ),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) {
      problem.textContent = "Enter a key.";
      problem.hidden = false;
      return;
    }
    try {
      sessionStorage.setItem(KEY_STORAGE, key);
    } catch {
      problem.textContent = "This browser does not allow session storage; the inspector needs it for the key.";
      problem.hidden = false;
      return;
    }
    state.askingKey = false;
    start();
  });
  app().replaceChildren(form);
  input.focus();
}

async function start() {
  const gen = ++state.gen;
  app().replaceChildren(loading("Connecting…"));
  try {
    state.session = await api("/api/session");
  } catch (error) {
    if (gen === state.gen) showError(app(), error, "session");
    return;
  }
  if (gen !== state.gen) return;
  showSession(state.session);
  route();
}

// --- routing ---------------------------------------------------------------------------------

function parseRoute() {
  const raw = location.hash.replace(/^#\/?/, "");
  const parts = raw.split("/").filter((p) => p !== "");
  try {
    return parts.map((p) => decodeURIComponent(p));
  } catch {
    return null;
  }
}

function route() {
  if (state.askingKey || !state.session) return;
  const parts = parseRoute();
  const [a, b, c, d, e, f] = parts || [];
  const n = parts ? parts.length : -1;
  if (n === 0) return show("agents", [], () => agentsView());
  if (n === 2 && a === "agents") return show("users", [b], () => usersView(b));
  if (n === 4 && a === "agents" && c === "users") return show("episodes", [b, d], () => episodesView(b, d));
  if (a === "episodes" && (n === 2 || ((n === 4 || (n === 5 && e === "diff")) && c === "calls"))) {
    const callId = n >= 4 ? d : "";
    const tab = n === 5 ? "diff" : "context";
    if (state.view && state.view.kind === "episode" && state.view.episodeId === b) {
      state.view.select(callId, tab);
      return undefined;
    }
    state.gen += 1;
    state.view = new EpisodeView(b, state.gen);
    state.view.render(callId, tab);
    return undefined;
  }
  state.gen += 1;
  state.view = null;
  setCrumbs([{ label: "Agents", href: "#/" }, { label: "?" }]);
  app().replaceChildren(
    errorBox(new ApiError(404, { error: { message: "no such page in the inspector" } })),
    h("p", {}, link("#/", "Back to the agents")),
  );
  return undefined;
}

function show(kind, args, render) {
  state.gen += 1;
  state.view = { kind, args };
  render();
}

// --- lists: agents, users, episodes -----------------------------------------------------------

// A table filled page by page from `fetchPage(token) -> {items, next}`, with a "more" button.
function pagedTable({ columns, fetchPage, rowTestId, empty, what }) {
  const gen = state.gen;
  const body = h("tbody");
  const status = h("div", { class: "table-status" });
  const more = h("button", { type: "button", testid: "more", hidden: true }, `More ${what}`);
  const table = h(
    "table",
    { class: "list", testid: `${what}-table` },
    h("thead", {}, h("tr", {}, columns.map((col) => h("th", { class: col.cls || null }, col.title)))),
    body,
  );
  let token = "";
  let rows = 0;
  async function load() {
    more.disabled = true;
    status.replaceChildren(loading());
    let page;
    try {
      page = await fetchPage(token);
    } catch (error) {
      if (gen === state.gen) showError(status, error, what);
      more.disabled = false;
      return;
    }
    if (gen !== state.gen) return;
    status.replaceChildren();
    for (const item of page.items) {
      rows += 1;
      body.append(
        h("tr", { testid: rowTestId }, columns.map((col) => h("td", { class: col.cls || null }, col.cell(item)))),
      );
    }
    token = page.next || "";
    more.hidden = !token;
    more.disabled = false;
    if (!rows) status.replaceChildren(h("p", { class: "muted", testid: "empty" }, empty));
  }
  more.addEventListener("click", load);
  load();
  return h("div", { class: "paged" }, table, status, more);
}

function agentsView() {
  setCrumbs([{ label: "Agents" }]);
  document.title = "Agents · Episodic inspector";
  app().replaceChildren(
    h("h1", {}, "Agents"),
    pagedTable({
      what: "agents",
      rowTestId: "agent-row",
      empty: "This tenant has no agents.",
      fetchPage: async (token) => {
        const page = await api(`/api/agents?page_token=${enc(token)}`);
        return { items: page.agents, next: page.next_page_token };
      },
      columns: [
        {
          title: "Agent",
          cell: (a) => link(`#/agents/${enc(a.agent_id)}`, a.agent_id, { testid: "agent-link", class: "id" }),
        },
        { title: "Model", cell: (a) => a.model || "—" },
        { title: "Updated", cell: (a) => time(a.update_time) },
      ],
    }),
  );
}

function usersView(agentId) {
  setCrumbs([{ label: "Agents", href: "#/" }, { label: agentId }]);
  document.title = `${agentId} · Episodic inspector`;
  app().replaceChildren(
    h("h1", {}, h("span", { class: "muted" }, "Users of "), h("span", { class: "id" }, agentId)),
    pagedTable({
      what: "users",
      rowTestId: "user-row",
      empty: "No user has talked to this agent.",
      fetchPage: async (token) => {
        const page = await api(`/api/agents/${enc(agentId)}/users?page_token=${enc(token)}`);
        return { items: page.users, next: page.next_page_token };
      },
      columns: [
        {
          title: "User",
          cell: (u) =>
            link(`#/agents/${enc(agentId)}/users/${enc(u.user_id)}`, u.user_id, { testid: "user-link", class: "id" }),
        },
        { title: "Episodes", cls: "num", cell: (u) => num(u.episodes) },
        { title: "Last activity", cell: (u) => time(u.last_activity_time) },
      ],
    }),
  );
}

function stateChip(episodeState) {
  return chip(episodeState, `state state-${cssName(episodeState)}`, { testid: "episode-state" });
}

function episodesView(agentId, userId) {
  setCrumbs([
    { label: "Agents", href: "#/" },
    { label: agentId, href: `#/agents/${enc(agentId)}` },
    { label: userId },
  ]);
  document.title = `${userId} · ${agentId} · Episodic inspector`;
  app().replaceChildren(
    h(
      "h1",
      {},
      h("span", { class: "muted" }, "Episodes of "),
      h("span", { class: "id" }, userId),
      h("span", { class: "muted" }, " with "),
      h("span", { class: "id" }, agentId),
    ),
    pagedTable({
      what: "episodes",
      rowTestId: "episode-row",
      empty: "No episodes.",
      fetchPage: async (token) => {
        const page = await api(`/api/agents/${enc(agentId)}/users/${enc(userId)}/episodes?page_token=${enc(token)}`);
        return { items: page.episodes, next: page.next_page_token };
      },
      columns: [
        {
          title: "Episode",
          cell: (e) => link(episodeHref(e.episode_id), e.episode_id, { testid: "episode-link", class: "id" }),
        },
        { title: "State", cell: (e) => stateChip(e.state) },
        { title: "Started", cell: (e) => time(e.start_time) },
        { title: "Ended", cell: (e) => (e.end_time ? time(e.end_time) : "—") },
        { title: "Last activity", cell: (e) => time(e.last_activity_time) },
        { title: "Messages", cls: "num", cell: (e) => num(e.message_count) },
      ],
    }),
  );
}

// --- one episode ---------------------------------------------------------------------------

function fateAt(fates, seq) {
  for (const run of fates || []) if (seq >= run.from_seq && seq <= run.to_seq) return run.fate;
  return "";
}

function fatesText(call) {
  const runs = call.fates || [];
  if (!runs.length) return "No log messages were before this call.";
  const parts = runs.map((run) => {
    let text = `${span(run.from_seq, run.to_seq)} ${run.fate}`;
    if (run.fate === "summarized" && call.summary_span) {
      text += ` (summary span ${span(call.summary_span.from_seq, call.summary_span.to_seq)})`;
    }
    return text;
  });
  return `seq ${parts.join(", ")}`;
}

class EpisodeView {
  constructor(episodeId, gen) {
    this.kind = "episode";
    this.episodeId = episodeId;
    this.gen = gen;
    this.callGen = 0;
    this.episode = null;
    this.messages = new Map(); // seq -> message, every loaded log message
    this.results = new Map(); // tool_call_id -> tool message carrying the result
    this.logToken = "";
    this.calls = []; // summaries, oldest first
    this.callsMore = "";
    this.selected = { callId: "", tab: "context", call: null };
    this.pending = { callId: "", tab: "context" }; // asked for before the episode loaded
    this.whereGen = 0;
  }

  alive() {
    return state.view === this && state.gen === this.gen;
  }

  async render(callId, tab) {
    this.pending = { callId, tab };
    document.title = `${this.episodeId} · Episodic inspector`;
    setCrumbs([{ label: "Agents", href: "#/" }, { label: "…" }, { label: this.episodeId }]);
    app().replaceChildren(loading());
    let answer;
    try {
      answer = await api(`/api/episodes/${enc(this.episodeId)}`);
    } catch (error) {
      if (this.alive()) showError(app(), error, "episode");
      return;
    }
    if (!this.alive()) return;
    this.episode = answer.episode;
    this.build();
    await Promise.all([this.loadEarlierLog(), this.loadCalls()]);
    if (!this.alive()) return;
    this.select(this.pending.callId, this.pending.tab);
  }

  build() {
    const e = this.episode;
    setCrumbs([
      { label: "Agents", href: "#/" },
      { label: e.agent_id, href: `#/agents/${enc(e.agent_id)}` },
      { label: e.user_id, href: `#/agents/${enc(e.agent_id)}/users/${enc(e.user_id)}` },
      { label: e.episode_id },
    ]);
    const head = h(
      "div",
      { class: "episode-head", testid: "episode-header" },
      h("h1", {}, h("span", { class: "muted" }, "Episode "), h("span", { class: "id", testid: "episode-id" }, e.episode_id)),
      h(
        "dl",
        { class: "facts" },
        fact("state", stateChip(e.state)),
        fact("agent", link(`#/agents/${enc(e.agent_id)}`, e.agent_id, { class: "id" })),
        fact("user", link(`#/agents/${enc(e.agent_id)}/users/${enc(e.user_id)}`, e.user_id, { class: "id" })),
        fact("started", time(e.start_time)),
        fact("ended", e.end_time ? time(e.end_time) : "—"),
        fact("last activity", time(e.last_activity_time)),
        fact("messages", num(e.message_count)),
      ),
    );

    this.whereInput = h("input", {
      type: "search",
      id: "where-input",
      testid: "where-input",
      placeholder: "a phrase from the conversation, e.g. “my cat is called”",
      autocomplete: "off",
      spellcheck: "false",
    });
    this.whereResult = h("div", { class: "where-result", testid: "where-result", hidden: true });
    const whereForm = h(
      "form",
      { class: "where-form", testid: "where-form", role: "search" },
      h("label", { for: "where-input", class: "where-label" }, "Where did it go?"),
      this.whereInput,
      h("button", { type: "submit", class: "primary", testid: "where-submit" }, "Trace phrase"),
    );
    whereForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.where(this.whereInput.value);
    });

    this.logList = h("ol", { class: "log", testid: "log" });
    this.logEarlier = h(
      "button",
      { type: "button", testid: "earlier-messages", hidden: true, onclick: () => this.loadEarlierLog() },
      "Earlier messages",
    );
    this.logStatus = h("div", { class: "table-status" });
    const logPane = h(
      "section",
      { class: "pane log-pane", testid: "log-pane" },
      h("h2", {}, "Log ", h("span", { class: "muted small" }, "oldest at the top")),
      this.logEarlier,
      this.logStatus,
      this.logList,
    );

    this.callList = h("ol", { class: "calls", testid: "model-calls" });
    this.callsStatus = h("div", { class: "table-status" });
    this.callsEarlier = h(
      "button",
      { type: "button", testid: "earlier-calls", hidden: true, onclick: () => this.loadCalls() },
      "Earlier model calls",
    );
    this.detail = h("div", { class: "call-detail", testid: "call-detail" });
    const callsPane = h(
      "section",
      { class: "pane calls-pane", testid: "calls-pane" },
      h("h2", {}, "Model calls ", h("span", { class: "muted small" }, "in order")),
      this.callsEarlier,
      this.callsStatus,
      this.callList,
      this.detail,
    );
    app().replaceChildren(
      h("div", { class: "episode" }, head, whereForm, this.whereResult, h("div", { class: "panes" }, logPane, callsPane)),
    );
  }

  // The log: pages newest first, shown oldest at the top; "earlier messages" prepends.
  async loadEarlierLog() {
    this.logEarlier.disabled = true;
    this.logStatus.replaceChildren(loading());
    let page;
    try {
      page = await api(`/api/episodes/${enc(this.episodeId)}/messages?page_token=${enc(this.logToken)}`);
    } catch (error) {
      if (this.alive()) showError(this.logStatus, error, "log");
      this.logEarlier.disabled = false;
      return false;
    }
    if (!this.alive()) return false;
    this.logStatus.replaceChildren();
    const older = [...page.messages].sort((x, y) => x.seq - y.seq);
    for (const m of older) {
      this.messages.set(m.seq, m);
      if (m.tool_result && m.tool_result.tool_call_id) this.results.set(m.tool_result.tool_call_id, m);
    }
    const first = this.logList.firstChild;
    for (const m of older) this.logList.insertBefore(this.logMessage(m), first);
    this.logToken = page.next_page_token || "";
    this.logEarlier.hidden = !this.logToken;
    this.logEarlier.disabled = false;
    if (!this.messages.size) this.logStatus.replaceChildren(h("p", { class: "muted", testid: "empty" }, "No messages yet."));
    if (this.selected.call) this.annotateLog(this.selected.call);
    return true;
  }

  logMessage(m) {
    const item = h(
      "li",
      { class: `msg role-${cssName(m.role)}`, testid: "log-message", dataset: { seq: String(m.seq), role: m.role } },
      h(
        "div",
        { class: "msg-head" },
        h("span", { class: "seq", testid: "log-seq" }, `#${m.seq}`),
        chip(m.role, `role role-${cssName(m.role)}`),
        time(m.create_time),
        h("span", { class: "muted small" }, `${num(m.tokens)} tok`),
        h("span", { class: "log-fate", testid: "log-fate" }),
      ),
      m.content ? pre(m.content) : null,
      (m.tool_calls || []).map((call) => this.toolCall(call)),
      m.tool_result ? this.toolResult(m.tool_result) : null,
    );
    return item;
  }

  toolCall(call) {
    const result = this.results.get(call.tool_call_id);
    const r = result && result.tool_result;
    return h(
      "details",
      { class: "tool tool-call", testid: "tool-call" },
      h(
        "summary",
        {},
        h("span", { class: "tool-arrow" }, "→ "),
        h("strong", { class: "tool-name" }, call.tool_name),
        h("span", { class: "muted small" }, ` ${call.tool_call_id}`),
        r ? resultBadges(r) : h("span", { class: "muted small" }, " · no result in the loaded log"),
      ),
      h("div", { class: "tool-label" }, "input"),
      pre(json(call.input), "content json"),
      r ? resultBody(r, result.seq) : null,
    );
  }

  toolResult(r) {
    return h(
      "details",
      { class: "tool tool-result", testid: "tool-result" },
      h(
        "summary",
        {},
        h("span", { class: "tool-arrow" }, "← "),
        "result of ",
        h("span", { class: "small" }, r.tool_call_id),
        resultBadges(r),
      ),
      resultBody(r, 0),
    );
  }

  async loadCalls() {
    this.callsEarlier.disabled = true;
    this.callsStatus.replaceChildren(loading());
    let pages = 0;
    try {
      do {
        const page = await api(`/api/episodes/${enc(this.episodeId)}/model-calls?page_token=${enc(this.callsMore)}`);
        if (!this.alive()) return;
        this.calls = [...[...page.model_calls].reverse(), ...this.calls];
        this.callsMore = page.next_page_token || "";
        pages += 1;
      } while (this.callsMore && pages < CALL_PAGES_MAX);
    } catch (error) {
      if (this.alive()) showError(this.callsStatus, error, "model calls");
      this.callsEarlier.disabled = false;
      return;
    }
    this.callsStatus.replaceChildren();
    this.callsEarlier.hidden = !this.callsMore;
    this.callsEarlier.disabled = false;
    this.renderCallList();
  }

  callNumber(callId) {
    const i = this.calls.findIndex((c) => c.model_call_id === callId);
    if (i < 0) return "";
    return this.callsMore ? `…${this.calls.length - i}` : `#${i + 1}`; // …k: k-th newest
  }

  renderCallList() {
    this.callList.replaceChildren();
    if (!this.calls.length) {
      this.callList.append(h("li", { class: "muted", testid: "empty" }, "No model calls: BuildContext was never called."));
      return;
    }
    for (const c of this.calls) {
      const selected = c.model_call_id === this.selected.callId;
      const share = c.budget_tokens ? Math.min(1, c.total_tokens / c.budget_tokens) : 0;
      const fill = h("span", { class: `mini-fill${c.total_tokens > c.budget_tokens ? " over" : ""}` });
      fill.style.width = `${(share * 100).toFixed(1)}%`;
      this.callList.append(
        h(
          "li",
          {},
          h(
            "a",
            {
              href: callHref(this.episodeId, c.model_call_id, selected ? this.selected.tab : ""),
              class: `call${selected ? " selected" : ""}`,
              testid: "model-call",
              "aria-current": selected ? "true" : null,
              dataset: { callId: c.model_call_id },
            },
            h("span", { class: "call-num" }, this.callNumber(c.model_call_id)),
            time(c.create_time),
            h("span", { class: "small" }, c.user_message_seq ? `user msg #${c.user_message_seq}` : "no user msg"),
            h(
              "span",
              { class: "call-tokens small", title: "total tokens / budget" },
              `${num(c.total_tokens)} / ${num(c.budget_tokens)}`,
            ),
            h("span", { class: "mini-bar", "aria-hidden": "true" }, fill),
            c.compaction && c.compaction !== "none" ? chip(c.compaction, `compaction comp-${cssName(c.compaction)}`) : null,
            c.trace_id ? h("span", { class: "muted small", title: `trace ${c.trace_id}` }, "traced") : null,
          ),
        ),
      );
    }
  }

  select(callId, tab) {
    if (!this.episode || !this.detail) {
      this.pending = { callId, tab }; // still loading: render() selects it once it can
      return;
    }
    if (!callId) {
      this.selected = { callId: "", tab: "context", call: null };
      this.renderCallList();
      this.annotateLog(null);
      this.detail.replaceChildren(
        h("p", { class: "muted hint" }, this.calls.length ? "Select a model call to see what the model was shown." : ""),
      );
      return;
    }
    const sameCall = this.selected.callId === callId && this.selected.call;
    this.selected.callId = callId;
    this.selected.tab = tab;
    this.renderCallList();
    if (sameCall) {
      this.renderCall(this.selected.call, tab);
      return;
    }
    this.loadCall(callId, tab);
  }

  async loadCall(callId, tab) {
    const gen = ++this.callGen;
    this.detail.replaceChildren(loading());
    let call;
    try {
      call = (await api(`/api/model-calls/${enc(callId)}?offset=0`)).model_call;
    } catch (error) {
      if (this.alive() && gen === this.callGen) showError(this.detail, error, "model call");
      return;
    }
    if (!this.alive() || gen !== this.callGen) return;
    if (call.episode_id !== this.episodeId) {
      this.detail.replaceChildren(
        h(
          "p",
          { class: "error-box", testid: "error" },
          "This model call belongs to another episode: ",
          link(callHref(call.episode_id, call.model_call_id), call.episode_id),
        ),
      );
      return;
    }
    this.selected.call = call;
    this.renderCall(call, tab);
    this.scrollLogTo(call.user_message_seq || (call.history_span ? call.history_span.to_seq : 0));
  }

  // Scrolls the log pane alone (not the page) to a loaded message.
  scrollLogTo(seq) {
    const li = seq ? this.logList.querySelector(`li[data-seq="${Number(seq)}"]`) : null;
    const pane = this.logList.parentElement;
    if (!li || !pane) return;
    pane.scrollTop += li.getBoundingClientRect().top - pane.getBoundingClientRect().top - pane.clientHeight / 3;
  }

  renderCall(call, tab) {
    this.annotateLog(call);
    const number = this.callNumber(call.model_call_id);
    const tabs = h(
      "nav",
      { class: "tabs", testid: "call-tabs" },
      link(callHref(this.episodeId, call.model_call_id), "Rendered context", {
        class: `tab${tab === "context" ? " active" : ""}`,
        testid: "tab-context",
      }),
      link(callHref(this.episodeId, call.model_call_id, "diff"), "Diff with the previous call", {
        class: `tab${tab === "diff" ? " active" : ""}`,
        testid: "tab-diff",
      }),
    );
    const body = h("div", { class: "tab-body" });
    this.detail.replaceChildren(
      h(
        "h2",
        { class: "call-title" },
        `Model call ${number} `,
        h("span", { class: "id small", testid: "call-id" }, call.model_call_id),
      ),
      callFacts(call),
      tabs,
      body,
    );
    if (tab === "diff") this.renderDiff(call, body);
    else this.renderContext(call, body);
  }

  renderContext(call, body) {
    const list = h("ol", { class: "rendered", testid: "rendered-messages" });
    const more = h("button", { type: "button", testid: "more-messages", hidden: true }, "More messages");
    const status = h("div", { class: "table-status" });
    let offset = call.next_offset;
    const addMessages = (messages) => {
      for (const m of messages) list.append(this.renderedMessage(m, call));
      more.hidden = offset === null || offset === undefined;
      more.textContent = `More messages (${num(list.childElementCount)} of ${num(call.message_count)} shown)`;
    };
    more.addEventListener("click", async () => {
      more.disabled = true;
      status.replaceChildren(loading());
      const gen = this.callGen;
      let page;
      try {
        page = (await api(`/api/model-calls/${enc(call.model_call_id)}?offset=${enc(String(offset))}`)).model_call;
      } catch (error) {
        if (this.alive() && gen === this.callGen) showError(status, error, "more messages");
        more.disabled = false;
        return;
      }
      if (!this.alive() || gen !== this.callGen) return;
      status.replaceChildren();
      more.disabled = false;
      offset = page.next_offset;
      call.messages = [...call.messages, ...page.messages];
      call.next_offset = page.next_offset;
      addMessages(page.messages);
    });
    addMessages(call.messages);
    body.append(
      tokenBars(call),
      h(
        "div",
        { class: "block" },
        h("h3", {}, "What happened to the log"),
        h("p", { class: "fates-text", testid: "fates" }, fatesText(call)),
        fateStrip(call),
        h(
          "p",
          { class: "muted small" },
          `${count(call.messages_pruned, "message")} pruned by the window · ` +
            `${count(call.tool_results_stubbed, "tool result")} stubbed · ` +
            `${count(call.messages_summarized, "message")} summarized` +
            (call.history_span ? ` · history span ${span(call.history_span.from_seq, call.history_span.to_seq)}` : ""),
        ),
      ),
      recalled(call),
      h(
        "div",
        { class: "block" },
        h(
          "h3",
          {},
          "Rendered messages ",
          h("span", { class: "muted small", testid: "message-count" }, `${num(call.message_count)} in all`),
        ),
        list,
        status,
        more,
      ),
    );
  }

  renderedMessage(m, call) {
    let fate;
    if (m.section === "summary" && call.summary_span) {
      fate = chip(`summary of ${span(call.summary_span.from_seq, call.summary_span.to_seq)}`, "fate fate-summarized", {
        testid: "message-fate",
      });
    } else if (m.seq) {
      fate = fateChip(m.stubbed ? "stubbed" : "verbatim", { testid: "message-fate" });
    } else {
      fate = chip("not a log message", "fate fate-context", { testid: "message-fate" });
    }
    return h(
      "li",
      {
        class: `rmsg sec-edge-${cssName(m.section)}`,
        testid: "rendered-message",
        dataset: { section: m.section, index: String(m.index), seq: String(m.seq || 0), stubbed: String(!!m.stubbed) },
      },
      h(
        "div",
        { class: "msg-head" },
        h("span", { class: "seq muted" }, `[${m.index}]`),
        sectionChip(m.section),
        chip(m.role, `role role-${cssName(m.role)}`),
        m.seq
          ? h(
              "button",
              { type: "button", class: "link-button small", title: "show in the log", onclick: () => this.reveal(m.seq) },
              `log #${m.seq}`,
            )
          : null,
        fate,
        h("span", { class: "muted small" }, `${num(m.tokens)} tok`),
        m.tool_call_id ? h("span", { class: "muted small" }, `result of ${m.tool_call_id}`) : null,
      ),
      m.content ? pre(m.content) : null,
      (m.tool_calls || []).map((tc) =>
        h(
          "details",
          { class: "tool tool-call" },
          h("summary", {}, "→ ", h("strong", {}, tc.tool_name), h("span", { class: "muted small" }, ` ${tc.tool_call_id}`)),
          pre(json(tc.input), "content json"),
        ),
      ),
    );
  }

  async renderDiff(call, body) {
    body.append(loading());
    const gen = this.callGen;
    let diff;
    try {
      diff = await api(`/api/model-calls/${enc(call.model_call_id)}/diff`);
    } catch (error) {
      if (this.alive() && gen === this.callGen) showError(body, error, "diff");
      return;
    }
    if (!this.alive() || gen !== this.callGen || !body.isConnected) return;
    const previous = diff.previous_model_call_id;
    const item = (x, testid) =>
      h(
        "li",
        {
          class: `diff-item sec-edge-${cssName(x.section)}`,
          testid,
          dataset: { section: x.section, seq: String(x.seq || 0) },
        },
        h(
          "div",
          { class: "msg-head" },
          sectionChip(x.section),
          chip(x.role, `role role-${cssName(x.role)}`),
          x.seq
            ? h("button", { type: "button", class: "link-button small", onclick: () => this.reveal(x.seq) }, `log #${x.seq}`)
            : h("span", { class: "muted small" }, "not a log message"),
          x.stubbed ? fateChip("stubbed") : null,
          h("span", { class: "muted small" }, `${num(x.tokens)} tok`),
        ),
        pre(x.preview, "content preview"),
      );
    const column = (title, items, testid, cls) =>
      h(
        "div",
        { class: `diff-col ${cls}` },
        h("h3", {}, `${title} `, h("span", { class: "muted small" }, `${items.length}`)),
        items.length
          ? h("ol", { class: "diff-list", testid: `${testid}-list` }, items.map((x) => item(x, testid)))
          : h("p", { class: "muted", testid: `${testid}-none` }, "nothing"),
      );
    body.replaceChildren(
      h(
        "p",
        { class: "diff-summary", testid: "diff-summary" },
        previous
          ? [
              "Compared with the previous call ",
              link(callHref(this.episodeId, previous), `${this.callNumber(previous) || previous}`, {
                testid: "diff-previous",
              }),
              `: ${diff.entered.length} entered, ${diff.left.length} left, ${num(diff.kept)} kept.`,
            ]
          : "The first model call of the episode: everything entered.",
      ),
      h(
        "div",
        { class: "diff" },
        column("Entered the context", diff.entered, "diff-entered", "entered"),
        column("Left the context", diff.left, "diff-left", "left"),
      ),
    );
  }

  annotateLog(call) {
    const userSeq = call ? call.user_message_seq : 0;
    const last = call && call.fates && call.fates.length ? call.fates[call.fates.length - 1].to_seq : 0;
    for (const li of this.logList.children) {
      const seq = Number(li.dataset.seq);
      const badge = li.querySelector('[data-testid="log-fate"]');
      let fate = call ? fateAt(call.fates, seq) : "";
      if (call && !fate && seq > Math.max(userSeq, last)) fate = "not_yet";
      li.dataset.fate = fate;
      badge.className = fate ? `log-fate chip fate fate-${cssName(fate)}` : "log-fate";
      badge.textContent = fate ? (FATE_LABELS[fate] || fate) : "";
      badge.title = fate ? "in the selected model call" : "";
    }
  }

  // Scrolls the log to a message, loading earlier pages as needed, and flashes it.
  async reveal(seq) {
    let guard = 0;
    while (!this.messages.has(seq) && this.logToken && guard < 200) {
      guard += 1;
      if (!(await this.loadEarlierLog())) return;
    }
    const li = this.logList.querySelector(`li[data-seq="${Number(seq)}"]`);
    if (!li) return;
    li.scrollIntoView({ block: "center" });
    li.classList.remove("flash");
    void li.offsetWidth; // restart the animation
    li.classList.add("flash");
  }

  async where(phrase) {
    const out = this.whereResult;
    out.hidden = false;
    out.replaceChildren(loading("Tracing the phrase…"));
    const gen = ++this.whereGen;
    let answer;
    try {
      answer = await api(`/api/episodes/${enc(this.episodeId)}/where?phrase=${enc(phrase)}`);
    } catch (error) {
      if (this.alive() && gen === this.whereGen) showError(out, error, "where did it go");
      return;
    }
    if (!this.alive() || gen !== this.whereGen) return;
    out.replaceChildren(...this.whereNodes(answer));
  }

  whereNodes(answer) {
    const calls = answer.calls || [];
    // numbered as in the model-call list (the trace may hold only the newest calls)
    const number = new Map(calls.map((c, i) => [c.model_call_id, this.callNumber(c.model_call_id) || `#${i + 1}`]));
    const summary = h(
      "p",
      { class: "where-summary", testid: "where-summary" },
      answer.messages.length
        ? `${answer.messages.length}${answer.truncated ? "+" : ""} log message${answer.messages.length === 1 ? " contains" : "s contain"} `
        : "No log message contains ",
      h("q", { class: "phrase" }, answer.phrase),
      `; ${calls.length} model call${calls.length === 1 ? "" : "s"} in the episode.`,
      answer.truncated
        ? h(
            "span",
            { class: "muted", testid: "where-truncated" },
            " Cut short: the earliest matches are traced through the newest model calls only.",
          )
        : null,
    );
    const nodes = [summary];
    if (!answer.messages.length) return nodes;
    const drops = new Map();
    for (const d of answer.dropped || []) drops.set(d.seq, d);
    const callLink = (id) => link(callHref(this.episodeId, id), number.get(id) || "?", { class: "call-ref" });
    const list = h("ol", { class: "where-messages" });
    for (const m of answer.messages) {
      const drop = drops.get(m.seq);
      const fates = calls.map((c) => (c.fates.find((f) => f.seq === m.seq) || {}).fate || "");
      const everVerbatim = fates.includes("verbatim");
      const lastFate = fates.length ? fates[fates.length - 1] : "";
      let verdict;
      if (drop) {
        const at = calls.find((c) => c.model_call_id === drop.model_call_id);
        verdict = h(
          "div",
          { class: `dropped reason-${cssName(drop.reason)}`, testid: "dropped", dataset: { reason: drop.reason } },
          h("strong", {}, "Dropped out"),
          " at model call ",
          callLink(drop.model_call_id),
          ` (${fmtTime(drop.create_time)}${at && at.user_message_seq ? `, user msg #${at.user_message_seq}` : ""}): `,
          h("span", { class: "reason", testid: "dropped-reason" }, `${drop.reason} — ${DROP_REASONS[drop.reason] || ""}`),
        );
      } else if (!calls.length) {
        verdict = h("div", { class: "muted", testid: "not-dropped" }, "No model call was built yet.");
      } else if (lastFate === "verbatim") {
        verdict = h("div", { class: "kept", testid: "not-dropped" }, "Still rendered verbatim in the latest model call.");
      } else {
        verdict = h(
          "div",
          { class: "muted", testid: "not-dropped" },
          everVerbatim ? `In the latest model call: ${FATE_LABELS[lastFate] || lastFate || "absent"}.` : "Never rendered verbatim.",
        );
      }
      list.append(
        h(
          "li",
          { class: "where-message", testid: "where-message", dataset: { seq: String(m.seq) } },
          h(
            "div",
            { class: "msg-head" },
            h("button", { type: "button", class: "link-button", onclick: () => this.reveal(m.seq) }, `log #${m.seq}`),
            chip(m.role, `role role-${cssName(m.role)}`),
            h("span", { class: "preview" }, m.preview),
          ),
          verdict,
        ),
      );
    }
    nodes.push(list);
    if (calls.length) nodes.push(this.whereMatrix(answer, calls, callLink));
    return nodes;
  }

  whereMatrix(answer, calls, callLink) {
    const head = h(
      "tr",
      {},
      h("th", { class: "corner" }, "log msg \\ call"),
      calls.map((c) =>
        h("th", { title: `${fmtTime(c.create_time)}${c.user_message_seq ? ` · user msg #${c.user_message_seq}` : ""}` }, callLink(c.model_call_id)),
      ),
    );
    const rows = answer.messages.map((m) =>
      h(
        "tr",
        {},
        h("th", {}, `#${m.seq}`),
        calls.map((c) => {
          const fate = (c.fates.find((f) => f.seq === m.seq) || {}).fate || "";
          return h(
            "td",
            { class: `cell fate-${cssName(fate || "none")}`, title: FATE_LABELS[fate] || "absent", testid: "where-cell", dataset: { fate } },
            FATE_SHORT[fate] || "",
          );
        }),
      ),
    );
    const legend = h(
      "p",
      { class: "legend small" },
      Object.keys(FATE_SHORT).map((f) =>
        h("span", { class: "legend-item" }, h("span", { class: `cell fate-${f}` }, FATE_SHORT[f]), ` ${FATE_LABELS[f]}`),
      ),
    );
    return h(
      "div",
      { class: "block" },
      h("h3", {}, "Per model call"),
      h("div", { class: "matrix-wrap" }, h("table", { class: "matrix", testid: "where-matrix" }, h("thead", {}, head), h("tbody", {}, rows))),
      legend,
    );
  }
}

function fact(name, value) {
  return [h("dt", {}, name), h("dd", {}, value)];
}

function resultBadges(r) {
  return [
    typeof r.duration_ms === "number" ? h("span", { class: "muted small" }, ` · ${num(r.duration_ms)} ms`) : null,
    r.error ? chip("error", "error-chip") : null,
  ];
}

function resultBody(r, seq) {
  return [
    h("div", { class: "tool-label" }, seq ? `output (log #${seq})` : "output"),
    pre(json(r.output), "content json"),
    r.error ? [h("div", { class: "tool-label" }, "error"), pre(r.error, "content error-text")] : null,
    h("div", { class: "muted small" }, `duration ${typeof r.duration_ms === "number" ? `${num(r.duration_ms)} ms` : "—"}`),
  ];
}

function callFacts(call) {
  const url = safeHttpUrl(call.trace_url || "");
  let trace = "—";
  if (url) {
    trace = link(url, call.trace_id, { target: "_blank", rel: "noopener noreferrer", testid: "trace-link", class: "id" });
  } else if (call.trace_id) {
    trace = h("span", { class: "id", testid: "trace-id" }, call.trace_id);
  }
  const reply = call.reply
    ? `${num(call.reply.input_tokens)} in / ${num(call.reply.output_tokens)} out, ${num(call.reply.latency_ms)} ms` +
      (call.reply.assistant_message_seq ? `, logged as #${call.reply.assistant_message_seq}` : "")
    : "not recorded";
  return h(
    "dl",
    { class: "facts", testid: "call-facts" },
    fact("created", time(call.create_time)),
    fact("model", `${call.model || "—"} (${call.token_encoding || "?"})`),
    fact("user message", call.user_message_seq ? `#${call.user_message_seq}` : "not appended to the log"),
    fact("compaction", chip(call.compaction, `compaction comp-${cssName(call.compaction)}`, { testid: "compaction" })),
    fact("request id", call.request_id || "—"),
    fact("trace", trace),
    fact("reply", reply),
    call.session_data_keys && call.session_data_keys.length ? fact("session data", call.session_data_keys.join(", ")) : null,
  );
}

function tokenBars(call) {
  const ceiling = call.ceiling_tokens || Math.max(call.budget_tokens, call.total_tokens, 1);
  const share = (n) => `${Math.min(100, (100 * n) / ceiling).toFixed(2)}%`;
  const marker = () => {
    const m = h("span", { class: "budget-marker", testid: "budget-marker", title: `budget ${num(call.budget_tokens)}` });
    m.style.left = share(call.budget_tokens);
    return m;
  };
  const rows = (call.sections || []).map((s) => {
    const fill = h("span", { class: `bar-fill sec-bg-${cssName(s.section)}${s.tokens ? " nonzero" : ""}` });
    fill.style.width = share(s.tokens);
    return h(
      "div",
      { class: "bar-row", testid: "section-bar", dataset: { section: s.section, tokens: String(s.tokens) } },
      h("span", { class: "bar-label" }, h("span", { class: `swatch sec-bg-${cssName(s.section)}` }), SECTION_LABELS[s.section] || s.section),
      h("span", { class: "bar-track" }, fill, marker()),
      h("span", { class: "bar-value" }, `${num(s.tokens)}`, h("span", { class: "muted" }, ` · ${pct(s.tokens, call.budget_tokens)} of budget`)),
    );
  });
  const stacked = h("span", { class: "bar-track stacked" });
  for (const s of call.sections || []) {
    if (!s.tokens) continue;
    const seg = h("span", { class: `bar-seg sec-bg-${cssName(s.section)}`, title: `${SECTION_LABELS[s.section] || s.section}: ${num(s.tokens)}` });
    seg.style.width = share(s.tokens);
    stacked.append(seg);
  }
  if (call.reply_priming_tokens) {
    const seg = h("span", { class: "bar-seg priming", title: `reply priming: ${num(call.reply_priming_tokens)}` });
    seg.style.width = share(call.reply_priming_tokens);
    stacked.append(seg);
  }
  stacked.append(marker());
  return h(
    "div",
    { class: "block", testid: "token-bars" },
    h(
      "h3",
      {},
      "Tokens ",
      h(
        "span",
        { class: "muted small", testid: "token-totals" },
        `${num(call.total_tokens)} of budget ${num(call.budget_tokens)} · ceiling ${num(call.ceiling_tokens)}` +
          (call.reply_priming_tokens ? ` · reply priming ${num(call.reply_priming_tokens)}` : ""),
      ),
      call.over_budget ? chip("over budget", "over", { testid: "over-budget" }) : null,
    ),
    h(
      "div",
      { class: "bars" },
      h(
        "div",
        { class: "bar-row total", testid: "total-bar" },
        h("span", { class: "bar-label" }, h("strong", {}, "total")),
        stacked,
        h("span", { class: "bar-value" }, `${num(call.total_tokens)}`, h("span", { class: "muted" }, ` · ${pct(call.total_tokens, call.budget_tokens)} of budget`)),
      ),
      rows,
    ),
    h(
      "p",
      { class: "legend small muted" },
      "Bar width: tokens against the ceiling (the whole track). ",
      h("span", { class: "marker-sample" }),
      " the budget.",
    ),
  );
}

function fateStrip(call) {
  const runs = call.fates || [];
  const total = runs.length ? runs[runs.length - 1].to_seq - runs[0].from_seq + 1 : 0;
  const strip = h("div", { class: "fate-strip", testid: "fate-strip" });
  for (const run of runs) {
    const n = run.to_seq - run.from_seq + 1;
    const seg = h(
      "span",
      { class: `fate-seg fate-${cssName(run.fate)}`, testid: "fate-run", title: `seq ${span(run.from_seq, run.to_seq)}: ${run.fate}`, dataset: { fate: run.fate } },
      n / total > 0.06 ? `${span(run.from_seq, run.to_seq)} ${run.fate}` : "",
    );
    seg.style.width = `${((100 * n) / total).toFixed(2)}%`;
    strip.append(seg);
  }
  return strip;
}

function recalled(call) {
  const episodes = call.recalled_episodes || [];
  const memories = call.recalled_memories || [];
  const yesNo = (v) => chip(v ? "rendered" : "not rendered", v ? "yes" : "no");
  return h(
    "div",
    { class: "block recalled" },
    h("h3", {}, "Recalled episodes ", h("span", { class: "muted small" }, `${episodes.length}`)),
    episodes.length
      ? h(
          "table",
          { class: "list compact" },
          h("thead", {}, h("tr", {}, h("th", {}, "Episode"), h("th", { class: "num" }, "Score"), h("th", {}, "Ended"), h("th", {}, ""))),
          h(
            "tbody",
            {},
            episodes.map((e) =>
              h(
                "tr",
                { testid: "recalled-episode", dataset: { rendered: String(!!e.rendered) } },
                h("td", {}, link(episodeHref(e.episode_id), e.episode_id, { class: "id" })),
                h("td", { class: "num" }, typeof e.score === "number" ? e.score.toFixed(3) : "—"),
                h("td", {}, time(e.end_time)),
                h("td", {}, yesNo(e.rendered)),
              ),
            ),
          ),
        )
      : h("p", { class: "muted small" }, "None."),
    h("h3", {}, "Recalled memories ", h("span", { class: "muted small" }, `${memories.length}`)),
    memories.length
      ? h(
          "table",
          { class: "list compact" },
          h("thead", {}, h("tr", {}, h("th", {}, "Memory"), h("th", { class: "num" }, "Score"), h("th", {}, ""), h("th", {}, ""))),
          h(
            "tbody",
            {},
            memories.map((m) =>
              h(
                "tr",
                { testid: "recalled-memory", dataset: { rendered: String(!!m.rendered) } },
                h("td", { class: "id" }, m.memory_id),
                h("td", { class: "num" }, typeof m.score === "number" ? m.score.toFixed(3) : "—"),
                h("td", {}, yesNo(m.rendered)),
                h("td", {}, m.pending ? chip("pending (this episode)", "pending") : ""),
              ),
            ),
          ),
        )
      : h("p", { class: "muted small" }, "None."),
  );
}

// --- start -------------------------------------------------------------------------------------

function init() {
  document.querySelector('[data-testid="forget-key"]').addEventListener("click", () => {
    askForKey("");
  });
  window.addEventListener("hashchange", route);
  start();
}

init();
