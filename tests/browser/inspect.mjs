// Drives the Episodic context inspector in Debian's Chromium like a user would, and prints
// ONE JSON object on stdout with what it saw. The assertions live in the Python test
// (tests/e2e/test_inspector_browser.py); this script fails (exit 1, still printing what it
// saw so far, with "driver_error") only when it cannot drive the page: a timeout, a missing
// element, a browser that does not start.
//
// Inputs (environment):
//   INSPECTOR_URL            http://127.0.0.1:PORT (required)
//   INSPECTOR_KEY            the API key to type into the form ("" : a dev server asks for none)
//   WRONG_KEY                a key the server refuses, typed first (default: a made-up one)
//   AGENT_ID, USER_ID, EPISODE_ID   the path to click through (required)
//   PHRASE                   typed into "Where did it go?" (required)
//   OTHER_TENANT_EPISODE_ID  an episode of another tenant, visited by URL
//   WHY_CALL_ID              a model call of EPISODE_ID that recalled a past episode: its
//                            "Why recalled?" block is read (and screenshot)
//   WHY_NOT_PHRASE           asked of that call's "Why not recalled?" (default: none)
//   RECAP_EPISODE_ID, RECAP_PHRASE   a re-compaction case: "Where did it go?" for the phrase
//   EARLIER_EPISODE_ID, EARLIER_CALL_ID, EARLIER_PHRASE   a call that recalled the phrase's
//                            message into "[Earlier in this conversation]": its passages, the
//                            log's badge for seq 1, and "Where did it go?" for the phrase
//   LONG_PHRASE_LENGTH       length of the over-long phrase typed last (default 10000)
//   SCREENSHOT_DIR           where the PNGs go (default: no screenshots)
//   CHROMIUM                 the browser (default /usr/bin/chromium)
//   STEP_TIMEOUT_MS          per wait (default 10000)

import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const env = process.env;
const BASE = (env.INSPECTOR_URL || "").replace(/\/+$/, "");
const KEY = env.INSPECTOR_KEY || "";
const WRONG_KEY = env.WRONG_KEY || "epk_not_a_key_of_this_server_0000000000";
const AGENT_ID = env.AGENT_ID || "";
const USER_ID = env.USER_ID || "";
const EPISODE_ID = env.EPISODE_ID || "";
const PHRASE = env.PHRASE || "";
const OTHER = env.OTHER_TENANT_EPISODE_ID || "";
const WHY_CALL = env.WHY_CALL_ID || "";
const WHY_NOT = env.WHY_NOT_PHRASE || "";
const RECAP_EPISODE = env.RECAP_EPISODE_ID || "";
const RECAP_PHRASE = env.RECAP_PHRASE || "";
const EARLIER_EPISODE = env.EARLIER_EPISODE_ID || "";
const EARLIER_CALL = env.EARLIER_CALL_ID || "";
const EARLIER_PHRASE = env.EARLIER_PHRASE || "";
const LONG = Number(env.LONG_PHRASE_LENGTH || 10000);
const SHOTS = env.SCREENSHOT_DIR || "";
const TIMEOUT = Number(env.STEP_TIMEOUT_MS || 10000);

const out = {
  steps: [],
  console: [], // console messages of type error / warning
  page_errors: [],
  csp_violations: [],
  failed_requests: [],
  urls_with_key: [],
  api_requests_without_auth: [],
  screenshots: [],
};

function missing() {
  const need = { INSPECTOR_URL: BASE, AGENT_ID, USER_ID, EPISODE_ID, PHRASE };
  return Object.entries(need)
    .filter(([, v]) => !v)
    .map(([k]) => k);
}

const tid = (id) => `[data-testid="${id}"]`;

async function texts(scope, id) {
  return scope.locator(tid(id)).allTextContents();
}

// Viewport-sized PNGs (a model call's full page can be many screens long).
async function shot(page, name) {
  if (!SHOTS) return;
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path });
  out.screenshots.push(path);
}

