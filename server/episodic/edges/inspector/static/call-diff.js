// A model call's "Diff with the previous call" tab: which messages entered the context since
// the call before, and which left it.

import { api, showError } from "./api.js";
import { h, link, loading, pre } from "./dom.js";
import { cssName, formatNumber } from "./format.js";
import { fateChip, roleChip, sectionChip } from "./chips.js";
import { callHref, encoded } from "./routes.js";
import { logButton } from "./log.js";

// Fills `body` with the diff. episode: { episodeId, callNumber(callId), revealInLog(seq),
// untilCallChanges() } (see episode.js).
export async function showDiff(body, call, episode) {
  body.append(loading());
  const current = episode.untilCallChanges();
  let diff;
  try {
    diff = await api(encoded`/api/model-calls/${call.model_call_id}/diff`);
  } catch (error) {
    if (current()) showError(body, error, "diff");
    return;
  }
  if (!current() || !body.isConnected) return;
  body.replaceChildren(
    diffSummary(diff, episode),
    h(
      "div",
      { class: "diff" },
      diffColumn("Entered the context", diff.entered, "diff-entered", "entered", episode),
      diffColumn("Left the context", diff.left, "diff-left", "left", episode),
    ),
  );
}

function diffSummary(diff, episode) {
  const previous = diff.previous_model_call_id;
  return h(
    "p",
    { class: "diff-summary", testid: "diff-summary" },
    previous
      ? [
          "Compared with the previous call ",
          link(callHref(episode.episodeId, previous), `${episode.callNumber(previous) || previous}`, {
            testid: "diff-previous",
          }),
          `: ${diff.entered.length} entered, ${diff.left.length} left, ${formatNumber(diff.kept)} kept.`,
        ]
      : "The first model call of the episode: everything entered.",
  );
}

function diffColumn(title, items, testid, cls, episode) {
  return h(
    "div",
    { class: `diff-col ${cls}` },
    h("h3", {}, `${title} `, h("span", { class: "muted small" }, `${items.length}`)),
    items.length
      ? h("ol", { class: "diff-list", testid: `${testid}-list` }, items.map((x) => diffItem(x, testid, episode)))
      : h("p", { class: "muted", testid: `${testid}-none` }, "nothing"),
  );
}

function diffItem(x, testid, episode) {
  return h(
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
      roleChip(x.role),
      x.seq ? logButton(x.seq, episode.revealInLog) : h("span", { class: "muted small" }, "not a log message"),
      x.stubbed ? fateChip("stubbed") : null,
      h("span", { class: "muted small" }, `${formatNumber(x.tokens)} tok`),
    ),
    pre(x.preview, "content preview"),
  );
}
