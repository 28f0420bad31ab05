// "Why recalled?": for each past episode the call's recall found, its rank and score, the
// query's words its rendered entry holds (highlighted where they stand in its summary, key
// facts and excerpts), and the passages that matched; then "why not?" for an episode id or a
// phrase. The server computes it all from the stored call (domain/why_recalled.py).

import { api, showError } from "./api.js";
import { chip, h, link, loading } from "./dom.js";
import { cssName } from "./format.js";
import { encoded, episodeHref } from "./routes.js";

const BASES = {
  passages: "passages of it matched the query's words (a lexical match)",
  words: "its summary or key facts hold the query's words",
  meaning: "it holds none of the query's words: ranked by meaning (semantic) or recency",
  not_rendered: "found, but over the recall allowance: the model did not see it, and the call keeps none of its text",
};

const SIGNALS = { semantic: "meaning (semantic)", lexical: "words (lexical)", recency: "recency" };

const PART_LABELS = { summary: "summary", key_facts: "key facts", excerpt: "excerpt", block: "rendered block" };

const VERDICTS = {
  rendered: "was recalled and rendered",
  over_allowance: "was a candidate, but over the recall allowance (not rendered)",
  not_found: "was not among what this call's recall rendered",
};

// The block for one call (the JSON's why_recalled), or null when there is nothing to explain.
export function whyRecalled(call) {
  const why = call.why_recalled;
  if (!why) return null;
  const block = h("div", { class: "block why-recalled", testid: "why-recalled" }, h("h3", {}, "Why recalled?"));
  block.append(queryLine(why));
  if (why.episodes.length) {
    if (why.unmatched_words.length && why.query_words.length) {
      block.append(
        h(
          "p",
          { class: "small why-unmatched", testid: "why-unmatched" },
          "No rendered episode holds: ",
          wordChips(why.unmatched_words, "why-missing"),
          " — a question needing these (a second hop) found nothing of them in what was recalled.",
        ),
      );
    }
    block.append(...why.episodes.map(episodeNode));
  } else {
    block.append(h("p", { class: "muted small" }, "This call's recall found no past episode."));
  }
  block.append(h("p", { class: "muted small", testid: "why-not-recorded" }, why.not_recorded));
  block.append(...whyNotForm(call));
  return block;
}

function queryLine(why) {
  if (why.query_source === "none") {
    return h("p", { class: "small", testid: "why-query" }, "The call rendered no user message: recall had no words to match.");
  }
  return h(
    "p",
    { class: "small", testid: "why-query" },
    "Query (the call's user message): ",
    h("q", {}, why.query),
    h("br"),
    "Its words: ",
    why.query_words.length ? wordChips(why.query_words, "why-query-word") : h("span", { class: "muted" }, "none (only stop words)"),
  );
}

function wordChips(words, testid) {
  return words.map((w) => chip(w, "word", { testid }));
}

function episodeNode(e) {
  return h(
    "details",
    {
      class: `why-episode basis-${cssName(e.basis)}`,
      testid: "why-episode",
      dataset: { episodeId: e.episode_id, basis: e.basis, rendered: String(!!e.rendered) },
      open: e.rendered,
    },
    h(
      "summary",
      {},
      h("strong", {}, `#${e.rank} of ${e.candidates} `),
      link(episodeHref(e.episode_id), e.episode_id, { class: "id" }),
      ` · score ${typeof e.score === "number" ? e.score.toFixed(3) : "—"} · `,
      e.matched_words.length
        ? [h("span", {}, "matched "), wordChips(e.matched_words, "why-matched-word")]
        : h("span", { class: "muted" }, "no query word"),
    ),
    h("p", { class: "small why-basis", testid: "why-basis" }, BASES[e.basis] || e.basis),
    e.signals && e.signals.length
      ? h("p", { class: "small", testid: "why-signals" }, "Found by: ", wordChips(e.signals.map((s) => SIGNALS[s] || s), "why-signal"))
      : null,
    e.missing_words.length && e.rendered
      ? h("p", { class: "small muted" }, "Not in it: ", e.missing_words.join(", "))
      : null,
    e.parts.length ? h("ul", { class: "why-parts" }, e.parts.map(partNode)) : null,
  );
}

function partNode(part) {
  const passage = part.kind === "excerpt" && part.matched_words.length > 0;
  return h(
    "li",
    {
      class: `why-part${passage ? " passage" : ""}`,
      testid: passage ? "why-passage" : "why-part",
      dataset: { kind: part.kind },
    },
    h("span", { class: "why-part-label" }, passage ? "passage that matched" : PART_LABELS[part.kind] || part.kind),
    h(
      "span",
      { class: "why-text" },
      part.segments.map((s) => (s.word ? h("mark", { testid: "why-hit", dataset: { word: s.word } }, s.text) : s.text)),
    ),
  );
}

// "Why not?": an episode id or a phrase, asked of the server against this call.
function whyNotForm(call) {
  const input = h("input", {
    type: "search",
    testid: "why-not-input",
    placeholder: "an episode id or a phrase",
    autocomplete: "off",
    spellcheck: "false",
    "aria-label": "Episode id or phrase",
  });
  const result = h("div", { class: "why-not-result", testid: "why-not-result", hidden: true });
  let asked = 0;
  const submit = async (event) => {
    event.preventDefault();
    const mine = ++asked;
    result.hidden = false;
    result.replaceChildren(loading("Looking…"));
    try {
      const answer = await api(encoded`/api/model-calls/${call.model_call_id}/why-not?about=${input.value}`);
      if (mine === asked) result.replaceChildren(verdictNode(answer));
    } catch (error) {
      if (mine === asked) showError(result, error, "why not");
    }
  };
  const form = h(
    "form",
    { class: "why-not-form", testid: "why-not-form", onsubmit: submit },
    h("span", { class: "small" }, "Why not recalled? "),
    input,
    h("button", { type: "submit", testid: "why-not-submit" }, "Ask"),
  );
  return [form, result];
}

function verdictNode(answer) {
  const parts = [h("q", {}, answer.about), ` ${VERDICTS[answer.verdict] || answer.verdict}`];
  if (answer.episode_ids.length && answer.verdict === "rendered" && answer.episode_ids[0] !== answer.about) {
    parts.push(" (in ", answer.episode_ids.map((id, i) => [i ? ", " : "", link(episodeHref(id), id, { class: "id" })]), ")");
  }
  parts.push(`. ${answer.candidates} candidate${answer.candidates === 1 ? "" : "s"} found`);
  if (answer.unseen_candidates) parts.push(`, ${answer.unseen_candidates} over the allowance (their text is not kept)`);
  parts.push(". ");
  parts.push(
    answer.shared_words.length
      ? ["Words it shares with the query: ", wordChips(answer.shared_words, "why-not-shared"), "."]
      : "It shares no word with the query: word matching could not find it, only meaning could.",
  );
  return h("p", { class: "small", testid: "why-not-verdict", dataset: { verdict: answer.verdict } }, parts);
}