// Runs in the page: every element of the panels that must fit (the call's facts, the model-call
// list, the token bars, the phrase trace, "why recalled?") inside its panel (a table in a
// scrolling wrapper may scroll), and whether the selected model call is in view inside its
// scrolling list.
function layoutFacts() {
  const selectors = ['[data-testid="call-facts"]', '[data-testid="model-calls"]', '[data-testid="token-bars"]', '[data-testid="where-result"]', '[data-testid="why-recalled"]'];
  const overflowing = [];
  for (const selector of selectors) {
    const panel = document.querySelector(selector);
    if (!panel) continue;
    const box = panel.getBoundingClientRect();
    for (const el of panel.querySelectorAll("*")) {
      if (el.closest(".matrix-wrap")) continue;
      const r = el.getBoundingClientRect();
      if (r.width > 0 && (r.right > box.right + 1 || r.left < box.left - 1)) {
        overflowing.push(`${selector} ${el.tagName.toLowerCase()}.${el.className} "${(el.textContent || "").slice(0, 30)}"`);
      }
    }
  }
  const list = document.querySelector('[data-testid="model-calls"]');
  const selected = list && list.querySelector(".call.selected");
  let selectedVisible = false;
  if (selected) {
    const l = list.getBoundingClientRect();
    const s = selected.getBoundingClientRect();
    selectedVisible = s.top >= l.top - 1 && s.bottom <= l.bottom + 1 && s.right <= l.right + 1;
  }
  return { overflowing: overflowing.slice(0, 20), selected_visible: selectedVisible };
}

async function step(name, fn) {
  out.steps.push(name);
  try {
    await fn();
  } catch (error) {
    error.message = `step "${name}": ${error.message}`;
    throw error;
  }
}

async function rendered(page) {
  return page.locator(tid("rendered-message")).evaluateAll((items) =>
    items.map((li) => ({
      index: Number(li.dataset.index),
      section: li.dataset.section,
      seq: Number(li.dataset.seq),
      stubbed: li.dataset.stubbed === "true",
      fate: li.querySelector('[data-testid="message-fate"]')?.textContent || "",
      section_label: li.querySelector('[data-testid="section-chip"]')?.textContent || "",
      content: li.querySelector(":scope > pre.content")?.textContent || "",
    })),
  );
}

async function callView(page) {
  // The call the address names, rendered: right after a link is followed, the page it left
  // (its own messages, no bars) can still be in place, and was read once instead.
  await page.waitForFunction(
    () => {
      const named = decodeURIComponent((location.hash.split("/calls/")[1] || "").split("/")[0]);
      return named !== "" && document.querySelector('[data-testid="call-id"]')?.textContent === named;
    },
    null,
    { timeout: TIMEOUT },
  );
  await page.locator(tid("rendered-message")).first().waitFor({ timeout: TIMEOUT });
  const bars = await page.locator(tid("section-bar")).evaluateAll((rows) =>
    rows.map((row) => {
      const fill = row.querySelector(".bar-fill");
      const marker = row.querySelector('[data-testid="budget-marker"]');
      return {
        section: row.dataset.section,
        tokens: Number(row.dataset.tokens),
        text: row.textContent,
        fill_width: fill ? fill.style.width : "",
        fill_px: fill ? fill.getBoundingClientRect().width : 0,
        fill_color: fill ? getComputedStyle(fill).backgroundColor : "",
        marker_left: marker ? marker.style.left : "",
      };
    }),
  );
  const trace = page.locator(`${tid("trace-link")}, ${tid("trace-id")}`);
  return {
    title: await page.locator(".call-title").textContent(),
    facts: await page.locator(tid("call-facts")).textContent(),
    compaction: await page.locator(tid("compaction")).textContent(),
    token_totals: await page.locator(tid("token-totals")).textContent(),
    section_bars: bars,
    fates: await page.locator(tid("fates")).textContent(),
    fate_runs: await texts(page, "fate-run"),
    message_count: await page.locator(tid("message-count")).textContent(),
    rendered_messages: await rendered(page),
    more_messages_visible: await page.locator(tid("more-messages")).isVisible(),
    recalled_episodes: await texts(page, "recalled-episode"),
    recalled_memories: await texts(page, "recalled-memory"),
    trace: (await trace.count()) ? await trace.first().textContent() : "",
    trace_href: (await page.locator(tid("trace-link")).count())
      ? await page.locator(tid("trace-link")).getAttribute("href")
      : "",
  };
}

