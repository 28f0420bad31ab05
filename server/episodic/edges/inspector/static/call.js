// One model call, once selected: its facts, then either what the model was shown ("Rendered
// context": tokens, what happened to the log, what was recalled, the messages) or what
// changed since the call before ("Diff with the previous call").

import { chip, fact, h, link, styled, timestamp } from "./dom.js";
import { cssName, formatNumber, plural, seqRange } from "./format.js";
import { compactionChip, messageFateLabel } from "./chips.js";
import { callHref, episodeHref } from "./routes.js";
import { tokenBars } from "./token-bars.js";
import { renderedMessages } from "./rendered-messages.js";
import { showDiff } from "./call-diff.js";
import { whyRecalled } from "./why-recalled.js";

// Fills `container` with the call on `tab` ("context" or "diff"). episode: what the call's
// page needs from the episode around it (see episode.js).
export function showModelCall(container, call, tab, episode) {
  const body = h("div", { class: "tab-body" });
  container.replaceChildren(callTitle(call, episode), callFacts(call), callTabs(call, tab, episode.episodeId), body);
  if (tab === "diff") showDiff(body, call, episode);
  else body.append(tokenBars(call), logFates(call), recalled(call, episode), renderedMessages(call, episode));
}

function callTitle(call, episode) {
  return h(
    "h2",
    { class: "call-title" },
    `Model call ${episode.callNumber(call.model_call_id)} `,
    h("span", { class: "id small", testid: "call-id" }, call.model_call_id),
  );
}

function callTabs(call, tab, episodeId) {
  const tabLink = (name, text) =>
    link(callHref(episodeId, call.model_call_id, name === "context" ? "" : name), text, {
      class: `tab${tab === name ? " active" : ""}`,
      testid: `tab-${name}`,
    });
  return h(
    "nav",
    { class: "tabs", testid: "call-tabs" },
    tabLink("context", "Rendered context"),
    tabLink("diff", "Diff with the previous call"),
  );
}

function callFacts(call) {
  return h(
    "dl",
    { class: "facts", testid: "call-facts" },
    fact("created", timestamp(call.create_time)),
    fact("model", `${call.model || "—"} (${call.token_encoding || "?"})`),
    fact("user message", call.user_message_seq ? `#${call.user_message_seq}` : "not appended to the log"),
    fact("compaction", compactionChip(call.compaction, { testid: "compaction" })),
    fact("request id", call.request_id || "—"),
    fact("trace", trace(call)),
    fact("reply", reply(call)),
    call.session_data_keys && call.session_data_keys.length
      ? fact("session data", call.session_data_keys.join(", "))
      : null,
  );
}

// A link when the server knows a trace viewer (--inspector-trace-url), else the bare id.
function trace(call) {
  const url = safeHttpUrl(call.trace_url || "");
  if (url) {
    const props = { target: "_blank", rel: "noopener noreferrer", testid: "trace-link", class: "id" };
    return link(url, call.trace_id, props);
  }
  if (call.trace_id) return h("span", { class: "id", testid: "trace-id" }, call.trace_id);
  return "—";
}

// Only http(s): the trace URL comes from configuration, and must never be a javascript: link.
function safeHttpUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : "";
  } catch {
    return "";
  }
}

function reply(call) {
  const r = call.reply;
  if (!r) return "not recorded";
  return (
    `${formatNumber(r.input_tokens)} in / ${formatNumber(r.output_tokens)} out, ${formatNumber(r.latency_ms)} ms` +
    (r.assistant_message_seq ? `, logged as #${r.assistant_message_seq}` : "")
  );
}

// What happened to the log before this call: runs of seqs by fate, in words and as a strip.
function logFates(call) {
  return h(
    "div",
    { class: "block" },
    h("h3", {}, "What happened to the log"),
    h("p", { class: "fates-text", testid: "fates" }, fatesText(call)),
    fateStrip(call),
    h("p", { class: "muted small" }, fateCounts(call)),
  );
}

function fatesText(call) {
  const runs = call.fates || [];
  if (!runs.length) return "No log messages were before this call.";
  const parts = runs.map((run) => {
    let text = `${seqRange(run.from_seq, run.to_seq)} ${runLabel(run.fate)}`;
    if (run.fate === "summarized" && call.summary_span) {
      text += ` (summary span ${seqRange(call.summary_span.from_seq, call.summary_span.to_seq)})`;
    }
    return text;
  });
  return `seq ${parts.join(", ")}`;
}

// A run's fate in words: the server's name, but for the passages recalled from earlier.
function runLabel(fate) {
  return fate === "earlier" || fate === "earlier_cut" ? messageFateLabel(fate) : fate;
}

