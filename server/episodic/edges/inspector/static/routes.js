// The inspector's addresses. Pages are hash routes (the server serves one page for all):
//   #/                                    agents
//   #/agents/<agent>                      its users
//   #/agents/<agent>/users/<user>         their episodes
//   #/episodes/<episode>[/calls/<call>[/context|/diff]]
// Every id is percent-encoded into a link or an /api path, and decoded when a route is read.

// A tagged template that percent-encodes every value put in it: encoded`/api/agents/${id}`.
export function encoded(strings, ...values) {
  return strings.reduce((text, next, i) => text + encodeURIComponent(values[i - 1]) + next);
}

export const AGENTS_HREF = "#/";

export function agentHref(agentId) {
  return encoded`#/agents/${agentId}`;
}

export function userHref(agentId, userId) {
  return encoded`#/agents/${agentId}/users/${userId}`;
}

export function episodeHref(episodeId) {
  return encoded`#/episodes/${episodeId}`;
}

export function callHref(episodeId, callId, tab = "") {
  return `${episodeHref(episodeId)}${encoded`/calls/${callId}`}${tab ? `/${tab}` : ""}`;
}

// The page a hash asks for: { page: "agents" | "users" | "episodes" | "episode" | "unknown", ...ids }.
export function parseRoute(hash) {
  const parts = decodedParts(hash);
  if (!parts) return { page: "unknown" };
  const [first, id, third, fourth, fifth] = parts;
  const n = parts.length;
  if (n === 0) return { page: "agents" };
  if (first === "agents" && n === 2) return { page: "users", agentId: id };
  if (first === "agents" && n === 4 && third === "users") return { page: "episodes", agentId: id, userId: fourth };
  if (first !== "episodes") return { page: "unknown" };
  if (n === 2) return { page: "episode", episodeId: id, callId: "", tab: "context" };
  if (third !== "calls") return { page: "unknown" };
  if (n === 4) return { page: "episode", episodeId: id, callId: fourth, tab: "context" };
  // "context" is the default tab, but a link may still name it (the selected call's own link)
  if (n === 5 && (fifth === "diff" || fifth === "context")) {
    return { page: "episode", episodeId: id, callId: fourth, tab: fifth };
  }
  return { page: "unknown" };
}

// The hash's non-empty parts, decoded; null when one is not valid percent-encoding.
function decodedParts(hash) {
  const parts = hash.replace(/^#\/?/, "").split("/").filter((p) => p !== "");
  try {
    return parts.map((p) => decodeURIComponent(p));
  } catch {
    return null;
  }
}
