// One message of the episode's log: its head (seq, role, time, tokens, and a badge for its
// fate in the selected model call), its content, and its tool calls and results.

import { chip, h, pre, timestamp } from "./dom.js";
import { cssName, formatNumber, prettyJson } from "./format.js";
import { roleChip } from "./chips.js";

// resultOf(toolCallId): the loaded log message carrying that call's result, if any.
export function logMessage(m, resultOf) {
  return h(
    "li",
    { class: `msg role-${cssName(m.role)}`, testid: "log-message", dataset: { seq: String(m.seq), role: m.role } },
    h(
      "div",
      { class: "msg-head" },
      h("span", { class: "seq", testid: "log-seq" }, `#${m.seq}`),
      roleChip(m.role),
      timestamp(m.create_time),
      h("span", { class: "muted small" }, `${formatNumber(m.tokens)} tok`),
      h("span", { class: "log-fate", testid: "log-fate" }),
      m.retract_time
        ? chip("retracted", "retracted", {
            title: `taken back at ${m.retract_time}: kept in the log, in no context since`,
            testid: "log-retracted",
          })
        : null,
    ),
    m.content ? pre(m.content) : null,
    (m.tool_calls || []).map((call) => toolCall(call, resultOf(call.tool_call_id))),
    m.tool_result ? toolResult(m.tool_result) : null,
  );
}

// A tool call opens onto its input and, when it is loaded, its result, so the pair reads together.
function toolCall(call, resultMessage) {
  const result = resultMessage && resultMessage.tool_result;
  return h(
    "details",
    { class: "tool tool-call", testid: "tool-call" },
    h(
      "summary",
      {},
      h("span", { class: "tool-arrow" }, "→ "),
      h("strong", { class: "tool-name" }, call.tool_name),
      h("span", { class: "muted small" }, ` ${call.tool_call_id}`),
      result ? resultBadges(result) : h("span", { class: "muted small" }, " · no result in the loaded log"),
    ),
    h("div", { class: "tool-label" }, "input"),
    pre(prettyJson(call.input), "content json"),
    result ? resultBody(result, resultMessage.seq) : null,
  );
}

function toolResult(result) {
  return h(
    "details",
    { class: "tool tool-result", testid: "tool-result" },
    h(
      "summary",
      {},
      h("span", { class: "tool-arrow" }, "← "),
      "result of ",
      h("span", { class: "small" }, result.tool_call_id),
      resultBadges(result),
    ),
    resultBody(result, 0),
  );
}

function resultBadges(result) {
  return [
    hasDuration(result) ? h("span", { class: "muted small" }, ` · ${duration(result)}`) : null,
    result.error ? chip("error", "error-chip") : null,
  ];
}

// seq: the log message the result came in (0: this one, so not worth naming).
function resultBody(result, seq) {
  return [
    h("div", { class: "tool-label" }, seq ? `output (log #${seq})` : "output"),
    pre(prettyJson(result.output), "content json"),
    result.error ? [h("div", { class: "tool-label" }, "error"), pre(result.error, "content error-text")] : null,
    h("div", { class: "muted small" }, `duration ${duration(result)}`),
  ];
}

function hasDuration(result) {
  return typeof result.duration_ms === "number";
}

function duration(result) {
  return hasDuration(result) ? `${formatNumber(result.duration_ms)} ms` : "—";
}
