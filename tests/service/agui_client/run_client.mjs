// Drives `turnlog serve` with @ag-ui/client's HttpAgent, as a frontend
// would, unmodified: threads the client makes up itself, a two-turn
// conversation, then an approval interrupt and its resume. Prints one JSON
// document of what the client saw, for tests/service/test_agui_client.py.
//
// Usage: TURNLOG_URL=http://127.0.0.1:PORT TURNLOG_TOKEN=... node run_client.mjs

import { randomUUID } from "node:crypto";

import { HttpAgent } from "@ag-ui/client";

const url = `${process.env.TURNLOG_URL}/agui`;
const headers = { Authorization: `Bearer ${process.env.TURNLOG_TOKEN}` };

function newAgent() {
  return new HttpAgent({ url, headers }); // a fresh threadId (a UUID)
}

function say(agent, text) {
  agent.addMessage({ id: randomUUID(), role: "user", content: text });
}

// One run: what it returned, and the type of every event in order.
async function run(agent, parameters) {
  const types = [];
  const subscriber = {
    onEvent({ event }) {
      types.push(event.type);
    },
  };
  const { result, newMessages } = await agent.runAgent(parameters, subscriber);
  return {
    result: result ?? null,
    types,
    newMessageRoles: newMessages.map((message) => message.role),
    pendingInterrupts: agent.pendingInterrupts,
  };
}

function transcript(agent) {
  return agent.messages.map((message) => ({
    role: message.role,
    content: message.content ?? null,
    toolCalls: (message.toolCalls ?? []).map((call) => ({
      name: call.function.name,
      arguments: JSON.parse(call.function.arguments),
    })),
  }));
}

async function conversation() {
  const agent = newAgent();
  const forwardedProps = { agent: "demo" };
  say(agent, "three little words");
  const first = await run(agent, { forwardedProps });
  say(agent, "and now five words here");
  const second = await run(agent, { forwardedProps });
  return {
    threadId: agent.threadId,
    runs: [first, second],
    messages: transcript(agent),
    state: agent.state,
  };
}

async function approval() {
  const agent = newAgent();
  say(agent, "go");
  const asked = await run(agent, { forwardedProps: { agent: "publisher" } });
  const resume = asked.pendingInterrupts.map((interrupt) => ({
    interruptId: interrupt.id,
    status: "resolved",
    payload: { decision: "allow" },
  }));
  const resumed = await run(agent, { resume });
  return {
    threadId: agent.threadId,
    asked,
    resumed,
    messages: transcript(agent),
  };
}

try {
  const report = {
    conversation: await conversation(),
    approval: await approval(),
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
} catch (error) {
  process.stdout.write(
    `${JSON.stringify({ error: String(error), status: error.status ?? null })}\n`,
  );
  process.exitCode = 1;
}
