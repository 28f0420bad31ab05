// The episode's log pane: its messages oldest at the top, loaded a page at a time from the
// newest ("Earlier messages" prepends), each badged with its fate in the selected model call:
// what the call did with it or, for a message holding the phrase "Where did it go?" traced,
// what the model saw of the phrase through it (the trace's verdict for that call, word for word).

import { api, showError } from "./api.js";
import { emptyNote, h, loading } from "./dom.js";
import { cssName } from "./format.js";
import { fateLabel, messageFateLabel } from "./chips.js";
import { encoded } from "./routes.js";
import { logMessage } from "./log-message.js";

const REVEAL_PAGES_MAX = 200; // pages loaded at most to reach a message

export class LogPane {
  // isShown(): whether the episode view is still on screen (else answers are dropped).
  constructor(episodeId, isShown) {
    this.episodeId = episodeId;
    this.isShown = isShown;
    this.messages = new Map(); // seq -> message, every loaded one
    this.results = new Map(); // tool_call_id -> the message carrying its result
    this.nextToken = "";
    this.markedCall = null; // the model call whose fates the badges show
    this.traced = null; // { phrase, fates: callId -> (seq -> fate) } of the last phrase traced
    this.list = h("ol", { class: "log", testid: "log" });
    this.earlier = h(
      "button",
      { type: "button", testid: "earlier-messages", hidden: true, onclick: () => this.loadEarlier() },
      "Earlier messages",
    );
    this.status = h("div", { class: "table-status" });
    this.element = h(
      "section",
      { class: "pane log-pane", testid: "log-pane" },
      h("h2", {}, "Log ", h("span", { class: "muted small" }, "oldest at the top")),
      this.earlier,
      this.status,
      this.list,
    );
  }

  // Loads the next page back in time; false when it could not.
  async loadEarlier() {
    this.earlier.disabled = true;
    this.status.replaceChildren(loading());
    let page;
    try {
      page = await api(encoded`/api/episodes/${this.episodeId}/messages?page_token=${this.nextToken}`);
    } catch (error) {
      if (this.isShown()) showError(this.status, error, "log");
      this.earlier.disabled = false;
      return false;
    }
    if (!this.isShown()) return false;
    this.status.replaceChildren();
    this.prepend([...page.messages].sort((x, y) => x.seq - y.seq));
    this.nextToken = page.next_page_token || "";
    this.earlier.hidden = !this.nextToken;
    this.earlier.disabled = false;
    if (!this.messages.size) this.status.replaceChildren(emptyNote("No messages yet."));
    if (this.markedCall) this.markFates(this.markedCall);
    return true;
  }

  // Older messages, oldest first; all are indexed before any is drawn, so that a tool call
  // finds its result on the same page.
  prepend(older) {
    for (const m of older) {
      this.messages.set(m.seq, m);
      if (m.tool_result && m.tool_result.tool_call_id) this.results.set(m.tool_result.tool_call_id, m);
    }
    const first = this.list.firstChild;
    const resultOf = (toolCallId) => this.results.get(toolCallId);
    for (const m of older) this.list.insertBefore(logMessage(m, resultOf), first);
  }

  // Badges every loaded message with its fate in `call` (null: clears them).
  markFates(call) {
    this.markedCall = call;
    const traced = call && this.traced ? this.traced.fates.get(call.model_call_id) : null;
    for (const li of this.list.children) {
      const seq = Number(li.dataset.seq);
      const phraseFate = traced ? traced.get(seq) || "" : "";
      const fate = phraseFate || fateIn(call, seq);
      const badge = li.querySelector('[data-testid="log-fate"]');
      li.dataset.fate = fate;
      li.dataset.phraseFate = phraseFate;
      badge.className = fate ? `log-fate chip fate fate-${cssName(fate)}` : "log-fate";
      badge.textContent = phraseFate ? fateLabel(phraseFate) : fate ? messageFateLabel(fate) : "";
      badge.title = phraseFate
        ? `“${this.traced.phrase}” in the selected model call, as “Where did it go?” says`
        : fate === "summarized"
          ? "inside the summary's span in the selected model call: trace a phrase to see whether the summary says it"
          : fate
            ? "in the selected model call"
            : "";
    }
  }

  // The fates a phrase trace found (null: none), shown on its messages' badges from now on.
  markPhrase(answer) {
    this.traced = answer
      ? {
          phrase: answer.phrase,
          fates: new Map((answer.calls || []).map((c) => [c.model_call_id, new Map(c.fates.map((f) => [f.seq, f.fate]))])),
        }
      : null;
    this.markFates(this.markedCall);
  }

  // Scrolls the log pane alone (not the page) to a loaded message, a third of the way down.
  scrollTo(seq) {
    const li = seq ? this.item(seq) : null;
    if (!li) return;
    const pane = this.element;
    pane.scrollTop += li.getBoundingClientRect().top - pane.getBoundingClientRect().top - pane.clientHeight / 3;
  }

  // Scrolls to a message, loading earlier pages as needed, and flashes it.
  async reveal(seq) {
    for (let pages = 0; !this.messages.has(seq) && this.nextToken && pages < REVEAL_PAGES_MAX; pages += 1) {
      if (!(await this.loadEarlier())) return;
    }
    const li = this.item(seq);
    if (!li) return;
    li.scrollIntoView({ block: "center" });
    li.classList.remove("flash");
    void li.offsetWidth; // restart the animation
    li.classList.add("flash");
  }

  item(seq) {
    return this.list.querySelector(`li[data-seq="${Number(seq)}"]`);
  }
}

// A "log #N" button that shows message N in the log pane.
export function logButton(seq, revealInLog, { cls = "link-button small", title = null } = {}) {
  return h("button", { type: "button", class: cls, title, onclick: () => revealInLog(seq) }, `log #${seq}`);
}

// A message's fate in `call`: from the call's runs, or "not yet written" when the message
// came after everything the call covered (its user message and its runs).
function fateIn(call, seq) {
  if (!call) return "";
  const fate = fateAt(call.fates, seq);
  if (fate) return fate;
  const lastRunEnd = call.fates && call.fates.length ? call.fates[call.fates.length - 1].to_seq : 0;
  return seq > Math.max(call.user_message_seq, lastRunEnd) ? "not_yet" : "";
}

function fateAt(runs, seq) {
  for (const run of runs || []) if (seq >= run.from_seq && seq <= run.to_seq) return run.fate;
  return "";
}
