"""The official Python openai client against an OpenAI base URL (OPENAI_BASE_URL, OPENAI_API_KEY): a chat with and
without streaming, a completion, embeddings and the model list. Prints what it got as one JSON object."""

import json
import os

from openai import OpenAI

client = OpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"], max_retries=0, timeout=30)
messages = [{"role": "user", "content": "hello from python"}]
out = {}

chat = client.chat.completions.create(model="echo-model", messages=messages)
out["chat"] = {"content": chat.choices[0].message.content, "finish_reason": chat.choices[0].finish_reason, "usage": chat.usage.total_tokens}

pieces = []
for chunk in client.chat.completions.create(model="echo-model", messages=messages, stream=True):
    if chunk.choices and chunk.choices[0].delta.content:
        pieces.append(chunk.choices[0].delta.content)
out["chat_stream"] = "".join(pieces)

completion = client.completions.create(model="echo-model", prompt="say it again", max_tokens=3)
out["completion"] = {"text": completion.choices[0].text, "finish_reason": completion.choices[0].finish_reason}

pieces = []
for chunk in client.completions.create(model="echo-model", prompt="say it again", stream=True):
    pieces.append(chunk.choices[0].text)
out["completion_stream"] = "".join(pieces)

embeddings = client.embeddings.create(model="echo-model", input=["one two", "three"])
out["embeddings"] = [d.embedding for d in embeddings.data]

out["models"] = [m.id for m in client.models.list().data]

print(json.dumps(out))
