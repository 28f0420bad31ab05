// Quickstart: create an agent, log a short conversation, stream the context of the next
// model call, close the episode.
//
//     node examples/quickstart.mjs [ADDRESS [API_KEY]]      (after npm ci && npm run build)
//
// ADDRESS defaults to $EPISODIC_ADDRESS or 127.0.0.1:50051; API_KEY to $EPISODIC_API_KEY or
// none at all, which a server started with `episodic serve --insecure-dev` accepts.
import { AlreadyExistsError, EpisodicClient, roleName } from "@episodic/client";

const AGENT_ID = "hr-assistant"; // the README's agent: created here if the grpcurl step was skipped
const [address = process.env.EPISODIC_ADDRESS ?? "127.0.0.1:50051", apiKey = process.env.EPISODIC_API_KEY] =
  process.argv.slice(2);

const client = new EpisodicClient(address, { apiKey: apiKey || undefined });
try {
  try {
    await client.createAgent(AGENT_ID, { systemPrompt: "You are a helpful HR assistant.", model: "gpt-4o" });
  } catch (error) {
    if (!(error instanceof AlreadyExistsError)) throw error; // created by an earlier run
  }

  const { episode } = await client.openEpisode(AGENT_ID, "user-42", { metadata: { channel: "cli" } });
  console.log(`opened episode ${episode.episodeId}`);
  await client.addMessage(episode.episodeId, "user", "How many vacation days do I have?");
  await client.addMessage(episode.episodeId, "assistant", "25 days a year.");

  console.log("context of the next model call:");
  for await (const frame of client.buildContext(episode.episodeId, { userMessage: "And sick days?" })) {
    for (const message of frame.messages) {
      // one line a message: a section's newlines would break the columns
      console.log(`  ${roleName(message.role).padEnd(10)} ${oneLine(message.content, 60)}`);
    }
    if (frame.report) console.log(`  (${frame.report.totalTokens} tokens, model call ${frame.report.modelCallId})`);
  }

  const closed = await client.closeEpisode(episode.episodeId, { note: "quickstart done" });
  console.log(`closed: ${closed.episode.messageCount} messages, ${closed.episode.tokenCount} tokens`);
} finally {
  client.close();
}

function oneLine(text, width) {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > width ? `${flat.slice(0, width - 1)}…` : flat;
}
