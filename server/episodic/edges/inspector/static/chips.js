// The server's vocabulary (context sections, fates of log messages, roles, episode states,
// compaction kinds) as words and coloured chips; inspector.css colours them by class.

import { chip } from "./dom.js";
import { cssName } from "./format.js";

const SECTION_LABELS = {
  system: "system",
  knowledge: "knowledge",
  known_facts: "known facts",
  past_conversations: "past conversations",
  summary: "summary",
  earlier: "earlier in this conversation",
  history: "history",
  user_message: "user message",
};

// What became of a traced phrase's log message in one model call: what the model saw of the
// phrase through it (the server's rule, domain/inspection.py `message_fate`, with a phrase).
export const FATE_LABELS = {
  verbatim: "verbatim",
  stubbed: "stubbed",
  earlier: "recalled from earlier in this conversation",
  earlier_cut: "recalled from earlier, without the phrase",
  summarized: "in the summary",
  lost: "summarized, not in the summary",
  pruned: "pruned",
  not_yet: "not yet written",
};

// What a model call did with a log message, no phrase asked (the same rule without one): a
// message inside the summary's span is summarized, whether or not the summary says what it said.
export const MESSAGE_FATE_LABELS = {
  ...FATE_LABELS,
  earlier: "recalled from earlier in this conversation",
  earlier_cut: "recalled from earlier, cut",
  summarized: "summarized",
};

// One character a fate, for the dense "where did it go?" matrix.
export const FATE_SHORT = {
  verbatim: "V",
  stubbed: "S",
  earlier: "E",
  earlier_cut: "E…",
  summarized: "Σ",
  lost: "∅",
  pruned: "✕",
  not_yet: "·",
};

export function sectionLabel(section) {
  return SECTION_LABELS[section] || section;
}

// Where a label has a bar's narrow column: the same words, but for the longest one.
const SECTION_BAR_LABELS = { earlier: "earlier passages" };

export function sectionBarLabel(section) {
  return SECTION_BAR_LABELS[section] || sectionLabel(section);
}

// A traced phrase's fate (a "where did it go?" verdict).
export function fateLabel(fate) {
  return FATE_LABELS[fate] || fate;
}

// What a call did with a log message, without a phrase.
export function messageFateLabel(fate) {
  return MESSAGE_FATE_LABELS[fate] || fate;
}

export function sectionChip(section) {
  return chip(sectionLabel(section), `sec sec-${cssName(section)}`, { testid: "section-chip" });
}

export function fateChip(fate, props = {}) {
  return chip(fateLabel(fate), `fate fate-${cssName(fate)}`, props);
}

export function roleChip(role) {
  return chip(role, `role role-${cssName(role)}`);
}

export function stateChip(episodeState) {
  return chip(episodeState, `state state-${cssName(episodeState)}`, { testid: "episode-state" });
}

export function compactionChip(compaction, props = {}) {
  return chip(compaction, `compaction comp-${cssName(compaction)}`, props);
}
