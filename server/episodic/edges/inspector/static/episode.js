// One episode's page: its header, "Where did it go?", the log pane, and the model-call list
// with the selected call below it. The route picks the call (#/episodes/<id>/calls/<call>),
// and moving between calls of the episode keeps the page and what it has loaded.

import { api, showError } from "./api.js";
import { fact, h, link, loading, timestamp } from "./dom.js";
import { formatNumber } from "./format.js";
import { stateChip } from "./chips.js";
import { AGENTS_HREF, agentHref, callHref, encoded, userHref } from "./routes.js";
import { untilNextNavigation } from "./navigation.js";
import { mainArea, setCrumbs, setTitle } from "./page.js";
import { LogPane } from "./log.js";
import { CallList } from "./call-list.js";
import { showModelCall } from "./call.js";
import { WherePanel } from "./where.js";

export class EpisodeView {
  constructor(episodeId) {
    this.episodeId = episodeId;
    this.episode = null; // loaded by open()
    this.isShown = () => false; // open() replaces it: true until the next navigation
    // callId: the call asked for; call: the one loaded (another until callId's arrives);
    // tab: the tab asked for last, which a call that arrives late is shown on
    this.selected = noSelection();
    this.pending = { callId: "", tab: "context" }; // asked for before the episode loaded
    this.callLoads = 0; // bumped per call loaded: an answer for an older one is dropped
    // What the parts of the page need from the episode around them.
    const shared = {
      episodeId,
      isShown: () => this.isShown(),
      callNumber: (callId) => this.callList.number(callId),
      revealInLog: (seq) => this.log.reveal(seq),
      markPhrase: (answer) => this.log.markPhrase(answer),
      untilCallChanges: () => this.untilCallChanges(),
    };
    this.shared = shared;
    this.where = new WherePanel(shared);
    this.log = new LogPane(episodeId, shared.isShown);
    this.callList = new CallList(episodeId, shared.isShown);
    this.detail = h("div", { class: "call-detail", testid: "call-detail" });
  }

  // Called right after navigating to this view.
  async open(callId, tab) {
    this.isShown = untilNextNavigation();
    this.pending = { callId, tab };
    setTitle(this.episodeId);
    setCrumbs([{ label: "Agents", href: AGENTS_HREF }, { label: "…" }, { label: this.episodeId }]);
    mainArea().replaceChildren(loading());
    let answer;
    try {
      answer = await api(encoded`/api/episodes/${this.episodeId}`);
    } catch (error) {
      if (this.isShown()) showError(mainArea(), error, "episode");
      return;
    }
    if (!this.isShown()) return;
    this.episode = answer.episode;
    this.show();
    await Promise.all([this.log.loadEarlier(), this.callList.loadEarlier()]);
    if (!this.isShown()) return;
    this.select(this.pending.callId, this.pending.tab);
  }

  show() {
    const e = this.episode;
    setCrumbs([
      { label: "Agents", href: AGENTS_HREF },
      { label: e.agent_id, href: agentHref(e.agent_id) },
      { label: e.user_id, href: userHref(e.agent_id, e.user_id) },
      { label: e.episode_id },
    ]);
    const callsPane = h(
      "section",
      { class: "pane calls-pane", testid: "calls-pane" },
      h("h2", {}, "Model calls ", h("span", { class: "muted small" }, "in order")),
      this.callList.elements,
      this.detail,
    );
    mainArea().replaceChildren(
      h(
        "div",
        { class: "episode" },
        episodeHeader(e),
        this.where.elements,
        h("div", { class: "panes" }, this.log.element, callsPane),
      ),
    );
  }

  // Shows a call ("": none) on a tab ("context" or "diff").
  select(callId, tab) {
    if (!this.episode) {
      this.pending = { callId, tab }; // open() selects it once the episode is there
      return;
    }
    if (!callId) {
      this.clearSelection();
      return;
    }
    const selected = this.selected;
    selected.tab = tab;
    this.callList.highlight(callId, tab);
    if (selected.call && selected.call.model_call_id === callId) {
      this.callLoads += 1; // a call still loading for an earlier selection is dropped
      selected.callId = callId;
      selected.loading = false;
      this.showCall(selected.call, tab);
    } else if (selected.callId !== callId || !selected.loading) {
      selected.callId = callId;
      this.loadCall(callId);
    } // else: on its way, and shown on `tab` when it arrives
  }

  clearSelection() {
    this.selected = noSelection();
    this.callList.highlight("", "context");
    this.log.markFates(null);
    const hint = this.callList.isEmpty ? "" : "Select a model call to see what the model was shown.";
    this.detail.replaceChildren(h("p", { class: "muted hint" }, hint));
  }

  async loadCall(callId) {
    this.callLoads += 1;
    const current = this.untilCallChanges();
    this.selected.loading = true;
    this.detail.replaceChildren(loading());
    let call;
    try {
      call = (await api(encoded`/api/model-calls/${callId}?offset=0`)).model_call;
    } catch (error) {
      if (!current()) return;
      this.selected.loading = false;
      showError(this.detail, error, "model call");
      return;
    }
    if (!current()) return;
    this.selected.loading = false;
    if (call.episode_id !== this.episodeId) {
      this.detail.replaceChildren(otherEpisodeNote(call));
      return;
    }
    this.selected.call = call;
    this.showCall(call, this.selected.tab);
    this.log.scrollTo(call.user_message_seq || (call.history_span ? call.history_span.to_seq : 0));
  }

  showCall(call, tab) {
    this.log.markFates(call);
    showModelCall(this.detail, call, tab, this.shared);
  }

  // A check that stays true while this page is shown and no other call has started loading.
  untilCallChanges() {
    const load = this.callLoads;
    return () => this.isShown() && load === this.callLoads;
  }
}

function noSelection() {
  return { callId: "", call: null, tab: "context", loading: false };
}

function episodeHeader(e) {
  return h(
    "div",
    { class: "episode-head", testid: "episode-header" },
    h(
      "h1",
      {},
      h("span", { class: "muted" }, "Episode "),
      h("span", { class: "id", testid: "episode-id" }, e.episode_id),
    ),
    h(
      "dl",
      { class: "facts" },
      fact("state", stateChip(e.state)),
      fact("agent", link(agentHref(e.agent_id), e.agent_id, { class: "id" })),
      fact("user", link(userHref(e.agent_id, e.user_id), e.user_id, { class: "id" })),
      fact("started", timestamp(e.start_time)),
      fact("ended", e.end_time ? timestamp(e.end_time) : "—"),
      fact("last activity", timestamp(e.last_activity_time)),
      fact("messages", formatNumber(e.message_count)),
    ),
  );
}

// An id typed or pasted into the URL can name a call of another episode (of this tenant).
function otherEpisodeNote(call) {
  return h(
    "p",
    { class: "error-box", testid: "error" },
    "This model call belongs to another episode: ",
    link(callHref(call.episode_id, call.model_call_id), call.episode_id),
  );
}