function fateStrip(call) {
  const runs = call.fates || [];
  const total = runs.length ? runs[runs.length - 1].to_seq - runs[0].from_seq + 1 : 0;
  const strip = h("div", { class: "fate-strip", testid: "fate-strip" });
  for (const run of runs) {
    const n = run.to_seq - run.from_seq + 1;
    const label = `${seqRange(run.from_seq, run.to_seq)} ${runLabel(run.fate)}`;
    const segment = h(
      "span",
      {
        class: `fate-seg fate-${cssName(run.fate)}`,
        testid: "fate-run",
        title: `seq ${seqRange(run.from_seq, run.to_seq)}: ${runLabel(run.fate)}`,
        dataset: { fate: run.fate },
      },
      n / total > 0.06 ? label : "", // a narrower segment has no room for its label
    );
    strip.append(styled(segment, { width: `${((100 * n) / total).toFixed(2)}%` }));
  }
  return strip;
}

function fateCounts(call) {
  return (
    `${plural(call.messages_pruned, "message")} pruned by the window · ` +
    `${plural(call.tool_results_stubbed, "tool result")} stubbed · ` +
    `${plural(call.messages_summarized, "message")} summarized` +
    (call.history_span ? ` · history span ${seqRange(call.history_span.from_seq, call.history_span.to_seq)}` : "")
  );
}

// The past episodes, memories and knowledge the call's retrieval found (and the caller's
// knowledge items), the passages of this episode it recalled from earlier in the
// conversation, and whether each made it in.
function recalled(call, episode) {
  const episodes = call.recalled_episodes || [];
  const memories = call.recalled_memories || [];
  const knowledge = call.knowledge || [];
  const passages = call.earlier_passages || [];
  return h(
    "div",
    { class: "block recalled" },
    recalledTable("Knowledge", knowledge, [th("Source"), th("Score", "num"), th("Tokens", "num"), th("")], (k) =>
      h(
        "tr",
        { testid: "rendered-knowledge", dataset: { fate: k.fate } },
        h(
          "td",
          { class: "id" },
          k.document_href
            ? link(k.document_href, `${k.document_id} #${k.chunk_index}`, { target: "_blank" })
            : `${k.source_id || "(no source id)"} (caller)`,
        ),
        h("td", { class: "num" }, score(k)),
        h("td", { class: "num" }, String(k.tokens)),
        h("td", {}, chip(k.fate, k.fate === "whole" || k.fate === "trimmed" ? "yes" : "no")),
      ),
    ),
    recalledTable("Recalled episodes", episodes, [th("Episode"), th("Score", "num"), th("Ended"), th("")], (e) =>
      h(
        "tr",
        { testid: "recalled-episode", dataset: { rendered: String(!!e.rendered) } },
        h("td", {}, link(episodeHref(e.episode_id), e.episode_id, { class: "id" })),
        h("td", { class: "num" }, score(e)),
        h("td", {}, timestamp(e.end_time)),
        h("td", {}, renderedChip(e.rendered)),
      ),
    ),
    whyRecalled(call),
    recalledTable("Recalled memories", memories, [th("Memory"), th("Score", "num"), th(""), th("")], (m) =>
      h(
        "tr",
        { testid: "recalled-memory", dataset: { rendered: String(!!m.rendered) } },
        h("td", { class: "id" }, m.memory_id),
        h("td", { class: "num" }, score(m)),
        h("td", {}, renderedChip(m.rendered)),
        h("td", {}, m.pending ? chip("pending (this episode)", "pending") : ""),
      ),
    ),
    recalledTable(
      "Earlier in this conversation",
      passages,
      [th("Log messages"), th("Score", "num"), th("Found by"), th("")],
      (p) =>
        h(
          "tr",
          { testid: "earlier-passage", dataset: { fate: p.fate, seqs: p.seqs.join(" ") } },
          h(
            "td",
            { class: "passage-seqs" },
            "log ",
            p.seqs.map((seq) =>
              h(
                "button",
                { type: "button", class: "link-button small", title: "show in the log", onclick: () => episode.revealInLog(seq) },
                `#${seq}`,
              ),
            ),
          ),
          h("td", { class: "num" }, score(p)),
          h("td", { class: "muted small" }, (p.signals || []).join(", ") || "—"),
          h("td", {}, chip(PASSAGE_FATES[p.fate] || p.fate, `passage-fate passage-${cssName(p.fate)}`)),
        ),
    ),
  );
}

// What became of a passage recalled from earlier in this conversation.
const PASSAGE_FATES = {
  whole: "rendered whole",
  cut: "rendered cut",
  dropped: "dropped: no room",
};

// A heading with the count, then a table of the items or "None.".
function recalledTable(title, items, headings, row) {
  return [
    h("h3", {}, `${title} `, h("span", { class: "muted small" }, `${items.length}`)),
    items.length
      ? h(
          "table",
          { class: "list compact" },
          h("thead", {}, h("tr", {}, headings)),
          h("tbody", {}, items.map(row)),
        )
      : h("p", { class: "muted small" }, "None."),
  ];
}

function th(text, cls = null) {
  return h("th", { class: cls }, text);
}

function score(item) {
  return typeof item.score === "number" ? item.score.toFixed(3) : "—";
}

function renderedChip(rendered) {
  return chip(rendered ? "rendered" : "not rendered", rendered ? "yes" : "no");
}
