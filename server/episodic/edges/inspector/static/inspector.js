// Episodic context inspector: a read-only page over the server's /api/... JSON. This module
// starts it: the key prompt, the session, and the route from the URL's hash to a view.
//
// Rules every module keeps (the page runs under a strict Content-Security-Policy and shows
// whatever agents and users wrote):
// - data only ever reaches the DOM through textContent / text nodes (dom.js's h());
//   never innerHTML, outerHTML, insertAdjacentHTML or document.write;
// - no inline styles in markup: classes from inspector.css, and CSSOM (dom.js's styled())
//   for the sizes of bars only;
// - the API key lives in sessionStorage and in the Authorization header, never in a URL.

import { ApiError, api, errorBox, forgetKey, showError, storeKey, whenKeyRefused } from "./api.js";
import { h, link, loading } from "./dom.js";
import { AGENTS_HREF, parseRoute } from "./routes.js";
import { currentView, navigate, untilNextNavigation } from "./navigation.js";
import { mainArea, onKeyButton, setCrumbs, setTitle, showSession } from "./page.js";
import { showAgents, showEpisodes, showUsers } from "./lists.js";
import { EpisodeView } from "./episode.js";

let session = null; // GET /api/session: the key's tenant
let askingKey = false;

// --- the key ---------------------------------------------------------------------------------

function askForKey(message) {
  if (askingKey) return;
  askingKey = true;
  navigate(null);
  session = null;
  forgetKey();
  showSession(null);
  setCrumbs([{ label: "API key" }]);
  setTitle("API key");
  showKeyForm(message);
}

function showKeyForm(message) {
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
  const showProblem = (text) => {
    problem.textContent = text;
    problem.hidden = false;
  };
  const submit = (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) {
      showProblem("Enter a key.");
    } else if (!storeKey(key)) {
      showProblem("This browser does not allow session storage; the inspector needs it for the key.");
    } else {
      askingKey = false;
      start();
    }
  };
  mainArea().replaceChildren(
    h(
      "form",
      { class: "key-form card", testid: "key-form", novalidate: true, onsubmit: submit },
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
    ),
  );
  input.focus();
}

// --- the session and the routes --------------------------------------------------------------

async function start() {
  navigate(null);
  const current = untilNextNavigation();
  mainArea().replaceChildren(loading("Connecting…"));
  try {
    session = await api("/api/session");
  } catch (error) {
    if (current()) showError(mainArea(), error, "session");
    return;
  }
  if (!current()) return;
  showSession(session);
  route();
}

function route() {
  if (askingKey || !session) return;
  const target = parseRoute(location.hash);
  if (target.page === "episode") showEpisode(target);
  else if (target.page === "unknown") showUnknownPage();
  else showList(target);
}

function showList(target) {
  navigate(target);
  if (target.page === "agents") showAgents();
  else if (target.page === "users") showUsers(target.agentId);
  else showEpisodes(target.agentId, target.userId);
}

// Moving between calls of the episode on screen keeps its page; another episode opens anew.
function showEpisode({ episodeId, callId, tab }) {
  const view = currentView();
  if (view instanceof EpisodeView && view.episodeId === episodeId) {
    view.select(callId, tab);
    return;
  }
  const episode = new EpisodeView(episodeId);
  navigate(episode);
  episode.open(callId, tab);
}

function showUnknownPage() {
  navigate(null);
  setTitle("Not found");
  setCrumbs([{ label: "Agents", href: AGENTS_HREF }, { label: "?" }]);
  mainArea().replaceChildren(
    errorBox(new ApiError(404, { error: { message: "no such page in the inspector" } })),
    h("p", {}, link(AGENTS_HREF, "Back to the agents")),
  );
}

// --- start -------------------------------------------------------------------------------------

whenKeyRefused((keyWasSent) => askForKey(keyWasSent ? "The server refused this key. Enter another one." : ""));
onKeyButton(() => askForKey(""));
window.addEventListener("hashchange", route);
start();
