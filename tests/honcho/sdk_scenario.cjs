// The same v3 scenario as sdk_scenario.py, through the official TypeScript SDK (@honcho-ai/sdk),
// run with Node: `node sdk_scenario.cjs URL KEY` with NODE_PATH naming a node_modules folder that
// holds the SDK. It prints one JSON object (what each step saw); the Python test asserts on it.
// The TypeScript SDK has no synchronous client and names options in camelCase; otherwise every
// step is the Python one.
const { Honcho } = require("@honcho-ai/sdk");

async function all(page) {
  const out = [];
  for await (const item of await page) out.push(item);
  return out;
}

async function status(call) {
  try { await call(); return 200; } catch (err) { return err.status || err.statusCode || 0; }
}

async function main() {
  const [url, apiKey, workspace = "contract"] = process.argv.slice(2);
  const honcho = new Honcho({ baseURL: url, apiKey, workspaceId: workspace, maxRetries: 0 });
  const seen = {};
  await honcho.setMetadata({ team: "bees" });
  seen.workspace_metadata = await honcho.getMetadata();
  seen.workspaces = await all(honcho.workspaces());
  const alice = await honcho.peer("alice", { metadata: { role: "user", level: 3 }, configuration: { observeMe: true } });
  seen.alice_metadata = await alice.getMetadata();
  const bob = await honcho.peer("bob", { metadata: { role: "bot", level: 1 } });
  await bob.setMetadata({ role: "bot", level: 7 });
  seen.bob_metadata = await bob.getMetadata();
  seen.users = (await all(honcho.peers({ filters: { metadata: { role: "user" } } }))).map((p) => p.id);
  seen.levelled = (await all(honcho.peers({ filters: { metadata: { level: { gte: 3 } } } }))).map((p) => p.id).sort();
  await honcho.session("s1", { metadata: { topic: "old" } });
  const s1 = await honcho.session("s1", { metadata: { topic: "bees" } });
  seen.s1_metadata = await s1.getMetadata();
  await s1.setMetadata({ topic: "bees", v: 2 });
  seen.s1_updated = await s1.getMetadata();
  await honcho.session("s2", { metadata: { topic: "tea" } });
  seen.sessions_bees = (await all(honcho.sessions({ filters: { metadata: { topic: "bees" } } }))).map((s) => s.id);
  await s1.addPeers([alice, bob]);
  await s1.setPeerConfiguration(alice, { observeOthers: true });
  seen.alice_config = (await s1.getPeerConfiguration(alice)).observeOthers;
  await s1.removePeers([bob]);
  seen.members_after_remove = (await s1.peers()).map((p) => p.id).sort();
  await s1.setPeers([alice, bob]);
  seen.members_after_set = (await s1.peers()).map((p) => p.id).sort();
  seen.alice_sessions = (await all(alice.sessions())).map((s) => s.id);
  const made = await s1.addMessages([
    alice.message("I keep bees on the roof", { metadata: { n: 1 } }),
    bob.message("Bees need water", { metadata: { n: 2 } }),
    alice.message("Honey comes in July", { metadata: { n: 3 } }),
  ]);
  seen.message_ids = made.map((m) => m.id);
  const fresh = await honcho.session("never-created-ts");
  seen.never_created_messages = await all(fresh.messages());
  const late = await honcho.session("late");
  await late.addMessages([alice.message("first words")]);
  seen.late_messages = (await all(late.messages())).map((m) => m.content);
  seen.filtered = (await all(s1.messages({ filters: { metadata: { n: { gte: 2 } } } }))).map((m) => m.content);
  seen.got_message = (await s1.getMessage(made[0].id)).content;
  await s1.updateMessage(made[0].id, { n: 1, edited: true });
  seen.updated_message = (await s1.getMessage(made[0].id)).metadata;
  const clone = await s1.clone(made[1].id);
  seen.clone_count = (await all(clone.messages())).length;
  seen.workspace_search = (await honcho.search("bees")).map((m) => m.content);
  seen.session_search = (await s1.search("honey")).map((m) => m.content);
  seen.peer_search = (await alice.search("bees", { filters: { session_id: "s1" } })).map((m) => m.content);
  await alice.setCard(["Keeps bees", "Lives in town"]);
  seen.card = await alice.getCard();
  seen.representation = await alice.representation();
  seen.session_representation = await s1.representation(alice);
  const peerContext = await alice.context();
  seen.peer_context_card = peerContext.peerCard;
  seen.chat = await alice.chat("what about bees?");
  let streamed = "";
  const stream = await alice.chatStream("bees");
  for await (const chunk of stream) streamed += chunk;
  seen.chat_stream = streamed;
  const context = await s1.context({ tokens: 1000, peerTarget: "alice" });
  seen.context_messages = context.messages.length;
  seen.context_summary = context.summary ? context.summary.content : null;
  seen.summaries = (await s1.summaries()).shortSummary != null;
  const notes = [];
  for (let n = 4; n <= 20; n++) notes.push(alice.message(`bee note ${n}`));
  const lastNote = (await s1.addMessages(notes)).at(-1);
  const contextAt20 = await s1.context({ tokens: 1000 });
  seen.context_summary_at_20 = contextAt20.summary ? contextAt20.summary.content : null;
  const at20 = await s1.summaries();
  seen.summaries_at_20 = [at20.shortSummary != null && at20.shortSummary.messageId === lastNote.id,
    at20.longSummary == null];
  const created = await alice.conclusionsOf(alice).create([{ content: "likes bees", sessionId: "s1" }]);
  seen.conclusions = (await all(honcho.conclusions.list())).map((c) => c.content);
  seen.queried = (await alice.conclusionsOf(alice).query("bees")).map((c) => c.content);
  await alice.conclusionsOf(alice).delete(created[0].id);
  seen.conclusions_after_delete = (await all(honcho.conclusions.list())).map((c) => c.content);
  await honcho.scheduleDream({ observer: alice });
  seen.queue = (await honcho.queueStatus()).inProgressWorkUnits;
  const docs = await honcho.session("docs");
  const uploaded = await docs.uploadFile({ filename: "notes.txt", content: Buffer.from("lorem ipsum ".repeat(2500)),
    content_type: "text/plain" }, bob, { metadata: { src: "notes" } });
  seen.upload = [uploaded.map((m) => m.content.length), uploaded[0].metadata];
  const s2 = await honcho.session("s2");
  await s2.delete();
  seen.s2_after_delete = await status(() => s2.getMetadata());
  seen.workspace_delete_with_sessions = await status(() => honcho.deleteWorkspace(workspace));
  for (const session of await all(honcho.sessions())) await session.delete();
  seen.workspace_delete = await status(() => honcho.deleteWorkspace(workspace));
  seen.workspaces_after_delete = await all(honcho.workspaces());
  process.stdout.write(JSON.stringify(seen));
}

main().catch((err) => { process.stderr.write(String(err && err.stack || err)); process.exit(1); });