async function diffView(page) {
  await page.locator(tid("diff-summary")).waitFor({ timeout: TIMEOUT });
  const items = (id) =>
    page.locator(tid(id)).evaluateAll((lis) =>
      lis.map((li) => ({
        section: li.dataset.section,
        seq: Number(li.dataset.seq),
        text: li.querySelector("pre")?.textContent || "",
      })),
    );
  return {
    summary: await page.locator(tid("diff-summary")).textContent(),
    entered: await items("diff-entered"),
    left: await items("diff-left"),
  };
}

async function whyRecalledView(page) {
  const block = page.locator(tid("why-recalled"));
  await block.waitFor({ timeout: TIMEOUT });
  return {
    query: await page.locator(tid("why-query")).textContent(),
    query_words: await texts(page, "why-query-word"),
    unmatched: await texts(page, "why-missing"),
    episodes: await page.locator(tid("why-episode")).evaluateAll((items) =>
      items.map((d) => ({
        episode_id: d.dataset.episodeId,
        basis: d.dataset.basis,
        rendered: d.dataset.rendered,
        open: d.open,
        matched: [...d.querySelectorAll('[data-testid="why-matched-word"]')].map((c) => c.textContent),
        hits: [...d.querySelectorAll('[data-testid="why-hit"]')].map((m) => m.textContent),
        passages: [...d.querySelectorAll('[data-testid="why-passage"] .why-text')].map((p) => p.textContent),
        basis_text: d.querySelector('[data-testid="why-basis"]')?.textContent || "",
      })),
    ),
    not_recorded: await page.locator(tid("why-not-recorded")).textContent(),
  };
}

// The "came back" verdicts of a phrase trace: per message, and for the phrase as a whole.
async function returnedVerdicts(page) {
  return {
    returned: await page.locator(tid("returned")).evaluateAll((divs) =>
      divs.map((d) => {
        const a = d.querySelector("a");
        const m = a ? /\/calls\/([^/]+)/.exec(a.getAttribute("href") || "") : null;
        return { fate: d.dataset.fate, text: d.textContent, model_call_id: m ? decodeURIComponent(m[1]) : "" };
      }),
    ),
    back: await page.locator(tid("phrase-back")).evaluateAll((ps) =>
      ps.map((p) => ({ present: p.dataset.present, text: p.textContent })),
    ),
    latest: await texts(page, "latest-fate"),
  };
}

// Runs "Where did it go?" for a phrase on the episode shown, and reads the answer.
async function tracePhrase(page, phrase) {
  await page.locator(tid("where-input")).fill(phrase);
  await page.locator(tid("where-submit")).click();
  await page.locator(tid("where-summary")).waitFor({ timeout: TIMEOUT });
  return {
    summary: await page.locator(tid("where-summary")).textContent(),
    gone: await page.locator(tid("phrase-gone")).evaluateAll((ps) =>
      ps.map((p) => {
        const a = p.querySelector("a");
        const m = a ? /\/calls\/([^/]+)/.exec(a.getAttribute("href") || "") : null;
        return { reason: p.dataset.reason, text: p.textContent, model_call_id: m ? decodeURIComponent(m[1]) : "" };
      }),
    ),
    dropped: await page.locator(tid("dropped")).evaluateAll((divs) =>
      divs.map((d) => ({ reason: d.dataset.reason, text: d.textContent })),
    ),
    cells: await page.locator(tid("where-cell")).evaluateAll((tds) => tds.map((td) => td.dataset.fate)),
    presence: await page.locator(tid("presence-cell")).evaluateAll((tds) => tds.map((td) => td.dataset.present)),
    ...(await returnedVerdicts(page)),
  };
}

// The log's badge for a message: its text, and the fates it stands for (that of the selected
// call, and the traced phrase's when a trace holds the message).
async function logBadge(page, seq) {
  return page.locator(`${tid("log-message")}[data-seq="${seq}"]`).evaluate((li) => ({
    text: li.querySelector('[data-testid="log-fate"]').textContent,
    fate: li.dataset.fate || "",
    phrase_fate: li.dataset.phraseFate || "",
  }));
}

