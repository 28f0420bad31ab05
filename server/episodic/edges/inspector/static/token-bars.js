// A model call's tokens as bars: the total (stacked by section, plus reply priming) and each
// section, all against the budget (the whole track; an over-budget call's track is its total,
// with the budget marked), so a 250-token budget reads as well as a 6,000-token one. The
// ceiling, usually far beyond the budget, is marked only where it falls on the track.

import { chip, h, styled } from "./dom.js";
import { cssName, formatNumber, percentOf } from "./format.js";
import { sectionBarLabel, sectionLabel } from "./chips.js";

export function tokenBars(call) {
  const scale = barScale(call);
  return h(
    "div",
    { class: "block", testid: "token-bars" },
    h(
      "h3",
      {},
      "Tokens ",
      tokenTotals(call),
      call.over_budget ? chip("over budget", "over", { testid: "over-budget" }) : null,
    ),
    h(
      "div",
      { class: "bars" },
      totalRow(call, scale),
      (call.sections || []).map((s) => sectionRow(s, call, scale)),
    ),
    h(
      "p",
      { class: "legend small muted" },
      "Bar width: tokens against the budget (the whole track). ",
      h("span", { class: "marker-sample" }),
      " the budget",
      scale.ceilingOnTrack ? [" ", h("span", { class: "marker-sample ceiling" }), " the ceiling."] : `; the ceiling (${formatNumber(call.ceiling_tokens)}) lies beyond the track.`,
    ),
  );
}

// Widths as shares of the track: the budget, or the total when the call went over it.
function barScale(call) {
  const track = Math.max(call.budget_tokens, call.total_tokens, 1);
  const width = (tokens) => `${Math.min(100, (100 * tokens) / track).toFixed(2)}%`;
  const ceilingOnTrack = call.ceiling_tokens > 0 && call.ceiling_tokens <= track;
  const marker = (cls, testid, title, tokens) => styled(h("span", { class: cls, testid, title }), { left: width(tokens) });
  return {
    width,
    ceilingOnTrack,
    budgetMarker: () => [
      marker("budget-marker", "budget-marker", `budget ${formatNumber(call.budget_tokens)}`, call.budget_tokens),
      ceilingOnTrack
        ? marker("budget-marker ceiling", "ceiling-marker", `ceiling ${formatNumber(call.ceiling_tokens)}`, call.ceiling_tokens)
        : null,
    ],
  };
}

function tokenTotals(call) {
  return h(
    "span",
    { class: "muted small", testid: "token-totals" },
    `${formatNumber(call.total_tokens)} of budget ${formatNumber(call.budget_tokens)} · ` +
      `ceiling ${formatNumber(call.ceiling_tokens)}` +
      (call.reply_priming_tokens ? ` · reply priming ${formatNumber(call.reply_priming_tokens)}` : ""),
  );
}

function totalRow(call, scale) {
  const segment = (cls, title, tokens) => styled(h("span", { class: cls, title }), { width: scale.width(tokens) });
  const sections = (call.sections || [])
    .filter((s) => s.tokens)
    .map((s) =>
      segment(
        `bar-seg sec-bg-${cssName(s.section)}`,
        `${sectionLabel(s.section)}: ${formatNumber(s.tokens)}`,
        s.tokens,
      ),
    );
  const priming = call.reply_priming_tokens
    ? segment("bar-seg priming", `reply priming: ${formatNumber(call.reply_priming_tokens)}`, call.reply_priming_tokens)
    : null;
  return h(
    "div",
    { class: "bar-row total", testid: "total-bar" },
    h("span", { class: "bar-label" }, h("strong", {}, "total")),
    h("span", { class: "bar-track stacked" }, sections, priming, scale.budgetMarker()),
    barValue(call.total_tokens, call.budget_tokens),
  );
}

function sectionRow(s, call, scale) {
  const fill = h("span", { class: `bar-fill sec-bg-${cssName(s.section)}${s.tokens ? " nonzero" : ""}` });
  return h(
    "div",
    { class: "bar-row", testid: "section-bar", dataset: { section: s.section, tokens: String(s.tokens) } },
    h(
      "span",
      { class: "bar-label", title: sectionLabel(s.section) },
      h("span", { class: `swatch sec-bg-${cssName(s.section)}` }),
      sectionBarLabel(s.section),
    ),
    h("span", { class: "bar-track" }, styled(fill, { width: scale.width(s.tokens) }), scale.budgetMarker()),
    barValue(s.tokens, call.budget_tokens),
  );
}

function barValue(tokens, budget) {
  return h(
    "span",
    { class: "bar-value" },
    `${formatNumber(tokens)}`,
    h("span", { class: "muted" }, ` · ${percentOf(tokens, budget)} of budget`),
  );
}
