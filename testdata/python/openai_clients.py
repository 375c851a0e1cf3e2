"""Apps written for OpenAI with its Python SDKs, run against terp serve.

Used by TestPythonSDKs (internal/serve/openaiapi/python_test.go): the
official `openai` SDK as docs/serve.md shows it (files, responses with the
code interpreter, a stream, containers, chat completions with the alias
model), and the Agents SDK (`openai-agents`) with its CodeInterpreterTool
and with a function tool of its own. Each flow prints one JSON line.

Usage: python openai_clients.py BASE_URL KEY
"""

import asyncio
import json
import sys

from openai import OpenAI, AsyncOpenAI


def report(flow, **fields):
    print(json.dumps({"flow": flow, **fields}), flush=True)


def sdk(base, key):
    client = OpenAI(base_url=base, api_key=key, max_retries=0)

    # files + responses: an uploaded CSV reaches the code.
    f = client.files.create(file=("sales.csv", b"region,revenue\nnorth,100\nsouth,250\n"), purpose="user_data")
    resp = client.responses.create(
        model="test-model",
        input="Sum the revenue in sales.csv.",
        tools=[{"type": "code_interpreter", "container": {"type": "auto", "file_ids": [f.id]}}],
        include=["code_interpreter_call.outputs"],
    )
    call = next(item for item in resp.output if item.type == "code_interpreter_call")
    report("files", status=resp.status, output_text=resp.output_text, container_id=call.container_id,
           logs=call.outputs[0].logs if call.outputs else "")

    # a stream of the code interpreter's events.
    types, text = [], ""
    with client.responses.stream(
        model="test-model",
        input="Stream: what is 2 to the 10th?",
        tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
    ) as stream:
        for event in stream:
            types.append(event.type)
            if event.type == "response.output_text.delta":
                text += event.delta
        final = stream.get_final_response()
    report("stream", types=types, text=text, completed_text=final.output_text, completed_status=final.status)

    # containers and their files.
    c = client.containers.create(name="python-sdk")
    client.containers.files.create(container_id=c.id, file=("notes.txt", b"kept"))
    listed = [x.path for x in client.containers.files.list(container_id=c.id)]
    body = client.containers.files.content.retrieve(
        container_id=c.id, file_id=client.containers.files.list(container_id=c.id).data[0].id).read()
    client.containers.delete(c.id)
    gone = c.id not in [x.id for x in client.containers.list()]
    report("containers", name=c.name, listed=listed, content=body.decode(), gone=gone)

    # chat completions with the alias model, as a chat UI sends them.
    raw = client.chat.completions.with_raw_response.create(
        model="test-model+python", messages=[{"role": "user", "content": "Chat: what is 6 times 7?"}])
    chat = raw.parse()
    report("chat", content=chat.choices[0].message.content, container=raw.headers.get("x-terp-container", ""))


async def agents(base, key):
    from agents import Agent, CodeInterpreterTool, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base, api_key=key, max_retries=0)
    model = OpenAIResponsesModel(model="test-model", openai_client=client)

    analyst = Agent(name="analyst", instructions="Compute with code.", model=model,
                    tools=[CodeInterpreterTool(tool_config={"type": "code_interpreter", "container": {"type": "auto"}})])
    result = await Runner.run(analyst, "Agent: what is 6 times 7?")
    report("agent_code", output=str(result.final_output))

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny, 21 C in {city}"

    helper = Agent(name="helper", instructions="Use your tools.", model=model, tools=[get_weather])
    result = await Runner.run(helper, "Agent: the weather in Paris?")
    report("agent_function", output=str(result.final_output))


if __name__ == "__main__":
    base_url, api_key = sys.argv[1], sys.argv[2]
    sdk(base_url, api_key)
    asyncio.run(agents(base_url, api_key))
