// An app written for OpenAI's hosted code interpreter, pointed at terp serve
// by OPENAI_BASE_URL. It prints one JSON line per flow with what it saw, for
// TestNodeSDK to check, and exits non-zero on any error.
import OpenAI, { toFile } from "openai";

const client = new OpenAI({
  baseURL: process.env.OPENAI_BASE_URL,
  apiKey: process.env.OPENAI_API_KEY,
  // A failure should show as itself, not as a retry's.
  maxRetries: 0,
});
const model = "test-model";
const report = (flow, seen) => console.log(JSON.stringify({ flow, ...seen }));

// Upload a CSV and have the code interpreter read it and save a file.
const csv = "month,revenue\n2024-01,100\n2024-02,250\n";
const file = await client.files.create({
  file: await toFile(Buffer.from(csv), "sales.csv", { type: "text/csv" }),
  purpose: "user_data",
});
const first = await client.responses.create({
  model,
  input: "Total revenue in sales.csv, and double it into double.csv.",
  tools: [{ type: "code_interpreter", container: { type: "auto", file_ids: [file.id] } }],
  include: ["code_interpreter_call.outputs"],
});
const call = first.output.find((item) => item.type === "code_interpreter_call");
const message = first.output.find((item) => item.type === "message");
const citation = message.content
  .flatMap((part) => part.annotations ?? [])
  .find((a) => a.type === "container_file_citation");
report("files", {
  file_id: file.id,
  status: first.status,
  output_text: first.output_text,
  code: call.code,
  logs: call.outputs.filter((o) => o.type === "logs").map((o) => o.logs).join(""),
  container_id: call.container_id,
  citation,
});

// Read the file the answer cites from its container.
const content = await client.containers.files.content.retrieve(citation.file_id, {
  container_id: citation.container_id,
});
report("cited_file", { filename: citation.filename, content: await content.text() });

// A follow-up in the same container, which still holds the first run's
// variables.
const followUp = await client.responses.create({
  model,
  previous_response_id: first.id,
  input: "And twice the total?",
  tools: [{ type: "code_interpreter", container: { type: "auto" } }],
});
report("follow_up", { output_text: followUp.output_text, previous_response_id: followUp.previous_response_id });

// The same, streamed.
const stream = await client.responses.create({
  model,
  input: "What is 2 to the 10th?",
  tools: [{ type: "code_interpreter", container: { type: "auto" } }],
  stream: true,
});
const types = [];
const sequence = [];
let text = "";
let completed;
for await (const event of stream) {
  types.push(event.type);
  sequence.push(event.sequence_number);
  if (event.type === "response.output_text.delta") text += event.delta;
  if (event.type === "response.completed") completed = event.response;
}
// A streamed response object has no output_text of the SDK's making: the
// answer is in its message.
const completedText = completed.output
  .filter((item) => item.type === "message")
  .flatMap((item) => item.content)
  .map((part) => part.text)
  .join("");
report("stream", { types, sequence, text, completed_text: completedText, completed_status: completed.status });

// Containers: create, find it in the list, delete, and it is gone.
const container = await client.containers.create({ name: "node-sdk" });
const listed = [];
for await (const c of client.containers.list()) listed.push(c.id);
await client.containers.delete(container.id);
let gone = false;
try {
  await client.containers.retrieve(container.id);
} catch (err) {
  if (!(err instanceof OpenAI.NotFoundError)) throw err;
  gone = true;
}
report("containers", { name: container.name, status: container.status, listed: listed.includes(container.id), gone });

// A function tool of the app's own: the model calls it, the app runs it and
// sends back the output.
const getWeather = ({ city }) => `sunny, 21 C in ${city}`;
const tools = [
  { type: "code_interpreter", container: { type: "auto" } },
  {
    type: "function",
    name: "get_weather",
    description: "The weather in a city now.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    strict: false,
  },
];
const asked = await client.responses.create({ model, tools, input: "What is the weather in Paris?" });
const fnCall = asked.output.find((item) => item.type === "function_call");
const answered = await client.responses.create({
  model,
  tools,
  previous_response_id: asked.id,
  input: [{ type: "function_call_output", call_id: fnCall.call_id, output: getWeather(JSON.parse(fnCall.arguments)) }],
});
report("function", { name: fnCall.name, arguments: fnCall.arguments, output_text: answered.output_text });
