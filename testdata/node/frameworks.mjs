// Agent frameworks against terp serve: the OpenAI Agents SDK's
// codeInterpreterTool and a function tool of its own, and the AI SDK's
// openai.tools.codeInterpreter, each pointed at terp serve as it would be
// at OpenAI. Used by TestNodeAgentFrameworks
// (internal/serve/openaiapi/node_test.go); each flow prints one JSON line.
//
// OPENAI_BASE_URL and OPENAI_API_KEY name terp serve and a key.

import OpenAI from 'openai';
import { Agent, run, codeInterpreterTool, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';
import { generateText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';

const baseURL = process.env.OPENAI_BASE_URL;
const apiKey = process.env.OPENAI_API_KEY;
const report = (flow, fields) => console.log(JSON.stringify({ flow, ...fields }));

setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey, maxRetries: 0 }));
setOpenAIAPI('responses');

const analyst = new Agent({
  name: 'analyst',
  instructions: 'Compute with code.',
  model: 'test-model',
  tools: [codeInterpreterTool({ container: { type: 'auto' } })],
});
let result = await run(analyst, 'Agents: what is 6 times 7?');
report('agents_code', { output: String(result.finalOutput) });

const getWeather = tool({
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `sunny, 21 C in ${city}`,
});
const helper = new Agent({ name: 'helper', instructions: 'Use your tools.', model: 'test-model', tools: [getWeather] });
result = await run(helper, 'Agents: the weather in Paris?');
report('agents_function', { output: String(result.finalOutput) });

const openai = createOpenAI({ baseURL, apiKey });
const { text } = await generateText({
  model: openai.responses('test-model'),
  prompt: 'AI SDK: what is 6 times 7?',
  tools: { code_interpreter: openai.tools.codeInterpreter({}) },
  maxRetries: 0,
});
report('ai_sdk_code', { output: text });
