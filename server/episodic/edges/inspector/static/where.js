// "Where did it go?": finds the log messages that contain a phrase, follows the phrase through
// what every model call of the episode rendered (verbatim, the summary's text, the passages
// recalled from earlier in this conversation, knowledge, known facts, past conversations), and
// says at which call and why the model stopped seeing it, and at which call it came back.

import { api, showError } from "./api.js";
import { h, link, loading } from "./dom.js";
import { cssName, formatTime } from "./format.js";
import { FATE_LABELS, FATE_SHORT, fateLabel, roleChip, sectionLabel } from "./chips.js";
import { callHref, encoded } from "./routes.js";
import { logButton } from "./log.js";

const DROP_REASONS = {
  window: "pushed out by the sliding window (pruned: the history budget no longer held it)",
  compaction: "compacted into a summary that does not say it",
  recompaction: "the summary said it until this call's new summary left it out",
  earlier: "no longer recalled from earlier in this conversation",
  stub: "tool result replaced by a short stub",
  knowledge: "no longer among the rendered knowledge",
  known_facts: "no longer among the rendered known facts",
  recall: "no longer among the rendered past conversations",
  context: "no longer in the system prompt or the user message",
};

// One or two characters a section, for the "rendered in" row.
const SECTION_SHORT = {
  system: "sys",
  knowledge: "Kn",
  known_facts: "KF",
  past_conversations: "PC",
  summary: "Σ",
  earlier: "E",
  history: "H",
  user_message: "U",
};

export class WherePanel {
  // episode: { episodeId, isShown(), callNumber(callId), revealInLog(seq), markPhrase(answer) }
  // (see episode.js).
  constructor(episode) {
    this.episode = episode;
    this.traces = 0; // bumped per phrase: only the newest one's answer is shown
    this.input = h("input", {
      type: "search",
      id: "where-input",
      testid: "where-input",
      placeholder: "a phrase from the conversation, e.g. “my cat is called”",
      autocomplete: "off",
      spellcheck: "false",
    });
    this.result = h("div", { class: "where-result", testid: "where-result", hidden: true });
    const form = h(
      "form",
      { class: "where-form", testid: "where-form", role: "search", onsubmit: (event) => this.submit(event) },
      h("label", { for: "where-input", class: "where-label" }, "Where did it go?"),
      this.input,
      h("button", { type: "submit", class: "primary", testid: "where-submit" }, "Trace phrase"),
    );
    this.elements = [form, this.result];
  }

  submit(event) {
    event.preventDefault();
    this.trace(this.input.value);
  }

  async trace(phrase) {
    this.result.hidden = false;
    this.result.replaceChildren(loading("Tracing the phrase…"));
    const trace = ++this.traces;
    const current = () => this.episode.isShown() && trace === this.traces;
    let answer;
    try {
      answer = await api(encoded`/api/episodes/${this.episode.episodeId}/where?phrase=${phrase}`);
    } catch (error) {
      if (!current()) return;
      this.episode.markPhrase(null);
      showError(this.result, error, "where did it go");
      return;
    }
    if (!current()) return;
    this.episode.markPhrase(answer); // the log's badges say what the trace says
    this.result.replaceChildren(...traceNodes(answer, this.episode));
  }
}

// The answer: a summary, then (when the phrase was found) each message's verdict and a
// message × call matrix of fates.
function traceNodes(answer, episode) {
  const calls = answer.calls || [];
  const callLink = callLinker(calls, episode);
  const nodes = [traceSummary(answer, calls), phraseVerdict(answer, calls, callLink)].flat();
  if (calls.length) nodes.push(presenceRow(calls, callLink));
  if (!answer.messages.length) return nodes;
  const drops = new Map((answer.dropped || []).map((d) => [d.seq, d]));
  const returns = new Map((answer.returned || []).map((r) => [r.seq, r]));
  nodes.push(
    h(
      "ol",
      { class: "where-messages" },
      answer.messages.map((m) => tracedMessage(m, drops.get(m.seq), returns.get(m.seq), calls, callLink, episode)),
    ),
  );
  if (calls.length) nodes.push(fateMatrix(answer.messages, calls, callLink));
  return nodes;
}

// Links to the traced calls, numbered as in the model-call list; the trace may hold only the
// newest calls, so a call the list has not loaded is numbered by its place in the trace.
function callLinker(calls, episode) {
  const numbers = new Map(calls.map((c, i) => [c.model_call_id, episode.callNumber(c.model_call_id) || `#${i + 1}`]));
  return (id) => link(callHref(episode.episodeId, id), numbers.get(id) || "?", { class: "call-ref" });
}

