// The list pages, agents → users → episodes: each a heading over a table filled a page at a time.

import { api, showError } from "./api.js";
import { emptyNote, h, link, loading, timestamp } from "./dom.js";
import { formatNumber } from "./format.js";
import { stateChip } from "./chips.js";
import { AGENTS_HREF, agentHref, encoded, episodeHref, userHref } from "./routes.js";
import { untilNextNavigation } from "./navigation.js";
import { mainArea, setCrumbs, setTitle } from "./page.js";

export function showAgents() {
  setCrumbs([{ label: "Agents" }]);
  setTitle("Agents");
  mainArea().replaceChildren(
    h("h1", {}, "Agents"),
    pagedTable({
      what: "agents",
      rowTestId: "agent-row",
      empty: "This tenant has no agents.",
      fetchPage: async (token) => {
        const page = await api(encoded`/api/agents?page_token=${token}`);
        return { items: page.agents, next: page.next_page_token };
      },
      columns: [
        { title: "Agent", cell: (a) => link(agentHref(a.agent_id), a.agent_id, { testid: "agent-link", class: "id" }) },
        { title: "Model", cell: (a) => a.model || "—" },
        { title: "Updated", cell: (a) => timestamp(a.update_time) },
      ],
    }),
  );
}

export function showUsers(agentId) {
  setCrumbs([{ label: "Agents", href: AGENTS_HREF }, { label: agentId }]);
  setTitle(agentId);
  mainArea().replaceChildren(
    h("h1", {}, h("span", { class: "muted" }, "Users of "), h("span", { class: "id" }, agentId)),
    pagedTable({
      what: "users",
      rowTestId: "user-row",
      empty: "No user has talked to this agent.",
      fetchPage: async (token) => {
        const page = await api(encoded`/api/agents/${agentId}/users?page_token=${token}`);
        return { items: page.users, next: page.next_page_token };
      },
      columns: [
        {
          title: "User",
          cell: (u) => link(userHref(agentId, u.user_id), u.user_id, { testid: "user-link", class: "id" }),
        },
        { title: "Episodes", cls: "num", cell: (u) => formatNumber(u.episodes) },
        { title: "Last activity", cell: (u) => timestamp(u.last_activity_time) },
      ],
    }),
  );
}

export function showEpisodes(agentId, userId) {
  setCrumbs([{ label: "Agents", href: AGENTS_HREF }, { label: agentId, href: agentHref(agentId) }, { label: userId }]);
  setTitle(`${userId} · ${agentId}`);
  mainArea().replaceChildren(
    h(
      "h1",
      {},
      h("span", { class: "muted" }, "Episodes of "),
      h("span", { class: "id" }, userId),
      h("span", { class: "muted" }, " with "),
      h("span", { class: "id" }, agentId),
    ),
    pagedTable({
      what: "episodes",
      rowTestId: "episode-row",
      empty: "No episodes.",
      fetchPage: async (token) => {
        const page = await api(encoded`/api/agents/${agentId}/users/${userId}/episodes?page_token=${token}`);
        return { items: page.episodes, next: page.next_page_token };
      },
      columns: [
        {
          title: "Episode",
          cell: (e) => link(episodeHref(e.episode_id), e.episode_id, { testid: "episode-link", class: "id" }),
        },
        { title: "State", cell: (e) => stateChip(e.state) },
        { title: "Started", cell: (e) => timestamp(e.start_time) },
        { title: "Ended", cell: (e) => (e.end_time ? timestamp(e.end_time) : "—") },
        { title: "Last activity", cell: (e) => timestamp(e.last_activity_time) },
        { title: "Messages", cls: "num", cell: (e) => formatNumber(e.message_count) },
      ],
    }),
  );
}

// A table filled page by page from `fetchPage(token) -> {items, next}`, with a "More …" button
// while there is a next page. columns: [{ title, cls, cell(item) -> node or text }].
function pagedTable({ what, columns, rowTestId, empty, fetchPage }) {
  const current = untilNextNavigation();
  const cells = (tag, content) => columns.map((col) => h(tag, { class: col.cls || null }, content(col)));
  const body = h("tbody");
  const status = h("div", { class: "table-status" });
  const more = h("button", { type: "button", testid: "more", hidden: true }, `More ${what}`);
  let token = "";

  async function loadNextPage() {
    more.disabled = true;
    status.replaceChildren(loading());
    let page;
    try {
      page = await fetchPage(token);
    } catch (error) {
      if (current()) showError(status, error, what);
      more.disabled = false;
      return;
    }
    if (!current()) return;
    status.replaceChildren();
    for (const item of page.items) body.append(h("tr", { testid: rowTestId }, cells("td", (col) => col.cell(item))));
    token = page.next || "";
    more.hidden = !token;
    more.disabled = false;
    if (!body.childElementCount) status.replaceChildren(emptyNote(empty));
  }

  more.addEventListener("click", loadNextPage);
  loadNextPage();
  const head = h("thead", {}, h("tr", {}, cells("th", (col) => col.title)));
  return h("div", { class: "paged" }, h("table", { class: "list", testid: `${what}-table` }, head, body), status, more);
}
