// Calls a tool N times in a row with a progress token, reading each answer
// the way the conformance runner's stateless client does (fetch; an SSE
// body is cancelled once it holds the response), and prints one JSON
// line: {"calls": N, "incomplete": K, "first": "..."}.
//
// usage: node sequential_streams.mjs URL TOOL N
const [url, tool, n] = process.argv.slice(2);

async function readEvents(res, id) {
  const events = [];
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let err = null;
  try {
    for (;;) {
      let r;
      try {
        r = await reader.read();
      } catch (e) {
        err = e;
        break;
      }
      if (r.value) {
        buf += dec.decode(r.value, { stream: true });
        const lines = buf.split(/\r?\n/);
        buf = lines.pop() ?? "";
        for (const l of lines) {
          if (l.startsWith("data:")) {
            try { events.push(JSON.parse(l.slice(5))); } catch {}
          }
        }
        if (events.some((e) => e.id === id)) {
          await reader.cancel().catch(() => {});
          break;
        }
      }
      if (r.done) break;
    }
  } finally {
    try { reader.releaseLock(); } catch {}
  }
  return { events, err };
}

let incomplete = 0;
let first = "";
for (let id = 1; id <= Number(n); id++) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 10000);
  let problem = "";
  try {
    const res = await fetch(url, {
      method: "POST",
      signal: ac.signal,
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "Mcp-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
      },
      body: JSON.stringify({
        jsonrpc: "2.0", id, method: "tools/call",
        params: {
          name: tool, arguments: { steps: 2 },
          _meta: { progressToken: "p" + id, "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} },
        },
      }),
    });
    if ((res.headers.get("content-type") ?? "").includes("text/event-stream")) {
      const { events, err } = await readEvents(res, id);
      if (!events.some((e) => e.id === id && e.result)) problem = `call ${id}: the stream ended without the response (${err ?? "clean end"})`;
    } else {
      const body = await res.json().catch(() => null);
      if (!body?.result) problem = `call ${id}: HTTP ${res.status} without a result`;
    }
  } catch (e) {
    problem = `call ${id}: ${e}`;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  if (problem) {
    incomplete++;
    first ||= problem;
  }
}
console.log(JSON.stringify({ calls: Number(n), incomplete, first }));
