#!/usr/bin/env node
// A fake OpenAI-compatible provider for scripts/browser-e2e.sh: the page's Replay button
// needs a bot on a real provider (the offline one has nothing to replay).
//
// A real HTTP server on 127.0.0.1 (a free port) that answers every
// `POST .../chat/completions` with a short streamed reply in OpenAI's wire format (text
// deltas, a finish reason, a usage chunk without choices, `data: [DONE]`). The reply
// quotes the start of the system prompt, so a replay with another one answers
// differently. Prints `PORT <n>` once listening. Node's standard library only.
import { createServer } from 'node:http';

function reply(request) {
  const messages = Array.isArray(request.messages) ? request.messages : [];
  const system = messages.find((m) => m.role === 'system');
  const prompt = String((system && system.content) || '').split('\n')[0].slice(0, 60);
  return `Answered under the system prompt "${prompt}".`;
}

function chunk(value) {
  return `data: ${JSON.stringify(value)}\n\n`;
}

const server = createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (part) => {
    body += part;
  });
  req.on('end', () => {
    let request;
    try {
      request = JSON.parse(body);
    } catch {
      request = null;
    }
    if (req.method !== 'POST' || !req.url.endsWith('/chat/completions') || !request) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'expected a JSON chat completion request' } }));
      return;
    }
    const words = reply(request).split(/(?<= )/);
    const events = words.map((w) => chunk({ choices: [{ index: 0, delta: { content: w } }] }));
    events.push(chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
    events.push(chunk({ choices: [], usage: { prompt_tokens: 20, completion_tokens: words.length } }));
    events.push('data: [DONE]\n\n');
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(events.join(''));
  });
});

server.listen(0, '127.0.0.1', () => {
  console.log(`PORT ${server.address().port}`);
});
