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
  history: "history",
  user_message: "user message",
};

// What became of a log message in one model call.
export const FATE_LABELS = {
  verbatim: "verbatim",
  stubbed: "stubbed",
  summarized: "in the summary",
  lost: "summarized, not in the summary",
  pruned: "pruned",
  not_yet: "not yet written",
};

// One character a fate, for the dense "where did it go?" matrix.
export const FATE_SHORT = { verbatim: "V", stubbed: "S", summarized: "Σ", lost: "∅", pruned: "✕", not_yet: "·" };

export function sectionLabel(section) {
  return SECTION_LABELS[section] || section;
}

export function fateLabel(fate) {
  return FATE_LABELS[fate] || fate;
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
