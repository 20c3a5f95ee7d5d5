// Node preload (`node --import ./auth-inject.mjs <program>`) used by scripts/conformance.sh.
//
// The MCP conformance runner has no way to send extra HTTP headers, but the bot's /mcp
// endpoint requires `Authorization: Bearer <MCP_SERVER_SECRET>`. This module patches the
// three HTTP entry points the runner uses so that every request to the server under test
// carries that header:
//
//   - globalThis.fetch   the MCP SDK client transport and the raw stateless probes
//   - undici.request     dns-rebinding-protection (forged Host/Origin headers)
//   - http.request/get   raw requests with hand-picked header casing (header validation)
//
// Only requests whose origin equals the origin of MCP_TARGET_URL are touched, and only when
// they don't already carry an Authorization header (whatever its case).
//
// Environment:
//   MCP_TARGET_URL        the MCP endpoint, e.g. http://127.0.0.1:4321/mcp   (required)
//   MCP_TOKEN             the bearer token                                  (required)
//   CONFORMANCE_RUNNER    path of the runner's dist/index.js; `undici` is resolved from
//                         there so the patched module is the one the runner imports
//   AUTH_INJECT_DEBUG=1   print one line per injected request on stderr
import http from 'node:http';
import { createRequire, syncBuiltinESMExports } from 'node:module';

const token = process.env.MCP_TOKEN ?? '';
const target = process.env.MCP_TARGET_URL ?? '';
const debug = process.env.AUTH_INJECT_DEBUG === '1';

function originOf(value) {
  try {
    return new URL(String(value)).origin;
  } catch {
    return null;
  }
}

const targetOrigin = originOf(target);
const headerValue = `Bearer ${token}`;
let injected = 0;

function note(kind, method, url) {
  injected += 1;
  if (debug) process.stderr.write(`[auth-inject] ${kind} ${method ?? 'GET'} ${url}\n`);
}

function isTarget(url) {
  return targetOrigin !== null && originOf(url) === targetOrigin;
}

// Returns `headers` (any of the shapes Node/undici accept) with Authorization added when
// missing: a plain object, a flat [name, value, ...] array, an array of [name, value]
// pairs, a Headers-like object, or nothing at all.
function withAuth(headers) {
  if (headers == null) return { authorization: headerValue };
  if (typeof headers.has === 'function' && typeof headers.set === 'function') {
    const copy = new Headers(headers);
    if (!copy.has('authorization')) copy.set('authorization', headerValue);
    return copy;
  }
  if (Array.isArray(headers)) {
    if (headers.length > 0 && Array.isArray(headers[0])) {
      const present = headers.some(([name]) => String(name).toLowerCase() === 'authorization');
      return present ? headers : [...headers, ['authorization', headerValue]];
    }
    for (let i = 0; i < headers.length; i += 2) {
      if (String(headers[i]).toLowerCase() === 'authorization') return headers;
    }
    return [...headers, 'authorization', headerValue];
  }
  if (typeof headers === 'object') {
    if (Object.keys(headers).some((name) => name.toLowerCase() === 'authorization')) return headers;
    return { ...headers, authorization: headerValue };
  }
  return headers;
}

function hasAuth(headers) {
  return withAuth(headers) === headers;
}

if (token && targetOrigin) {
  // --- fetch ---------------------------------------------------------------------------
  const realFetch = globalThis.fetch;
  globalThis.fetch = function fetchWithAuth(resource, options) {
    const url =
      typeof resource === 'string' || resource instanceof URL ? String(resource) : resource?.url;
    if (isTarget(url)) {
      // Headers given in `options` replace the Request's own headers, as fetch() does.
      const current =
        options?.headers ?? (resource instanceof Request ? resource.headers : undefined);
      const headers = new Headers(current ?? undefined);
      if (!headers.has('authorization')) {
        headers.set('authorization', headerValue);
        note('fetch', options?.method ?? (resource instanceof Request ? resource.method : 'GET'), url);
      }
      options = { ...options, headers };
    }
    return realFetch.call(this, resource, options);
  };

  // --- undici.request --------------------------------------------------------------------
  // The runner does `import { request } from "undici"`. undici is CommonJS; its ESM facade
  // copies module.exports when first imported, so replacing the property now (before the
  // runner loads) is what the runner will see. Resolve it from the runner's location.
  try {
    const requireFrom = createRequire(process.env.CONFORMANCE_RUNNER || import.meta.url);
    const undici = requireFrom('undici');
    const realRequest = undici.request;
    undici.request = function requestWithAuth(url, opts, ...rest) {
      let target = url;
      if (url && typeof url === 'object' && !(url instanceof URL)) {
        // request({ origin, path, ... }) form
        target = url.origin ? new URL(url.path ?? '/', url.origin).href : undefined;
      }
      if (isTarget(target)) {
        if (url && typeof url === 'object' && !(url instanceof URL)) {
          if (!hasAuth(url.headers)) {
            url = { ...url, headers: withAuth(url.headers) };
            note('undici.request', url.method, target);
          }
        } else {
          const o = opts ?? {};
          if (!hasAuth(o.headers)) {
            opts = { ...o, headers: withAuth(o.headers) };
            note('undici.request', o.method, target);
          }
        }
      }
      return realRequest.call(this, url, opts, ...rest);
    };
  } catch (err) {
    process.stderr.write(
      `[auth-inject] undici not patched (${err.message}); dns-rebinding-protection will be unauthenticated\n`,
    );
  }

  // --- http.request / http.get -------------------------------------------------------------
  // Call forms: (options[, cb]), (url[, cb]), (url, options[, cb]).
  function urlOfOptions(o) {
    const protocol = o.protocol ?? 'http:';
    let host = o.hostname ?? o.host ?? 'localhost';
    if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`;
    const port = o.port ? `:${o.port}` : '';
    return `${protocol}//${host}${port}${o.path ?? '/'}`;
  }

  function patchArgs(args, kind) {
    let url;
    let idx;
    if (typeof args[0] === 'string' || args[0] instanceof URL) {
      url = String(args[0]);
      if (args[1] && typeof args[1] === 'object') idx = 1;
      else {
        args.splice(1, 0, {});
        idx = 1;
      }
    } else if (args[0] && typeof args[0] === 'object') {
      url = urlOfOptions(args[0]);
      idx = 0;
    } else {
      return args;
    }
    const o = args[idx];
    if (isTarget(url) && !hasAuth(o.headers)) {
      args[idx] = { ...o, headers: withAuth(o.headers) };
      note(kind, o.method, url);
    }
    return args;
  }

  const realHttpRequest = http.request;
  const realHttpGet = http.get;
  http.request = function httpRequestWithAuth(...args) {
    return realHttpRequest.apply(this, patchArgs(args, 'http.request'));
  };
  http.get = function httpGetWithAuth(...args) {
    return realHttpGet.apply(this, patchArgs(args, 'http.get'));
  };
  // Make `import { request } from "node:http"` see the patched functions too.
  syncBuiltinESMExports();

  process.on('exit', () => {
    if (debug) process.stderr.write(`[auth-inject] Authorization added to ${injected} request(s)\n`);
  });
} else if (debug) {
  process.stderr.write('[auth-inject] MCP_TOKEN or MCP_TARGET_URL missing: not injecting\n');
}