// Scrolls the element to the top of the window, below the sticky top bar.
async function scrollUnderTopbar(page, selector) {
  await page.locator(selector).first().evaluate((el) => {
    const bar = document.querySelector(".topbar");
    const top = el.getBoundingClientRect().top + window.scrollY - (bar ? bar.getBoundingClientRect().height : 0) - 8;
    window.scrollTo(0, Math.max(top, 0));
  });
}

async function enterKey(page, key) {
  const input = page.locator(tid("key-input"));
  await input.waitFor({ timeout: TIMEOUT });
  await input.fill(key);
  await page.locator(tid("key-submit")).click();
}

async function drive(page) {
  await step("open the root", async () => {
    const response = await page.goto(`${BASE}/`, { waitUntil: "load" });
    out.root_status = response.status();
    out.csp_header = response.headers()["content-security-policy"] || "";
    await page.locator(`${tid("key-form")}, ${tid("agent-link")}, ${tid("empty")}`).first().waitFor({ timeout: TIMEOUT });
    out.asked_for_key = await page.locator(tid("key-form")).isVisible();
  });

  if (out.asked_for_key) {
    await step("a wrong key is refused", async () => {
      await enterKey(page, WRONG_KEY);
      await page.locator(tid("key-error")).waitFor({ state: "visible", timeout: TIMEOUT });
      out.wrong_key = {
        asked_again: await page.locator(tid("key-form")).isVisible(),
        error: await page.locator(tid("key-error")).textContent(),
        stored: await page.evaluate(() => sessionStorage.length),
      };
      await shot(page, "01-key-refused");
    });
    await step("the right key", async () => {
      await enterKey(page, KEY);
      await page.locator(`${tid("agent-link")}, ${tid("empty")}`).first().waitFor({ timeout: TIMEOUT });
    });
  }

  await step("agents", async () => {
    await page.locator(tid("tenant")).waitFor({ state: "visible", timeout: TIMEOUT });
    out.tenant = await page.locator(tid("tenant")).textContent();
    out.agents = await texts(page, "agent-link");
    out.url_after_key = page.url();
    await shot(page, "02-agents");
    await page.locator(tid("agent-link")).filter({ hasText: AGENT_ID }).first().click();
  });

  await step("users", async () => {
    await page.locator(tid("user-link")).first().waitFor({ timeout: TIMEOUT });
    out.users = await texts(page, "user-link");
    await page.locator(tid("user-link")).filter({ hasText: USER_ID }).first().click();
  });

  await step("episodes", async () => {
    await page.locator(tid("episode-link")).first().waitFor({ timeout: TIMEOUT });
    out.episodes = await texts(page, "episode-link");
    await page.locator(tid("episode-link")).filter({ hasText: EPISODE_ID }).first().click();
  });

  await step("the episode's log", async () => {
    await page.locator(tid("log-message")).first().waitFor({ timeout: TIMEOUT });
    await page.locator(tid("model-call")).first().waitFor({ timeout: TIMEOUT });
    out.episode_url = page.url();
    out.episode_header = await page.locator(tid("episode-header")).textContent();
    out.log_first_page = await page.locator(tid("log-message")).count();
    out.earlier_clicks = 0;
    const earlier = page.locator(tid("earlier-messages"));
    while ((await earlier.isVisible()) && out.earlier_clicks < 50) {
      const before = await page.locator(tid("log-message")).count();
      await earlier.click();
      await page.waitForFunction(
        ([sel, n]) => document.querySelectorAll(sel).length > n,
        [tid("log-message"), before],
        { timeout: TIMEOUT },
      );
      out.earlier_clicks += 1;
    }
    out.log = await page.locator(tid("log-message")).evaluateAll((lis) =>
      lis.map((li) => ({
        seq: Number(li.dataset.seq),
        role: li.dataset.role,
        content: li.querySelector(":scope > pre.content")?.textContent || "",
      })),
    );
    const toolCalls = page.locator(tid("tool-call"));
    out.tool_calls = await toolCalls.count();
    if (out.tool_calls) {
      await toolCalls.first().locator("summary").click();
      out.tool_call_open = await toolCalls.first().evaluate((d) => d.open);
      out.tool_call_text = await toolCalls.first().textContent();
    }
    out.tool_results = await texts(page, "tool-result");
  });

  await step("hostile content stays text", async () => {
    out.pwned = await page.evaluate(() => typeof window.__pwned === "undefined" ? "undefined" : String(window.__pwned));
    out.app_img_count = await page.locator("#app img").count();
    out.app_script_count = await page.locator("#app script").count();
  });

  await step("the newest model call", async () => {
    out.model_calls = await texts(page, "model-call");
    await page.locator(tid("model-call")).last().click();
    out.latest_call = await callView(page);
    out.latest_call_url = page.url();
    await shot(page, "03-model-call");
    if (out.latest_call.more_messages_visible) {
      const before = out.latest_call.rendered_messages.length;
      await page.locator(tid("more-messages")).click();
      await page.waitForFunction(
        ([sel, n]) => document.querySelectorAll(sel).length > n,
        [tid("rendered-message"), before],
        { timeout: TIMEOUT },
      );
      out.latest_call.after_more = (await rendered(page)).length;
    }
    out.log_fates = await page.locator(tid("log-message")).evaluateAll((lis) =>
      lis.map((li) => ({ seq: Number(li.dataset.seq), fate: li.dataset.fate || "" })),
    );
  });

  await step("where did it go?", async () => {
    await page.locator(tid("where-input")).fill(PHRASE);
    await page.locator(tid("where-submit")).click();
    await page.locator(tid("where-summary")).waitFor({ timeout: TIMEOUT });
    out.where = {
      summary: await page.locator(tid("where-summary")).textContent(),
      messages: await page.locator(tid("where-message")).evaluateAll((lis) =>
        lis.map((li) => ({ seq: Number(li.dataset.seq), text: li.textContent })),
      ),
      dropped: await page.locator(tid("dropped")).evaluateAll((divs) =>
        divs.map((d) => ({ reason: d.dataset.reason, text: d.textContent })),
      ),
      not_dropped: await texts(page, "not-dropped"),
      cells: await page.locator(tid("where-cell")).evaluateAll((tds) => tds.map((td) => td.dataset.fate)),
      gone: await page.locator(tid("phrase-gone")).evaluateAll((ps) =>
        ps.map((p) => ({ reason: p.dataset.reason, text: p.textContent })),
      ),
      verdict: await texts(page, "phrase-verdict"),
      presence: await page.locator(tid("presence-cell")).evaluateAll((tds) => tds.map((td) => td.dataset.present)),
      ...(await returnedVerdicts(page)),
    };
    await page.locator(tid("where-result")).scrollIntoViewIfNeeded();
    await shot(page, "04-where");
  });

  await step("the call it dropped out at, and its diff", async () => {
    const goneLink = page.locator(`${tid("phrase-gone")} a`).first();
    const dropLink = page.locator(`${tid("dropped")} a`).first();
    if (await goneLink.count()) {
      await goneLink.click();
    } else if (await dropLink.count()) {
      await dropLink.click();
    } else {
      // still seen through the summary: the call where it left the verbatim history
      const cells = await page.locator(tid("where-cell")).evaluateAll((tds) => tds.map((td) => td.dataset.fate));
      const at = cells.indexOf("summarized");
      await page.locator(`${tid("where-matrix")} thead th a`).nth(Math.max(at, 0)).click();
    }
    await page.waitForFunction(() => /\/calls\//.test(location.hash), null, { timeout: TIMEOUT });
    out.drop_call_url = page.url();
    out.drop_call = await callView(page);
    await page.evaluate(() => window.scrollTo(0, 0));
    await shot(page, "05-dropped-call");
    // the diff of the call the message left the verbatim history at (its first other fate)
    const cells = await page.locator(tid("where-cell")).evaluateAll((tds) => tds.map((td) => td.dataset.fate));
    const left = cells.findIndex((fate) => fate !== "verbatim" && fate !== "not_yet");
    const header = page.locator(`${tid("where-matrix")} thead th a`).nth(Math.max(left, 0));
    const leftCall = decodeURIComponent((/\/calls\/([^/]+)/.exec((await header.getAttribute("href")) || "") || [])[1] || "");
    if (leftCall && !page.url().includes(encodeURIComponent(leftCall))) {
      await header.click();
      await callView(page);
    }
    out.diff_call_url = page.url();
    await page.locator(tid("tab-diff")).click();
    out.diff = await diffView(page);
    out.diff_url = page.url();
    await shot(page, "06-diff");
  });

  await step("a reload keeps the page and the key", async () => {
    await page.reload({ waitUntil: "load" });
    out.diff_after_reload = await diffView(page);
    out.asked_for_key_after_reload = await page.locator(tid("key-form")).isVisible();
  });

  if (WHY_CALL) {
    await step("why recalled?", async () => {
      await page.evaluate(
        ([episode, call]) => {
          location.hash = `#/episodes/${encodeURIComponent(episode)}/calls/${encodeURIComponent(call)}`;
        },
        [EPISODE_ID, WHY_CALL],
      );
      await page.waitForFunction((c) => location.hash.includes(encodeURIComponent(c)), WHY_CALL, { timeout: TIMEOUT });
      await page.locator(tid("call-id")).filter({ hasText: WHY_CALL }).waitFor({ timeout: TIMEOUT });
      out.why = await whyRecalledView(page);
      out.why.url = page.url();
      if (WHY_NOT) {
        await page.locator(tid("why-not-input")).fill(WHY_NOT);
        await page.locator(tid("why-not-submit")).click();
        const verdict = page.locator(tid("why-not-verdict"));
        await verdict.waitFor({ timeout: TIMEOUT });
        out.why.why_not = { verdict: await verdict.getAttribute("data-verdict"), text: await verdict.textContent() };
      }
      await scrollUnderTopbar(page, tid("why-recalled"));
      await shot(page, "08-why-recalled");
    });
  }

  await step("layout at 1400x900 and 1024x768", async () => {
    // the newest call, reached by its address (as from a link elsewhere) while the list shows
    // its top: the list must bring it into view (a click would scroll it there itself)
    const href = await page.locator(tid("model-call")).last().getAttribute("href");
    await page.locator(tid("model-calls")).evaluate((list) => {
      list.scrollTop = 0;
    });
    await page.evaluate((h) => {
      location.hash = new URL(h, location.href).hash;
    }, href);
    await page.waitForFunction(() => !/\/diff$/.test(location.hash), null, { timeout: TIMEOUT });
    await page.locator(tid("rendered-message")).first().waitFor({ timeout: TIMEOUT });
    out.layout = {};
    for (const [width, height] of [[1400, 900], [1024, 768]]) {
      await page.setViewportSize({ width, height });
      await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
      out.layout[`${width}x${height}`] = await page.evaluate(layoutFacts);
      await page.evaluate(() => window.scrollTo(0, 0));
      await shot(page, `07-layout-${width}x${height}`);
    }
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.locator(tid("tab-diff")).click();
    await page.waitForFunction(() => /\/diff$/.test(location.hash), null, { timeout: TIMEOUT });
  });

  await step("a 10k-character phrase", async () => {
    await page.locator(tid("where-input")).fill("x".repeat(LONG));
    await page.locator(tid("where-submit")).click();
    const error = page.locator(`${tid("where-result")} ${tid("error")}`);
    await error.waitFor({ timeout: TIMEOUT });
    out.long_phrase = {
      error: await error.textContent(),
      status: await error.getAttribute("data-status"),
      fields: await texts(page, "field-violation"),
    };
  });

  if (OTHER) {
    await step("another tenant's episode", async () => {
      await page.goto(`${BASE}/#/episodes/${encodeURIComponent(OTHER)}`);
      const error = page.locator(tid("error"));
      await error.first().waitFor({ timeout: TIMEOUT });
      out.other_tenant = {
        error: await error.first().textContent(),
        status: await error.first().getAttribute("data-status"),
        log_messages: await page.locator(tid("log-message")).count(),
      };
      await shot(page, "07-other-tenant");
    });
  }

  if (RECAP_EPISODE && RECAP_PHRASE) {
    await step("the re-compaction case", async () => {
      await page.goto(`${BASE}/#/episodes/${encodeURIComponent(RECAP_EPISODE)}`);
      await page.locator(tid("model-call")).first().waitFor({ timeout: TIMEOUT });
      out.recompaction = await tracePhrase(page, RECAP_PHRASE);
      await scrollUnderTopbar(page, tid("where-form"));
      await shot(page, "09-recompaction");
    });
  }

  if (EARLIER_EPISODE && EARLIER_CALL && EARLIER_PHRASE) {
    await step("recalled from earlier in this conversation", async () => {
      await page.goto(
        `${BASE}/#/episodes/${encodeURIComponent(EARLIER_EPISODE)}/calls/${encodeURIComponent(EARLIER_CALL)}`,
      );
      const call = await callView(page);
      const passages = await page.locator(tid("earlier-passage")).evaluateAll((rows) =>
        rows.map((r) => ({ fate: r.dataset.fate, seqs: r.dataset.seqs.split(" ").map(Number), text: r.textContent })),
      );
      // the passage's "#1" shows log message 1, loading the earlier pages of the log
      await page.locator(`${tid("earlier-passage")} button`).filter({ hasText: /^#1$/ }).first().click();
      await page.locator(`${tid("log-message")}[data-seq="1"]`).waitFor({ timeout: TIMEOUT });
      out.earlier = { call, passages, badge: await logBadge(page, 1) };
      // taller, down to the passages: docs/inspector-earlier.png is a copy of it
      await page.setViewportSize({ width: 1440, height: 1250 });
      await scrollUnderTopbar(page, tid("token-bars"));
      await shot(page, "10-earlier-call");
      await page.setViewportSize({ width: 1440, height: 900 });
      out.earlier.trace = await tracePhrase(page, EARLIER_PHRASE);
      out.earlier.traced_badge = await logBadge(page, 1);
      await scrollUnderTopbar(page, tid("where-form"));
      await shot(page, "11-earlier-where");
    });
  }

  await step("forget the key", async () => {
    const forget = page.locator(tid("forget-key"));
    out.forget_visible = await forget.isVisible();
    if (out.forget_visible) {
      await forget.click();
      await page.locator(tid("key-form")).waitFor({ timeout: TIMEOUT });
      out.after_forget = {
        asked: await page.locator(tid("key-form")).isVisible(),
        stored: await page.evaluate(() => sessionStorage.length),
      };
    }
  });
}

async function main() {
  const lacking = missing();
  if (lacking.length) {
    out.driver_error = `missing environment: ${lacking.join(", ")}`;
    return 2;
  }
  if (SHOTS) mkdirSync(SHOTS, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), "episodic-inspector-chromium-"));
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: env.CHROMIUM || "/usr/bin/chromium",
      headless: true,
      viewport: { width: 1440, height: 900 },
      deviceScaleFactor: 1,
      timeout: 30000,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
      ],
    });
    context.setDefaultTimeout(TIMEOUT);
    await context.exposeBinding("__episodicCspViolation", (_source, violation) => {
      out.csp_violations.push(violation);
    });
    await context.addInitScript(() => {
      document.addEventListener("securitypolicyviolation", (e) => {
        window.__episodicCspViolation({
          directive: e.violatedDirective,
          blocked: e.blockedURI,
          sample: e.sample,
          source: e.sourceFile,
          line: e.lineNumber,
        });
      });
    });
    const page = context.pages()[0] || (await context.newPage());
    page.on("console", (msg) => {
      if (msg.type() === "error" || msg.type() === "warning") {
        out.console.push({ type: msg.type(), text: msg.text(), url: msg.location().url || "" });
      }
    });
    page.on("pageerror", (error) => out.page_errors.push(String(error && error.stack ? error.stack : error)));
    page.on("request", (request) => {
      const url = request.url();
      if ((KEY && url.includes(KEY)) || url.includes(WRONG_KEY)) out.urls_with_key.push(url);
      if (new URL(url).pathname.startsWith("/api/") && !request.headers().authorization) {
        out.api_requests_without_auth.push(url);
      }
    });
    page.on("requestfailed", (request) =>
      out.failed_requests.push({ url: request.url(), error: request.failure()?.errorText || "" }),
    );
    await drive(page);
    out.ok = true;
    return 0;
  } catch (error) {
    out.driver_error = String(error && error.stack ? error.stack : error);
    try {
      const page = context && context.pages()[0];
      if (page && SHOTS) await shot(page, "99-driver-error");
    } catch {
      /* the screenshot is a bonus */
    }
    return 1;
  } finally {
    if (context) await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  }
}

const code = await main();
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(code);
