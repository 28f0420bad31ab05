// The episode's model calls, oldest first: a row each (number, time, user message, tokens
// against the budget, compaction), linking to the call; the selected one is highlighted.

import { api, showError } from "./api.js";
import { h, loading, styled, timestamp } from "./dom.js";
import { formatNumber } from "./format.js";
import { compactionChip } from "./chips.js";
import { callHref, encoded } from "./routes.js";

const PAGES_PER_LOAD = 20; // pages of summaries (50 a page) loaded in one go

export class CallList {
  // isShown(): whether the episode view is still on screen (else answers are dropped).
  constructor(episodeId, isShown) {
    this.episodeId = episodeId;
    this.isShown = isShown;
    this.calls = []; // summaries, oldest first
    this.nextToken = ""; // for calls older than the loaded ones
    this.selection = { callId: "", tab: "context" };
    this.list = h("ol", { class: "calls", testid: "model-calls" });
    this.status = h("div", { class: "table-status" });
    this.earlier = h(
      "button",
      { type: "button", testid: "earlier-calls", hidden: true, onclick: () => this.loadEarlier() },
      "Earlier model calls",
    );
    this.elements = [this.earlier, this.status, this.list];
  }

  get isEmpty() {
    return !this.calls.length;
  }

  // Loads older calls, up to PAGES_PER_LOAD pages (the API pages them newest first).
  async loadEarlier() {
    this.earlier.disabled = true;
    this.status.replaceChildren(loading());
    let pages = 0;
    try {
      do {
        const page = await api(encoded`/api/episodes/${this.episodeId}/model-calls?page_token=${this.nextToken}`);
        if (!this.isShown()) return;
        this.calls = [...[...page.model_calls].reverse(), ...this.calls];
        this.nextToken = page.next_page_token || "";
        pages += 1;
      } while (this.nextToken && pages < PAGES_PER_LOAD);
    } catch (error) {
      if (this.isShown()) showError(this.status, error, "model calls");
      this.earlier.disabled = false;
      return;
    }
    this.status.replaceChildren();
    this.earlier.hidden = !this.nextToken;
    this.earlier.disabled = false;
    this.render();
  }

  // "#k" counted from the first call; "…k" (the k-th newest) while older calls are not loaded.
  number(callId) {
    const i = this.calls.findIndex((c) => c.model_call_id === callId);
    if (i < 0) return "";
    return this.nextToken ? `…${this.calls.length - i}` : `#${i + 1}`;
  }

  highlight(callId, tab) {
    this.selection = { callId, tab };
    this.render();
  }

  render() {
    if (this.isEmpty) {
      this.list.replaceChildren(
        h("li", { class: "muted", testid: "empty" }, "No model calls: BuildContext was never called."),
      );
      return;
    }
    this.list.replaceChildren(...this.calls.map((c) => h("li", {}, this.row(c))));
    requestAnimationFrame(() => this.revealSelected());
  }

  // Scrolls the list (only the list, not the page) so the selected call, with its badges, is
  // in view: a call reached by its address may sit below the list's fold.
  revealSelected() {
    const selected = this.list.querySelector(".call.selected");
    if (!selected) return;
    const box = this.list.getBoundingClientRect();
    const row = selected.getBoundingClientRect();
    if (row.top < box.top) this.list.scrollTop -= box.top - row.top;
    else if (row.bottom > box.bottom) this.list.scrollTop += row.bottom - box.bottom;
  }

  row(c) {
    const selected = c.model_call_id === this.selection.callId;
    return h(
      "a",
      {
        href: callHref(this.episodeId, c.model_call_id, selected ? this.selection.tab : ""),
        class: `call${selected ? " selected" : ""}`,
        testid: "model-call",
        "aria-current": selected ? "true" : null,
        dataset: { callId: c.model_call_id },
      },
      h("span", { class: "call-num" }, this.number(c.model_call_id)),
      timestamp(c.create_time),
      h("span", { class: "small" }, c.user_message_seq ? `user msg #${c.user_message_seq}` : "no user msg"),
      h(
        "span",
        { class: "call-tokens small", title: "total tokens / budget" },
        `${formatNumber(c.total_tokens)} / ${formatNumber(c.budget_tokens)}`,
      ),
      budgetBar(c),
      c.compaction && c.compaction !== "none" ? compactionChip(c.compaction) : null,
      c.trace_id ? h("span", { class: "muted small", title: `trace ${c.trace_id}` }, "traced") : null,
    );
  }
}

// How full the budget is, in a small bar (red past it).
function budgetBar(c) {
  const share = c.budget_tokens ? Math.min(1, c.total_tokens / c.budget_tokens) : 0;
  const fill = h("span", { class: `mini-fill${c.total_tokens > c.budget_tokens ? " over" : ""}` });
  styled(fill, { width: `${(share * 100).toFixed(1)}%` });
  return h("span", { class: "mini-bar", "aria-hidden": "true" }, fill);
}
