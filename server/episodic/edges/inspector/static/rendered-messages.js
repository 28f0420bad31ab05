// A model call's "Rendered messages": exactly what the model was shown, in order, each with
// its section, the log message it came from, and what became of that message. Long contexts
// come in pages ("More messages").

import { api, showError } from "./api.js";
import { chip, h, loading, pre } from "./dom.js";
import { cssName, formatNumber, prettyJson, seqRange } from "./format.js";
import { fateChip, roleChip, sectionChip } from "./chips.js";
import { encoded } from "./routes.js";
import { logButton } from "./log.js";

// episode: { revealInLog(seq), untilCallChanges() } (see episode.js).
export function renderedMessages(call, episode) {
  const list = h("ol", { class: "rendered", testid: "rendered-messages" });
  const status = h("div", { class: "table-status" });
  const more = h("button", { type: "button", testid: "more-messages", hidden: true }, "More messages");
  let offset = call.next_offset; // null or undefined: all shown

  const add = (messages) => {
    for (const m of messages) list.append(renderedMessage(m, call, episode));
    more.hidden = offset === null || offset === undefined;
    const shown = `${formatNumber(list.childElementCount)} of ${formatNumber(call.message_count)} shown`;
    more.textContent = `More messages (${shown})`;
  };

  more.addEventListener("click", async () => {
    more.disabled = true;
    status.replaceChildren(loading());
    const current = episode.untilCallChanges();
    let page;
    try {
      page = (await api(encoded`/api/model-calls/${call.model_call_id}?offset=${offset}`)).model_call;
    } catch (error) {
      if (current()) showError(status, error, "more messages");
      more.disabled = false;
      return;
    }
    if (!current()) return;
    status.replaceChildren();
    more.disabled = false;
    offset = page.next_offset;
    // kept on the call, so that coming back to its tab shows them without loading again
    call.messages = [...call.messages, ...page.messages];
    call.next_offset = page.next_offset;
    add(page.messages);
  });

  add(call.messages);
  return h(
    "div",
    { class: "block" },
    h(
      "h3",
      {},
      "Rendered messages ",
      h("span", { class: "muted small", testid: "message-count" }, `${formatNumber(call.message_count)} in all`),
    ),
    list,
    status,
    more,
  );
}

function renderedMessage(m, call, episode) {
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
      roleChip(m.role),
      m.seq ? logButton(m.seq, episode.revealInLog, { title: "show in the log" }) : null,
      messageFate(m, call),
      h("span", { class: "muted small" }, `${formatNumber(m.tokens)} tok`),
      m.tool_call_id ? h("span", { class: "muted small" }, `result of ${m.tool_call_id}`) : null,
    ),
    m.content ? pre(m.content) : null,
    (m.tool_calls || []).map(toolCall),
  );
}

// The summary stands for a span of the log, the earlier section for the passages it recalled,
// a log message is there verbatim or stubbed, and a message without a seq did not come from
// the log at all.
function messageFate(m, call) {
  const props = { testid: "message-fate" };
  if (m.section === "summary" && call.summary_span) {
    const { from_seq: from, to_seq: to } = call.summary_span;
    return chip(`summary of ${seqRange(from, to)}`, "fate fate-summarized", props);
  }
  if (m.section === "earlier") {
    const shown = (call.earlier_passages || []).filter((p) => p.fate !== "dropped");
    const cut = shown.some((p) => p.fate === "cut");
    const text = shown.map((p) => `${seqList(p.seqs)}${p.fate === "cut" ? " (cut)" : ""}`).join(", ");
    return chip(`recalled from earlier: ${text || "—"}`, `fate fate-${cut ? "earlier_cut" : "earlier"}`, props);
  }
  if (m.seq) return fateChip(m.stubbed ? "stubbed" : "verbatim", props);
  return chip("not a log message", "fate fate-context", props);
}

// A passage's seqs as ranges: "1–3, 7".
function seqList(seqs) {
  const ranges = [];
  for (const seq of [...seqs].sort((x, y) => x - y)) {
    const last = ranges[ranges.length - 1];
    if (last && seq === last[1] + 1) last[1] = seq;
    else ranges.push([seq, seq]);
  }
  return ranges.map(([from, to]) => seqRange(from, to)).join(", ");
}

function toolCall(tc) {
  return h(
    "details",
    { class: "tool tool-call" },
    h("summary", {}, "→ ", h("strong", {}, tc.tool_name), h("span", { class: "muted small" }, ` ${tc.tool_call_id}`)),
    pre(prettyJson(tc.input), "content json"),
  );
}