function traceSummary(answer, calls) {
  const found = answer.messages.length;
  return h(
    "p",
    { class: "where-summary", testid: "where-summary" },
    found
      ? `${found}${answer.truncated ? "+" : ""} log message${found === 1 ? " contains" : "s contain"} `
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
}

// The phrase as a whole: where the newest call rendered it, or the first call that rendered it
// nowhere after one that did (and the first call after that which rendered it again).
function phraseVerdict(answer, calls, callLink) {
  if (!calls.length) return h("p", { class: "muted", testid: "phrase-verdict" }, "No model call was built yet.");
  const gone = answer.gone;
  const last = calls[calls.length - 1].present || [];
  if (gone) {
    const seenIn = gone.last_seen_in.map(sectionLabel).join(", ");
    const nodes = [
      h(
        "p",
        { class: `dropped reason-${cssName(gone.reason)}`, testid: "phrase-gone", dataset: { reason: gone.reason } },
        h("strong", {}, "The model stopped seeing it"),
        " at model call ",
        callLink(gone.model_call_id),
        ` (${formatTime(gone.create_time)}): `,
        h("span", { class: "reason" }, `${gone.reason} — ${DROP_REASONS[gone.reason] || ""}`),
        `; the call before rendered it in ${seenIn}.`,
      ),
    ];
    const back = answer.back;
    if (back) {
      nodes.push(
        h(
          "p",
          { class: "kept returned", testid: "phrase-back", dataset: { present: back.present.join(" ") } },
          h("strong", {}, "It came back"),
          " at model call ",
          callLink(back.model_call_id),
          ` (${formatTime(back.create_time)}): `,
          h("span", { class: "reason" }, backReason(back.present)),
          `. The latest model call renders it ${last.length ? `in ${last.map(sectionLabel).join(", ")}` : "nowhere"}.`,
        ),
      );
    }
    return nodes;
  }
  if (last.length) {
    return h(
      "p",
      { class: "kept", testid: "phrase-verdict" },
      `The latest model call renders it in ${last.map(sectionLabel).join(", ")}.`,
    );
  }
  return h("p", { class: "muted", testid: "phrase-verdict" }, "No model call rendered it.");
}

// One row: the sections whose rendered text held the phrase, call by call.
function presenceRow(calls, callLink) {
  return h(
    "div",
    { class: "block" },
    h("h3", {}, "Rendered in"),
    h(
      "div",
      { class: "matrix-wrap" },
      h(
        "table",
        { class: "matrix", testid: "presence-matrix" },
        h("thead", {}, h("tr", {}, h("th", { class: "corner" }, "call"), calls.map((c) => h("th", { title: callTitle(c) }, callLink(c.model_call_id))))),
        h(
          "tbody",
          {},
          h(
            "tr",
            {},
            h("th", {}, "phrase"),
            calls.map((c) => {
              const present = c.present || [];
              return h(
                "td",
                {
                  class: `cell ${present.length ? "present" : "absent"}`,
                  title: present.length ? present.map(sectionLabel).join(", ") : "not rendered",
                  testid: "presence-cell",
                  dataset: { present: present.join(" ") },
                },
                present.map((s) => SECTION_SHORT[s] || s).join(" "),
              );
            }),
          ),
        ),
      ),
    ),
    h(
      "p",
      { class: "legend small" },
      Object.entries(SECTION_SHORT).map(([section, short]) =>
        h("span", { class: "legend-item" }, h("span", { class: "cell present" }, short), ` ${sectionLabel(section)}`),
      ),
    ),
  );
}

// How a phrase came back: through the passages recalled from earlier in this conversation, if
// they hold it, else the sections that do.
function backReason(present) {
  if (present.includes("earlier")) return `${FATE_LABELS.earlier} (“[Earlier in this conversation]”)`;
  return `rendered in ${present.map(sectionLabel).join(", ")}`;
}

function tracedMessage(m, drop, back, calls, callLink, episode) {
  return h(
    "li",
    { class: "where-message", testid: "where-message", dataset: { seq: String(m.seq) } },
    h(
      "div",
      { class: "msg-head" },
      logButton(m.seq, episode.revealInLog, { cls: "link-button" }),
      roleChip(m.role),
      h("span", { class: "preview" }, m.preview),
    ),
    drop ? droppedVerdict(drop, calls, callLink) : keptVerdict(m, calls),
    back ? returnedVerdict(back, calls, callLink) : null,
    drop ? latestFate(m, calls) : null,
  );
}

// A dropped message the model saw again: the first call after its drop that showed its phrase.
function returnedVerdict(back, calls, callLink) {
  const at = calls.find((c) => c.model_call_id === back.model_call_id);
  const userMessage = at && at.user_message_seq ? `, user msg #${at.user_message_seq}` : "";
  return h(
    "div",
    { class: `kept returned fate-${cssName(back.fate)}`, testid: "returned", dataset: { fate: back.fate } },
    h("strong", {}, "Came back"),
    " at model call ",
    callLink(back.model_call_id),
    ` (${formatTime(back.create_time)}${userMessage}): `,
    h("span", { class: "reason", testid: "returned-fate" }, fateLabel(back.fate)),
  );
}

// After a drop (and a return, if any): how the message stands in the latest model call.
function latestFate(m, calls) {
  const fates = calls.map((c) => tracedFate(c, m.seq));
  const lastFate = fates[fates.length - 1];
  return h(
    "div",
    { class: PRESENT.includes(lastFate) ? "kept" : "muted", testid: "latest-fate", dataset: { fate: lastFate } },
    `In the latest model call: ${fateLabel(lastFate) || "absent"}.`,
  );
}

function droppedVerdict(drop, calls, callLink) {
  const at = calls.find((c) => c.model_call_id === drop.model_call_id);
  const userMessage = at && at.user_message_seq ? `, user msg #${at.user_message_seq}` : "";
  return h(
    "div",
    { class: `dropped reason-${cssName(drop.reason)}`, testid: "dropped", dataset: { reason: drop.reason } },
    h("strong", {}, "Dropped out"),
    " at model call ",
    callLink(drop.model_call_id),
    ` (${formatTime(drop.create_time)}${userMessage}): `,
    h("span", { class: "reason", testid: "dropped-reason" }, `${drop.reason} — ${DROP_REASONS[drop.reason] || ""}`),
  );
}

// A message that did not drop out: how it stands in the latest model call.
function keptVerdict(m, calls) {
  if (!calls.length) return h("div", { class: "muted", testid: "not-dropped" }, "No model call was built yet.");
  const fates = calls.map((c) => tracedFate(c, m.seq));
  const lastFate = fates[fates.length - 1];
  if (lastFate === "verbatim") {
    return h("div", { class: "kept", testid: "not-dropped" }, "Still rendered verbatim in the latest model call.");
  }
  if (lastFate === "summarized") {
    return h("div", { class: "kept", testid: "not-dropped" }, "The latest model call's summary still says it.");
  }
  if (lastFate === "earlier") {
    return h(
      "div",
      { class: "kept", testid: "not-dropped" },
      "The latest model call recalls it from earlier in this conversation.",
    );
  }
  return h(
    "div",
    { class: "muted", testid: "not-dropped" },
    fates.some((f) => PRESENT.includes(f))
      ? `In the latest model call: ${fateLabel(lastFate) || "absent"}.`
      : "The model never saw it as a message.",
  );
}

// The fates of a message whose phrase the model saw (domain/inspection.py, _PRESENT).
const PRESENT = ["verbatim", "earlier", "summarized"];

function fateMatrix(messages, calls, callLink) {
  const head = h(
    "tr",
    {},
    h("th", { class: "corner" }, "log msg \\ call"),
    calls.map((c) => h("th", { title: callTitle(c) }, callLink(c.model_call_id))),
  );
  const rows = messages.map((m) =>
    h(
      "tr",
      {},
      h("th", {}, `#${m.seq}`),
      calls.map((c) => fateCell(tracedFate(c, m.seq))),
    ),
  );
  return h(
    "div",
    { class: "block" },
    h("h3", {}, "Per model call"),
    h(
      "div",
      { class: "matrix-wrap" },
      h("table", { class: "matrix", testid: "where-matrix" }, h("thead", {}, head), h("tbody", {}, rows)),
    ),
    fateLegend(),
  );
}

function callTitle(c) {
  return `${formatTime(c.create_time)}${c.user_message_seq ? ` · user msg #${c.user_message_seq}` : ""}`;
}

function fateCell(fate) {
  return h(
    "td",
    {
      class: `cell fate-${cssName(fate || "none")}`,
      title: FATE_LABELS[fate] || "absent",
      testid: "where-cell",
      dataset: { fate },
    },
    FATE_SHORT[fate] || "",
  );
}

function fateLegend() {
  return h(
    "p",
    { class: "legend small" },
    Object.keys(FATE_SHORT).map((f) =>
      h("span", { class: "legend-item" }, h("span", { class: `cell fate-${f}` }, FATE_SHORT[f]), ` ${FATE_LABELS[f]}`),
    ),
  );
}

// A traced call lists the fate of each traced message it covered ("" when it covered none).
function tracedFate(tracedCall, seq) {
  return (tracedCall.fates.find((f) => f.seq === seq) || {}).fate || "";
}
