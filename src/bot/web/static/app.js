/*
 * Porthole web chat — plain JavaScript, no build step.
 *
 * Part 1 (must stay at the very top): console interceptor that forwards
 * browser console lines to the server over the WebSocket in debug mode.
 * Part 2: the chat application.
 */

/* ======================================================================
 * Part 1: console interceptor
 * ====================================================================== */
(function installConsoleForwarder() {
  'use strict';

  var LEVELS = ['log', 'info', 'warn', 'error'];
  var MAX_QUEUE = 200;
  var MAX_MESSAGE_CHARS = 16000;

  var original = {};
  var queue = [];
  var dropped = 0;
  var sender = null; // function(frameObject) -> boolean (true when sent)
  var busy = false; // re-entrancy guard: never forward while forwarding
  var urlDebug = readUrlDebug();
  // null = not yet known (waiting for /api/info): lines are queued meanwhile.
  var enabled = urlDebug ? true : null;

  function readUrlDebug() {
    try {
      var v = new URLSearchParams(window.location.search).get('debug');
      return v === '1' || v === 'true';
    } catch (_) {
      return false;
    }
  }

  function isErrorLike(v) {
    return (
      v instanceof Error ||
      (v !== null && typeof v === 'object' &&
        typeof v.message === 'string' && typeof v.stack === 'string')
    );
  }

  function formatError(err) {
    var name = err.name || 'Error';
    var head = name + ': ' + err.message;
    var stack = typeof err.stack === 'string' ? err.stack : '';
    if (!stack) return head;
    // V8 stacks already start with "Name: message"; Firefox/Safari stacks do not.
    return stack.indexOf(head) !== -1 ? stack : head + '\n' + stack;
  }

  function describeNode(node) {
    var s = '<' + String(node.nodeName || 'node').toLowerCase();
    if (node.id) s += '#' + node.id;
    if (typeof node.className === 'string' && node.className) {
      s += '.' + node.className.trim().split(/\s+/).join('.');
    }
    return s + '>';
  }

  function stringifyObject(obj) {
    var seen = typeof WeakSet === 'function' ? new WeakSet() : null;
    var out;
    try {
      out = JSON.stringify(obj, function (key, value) {
        if (typeof value === 'bigint') return value.toString() + 'n';
        if (typeof value === 'function') return '[Function ' + (value.name || 'anonymous') + ']';
        if (typeof value === 'symbol') return value.toString();
        if (value === undefined) return '[undefined]';
        if (value !== null && typeof value === 'object') {
          if (isErrorLike(value)) return formatError(value);
          if (typeof Node !== 'undefined' && value instanceof Node) return describeNode(value);
          if (seen) {
            if (seen.has(value)) return '[Circular]';
            seen.add(value);
          }
          if (value instanceof Map) return { '[Map]': Array.from(value.entries()) };
          if (value instanceof Set) return { '[Set]': Array.from(value.values()) };
        }
        return value;
      });
    } catch (_) {
      out = undefined;
    }
    if (typeof out !== 'string') {
      try {
        out = String(obj);
      } catch (_) {
        out = '[unprintable]';
      }
    }
    return out;
  }

  function formatArg(v) {
    if (typeof v === 'string') return v;
    if (v === undefined) return 'undefined';
    if (v === null) return 'null';
    var t = typeof v;
    if (t === 'number' || t === 'boolean' || t === 'bigint') return String(v);
    if (t === 'symbol') return v.toString();
    if (t === 'function') return '[Function ' + (v.name || 'anonymous') + ']';
    if (isErrorLike(v)) return formatError(v);
    if (typeof Node !== 'undefined' && v instanceof Node) return describeNode(v);
    return stringifyObject(v);
  }

  function formatArgs(args) {
    var parts = [];
    for (var i = 0; i < args.length; i++) parts.push(formatArg(args[i]));
    var msg = parts.join(' ');
    if (msg.length > MAX_MESSAGE_CHARS) {
      msg = msg.slice(0, MAX_MESSAGE_CHARS) + '… [truncated ' + (msg.length - MAX_MESSAGE_CHARS) + ' chars]';
    }
    return msg;
  }

  function printInternal(msg, err) {
    // Internal problems go to the original console only — never forwarded.
    try {
      (original.warn || original.log).call(console, '[porthole] ' + msg, err || '');
    } catch (_) {
      /* nothing more we can do */
    }
  }

  function enqueue(frame) {
    queue.push(frame);
    while (queue.length > MAX_QUEUE) {
      queue.shift();
      dropped++;
    }
  }

  function trySend(frame) {
    if (!sender) return false;
    try {
      return sender(frame) === true;
    } catch (err) {
      printInternal('console forwarding: send failed', err);
      return false;
    }
  }

  function flush() {
    if (enabled !== true || !sender || busy) return;
    busy = true;
    try {
      if (dropped > 0) {
        var note = {
          type: 'web_log',
          level: 'warn',
          message: '[porthole] ' + dropped + ' earlier console line(s) were dropped before the socket opened',
          timestamp: new Date().toISOString(),
        };
        if (!trySend(note)) return;
        dropped = 0;
      }
      while (queue.length > 0) {
        if (!trySend(queue[0])) return;
        queue.shift();
      }
    } finally {
      busy = false;
    }
  }

  function forward(level, args) {
    if (enabled === false || busy) return;
    busy = true;
    try {
      var frame = {
        type: 'web_log',
        level: level,
        message: formatArgs(args),
        timestamp: new Date().toISOString(),
      };
      if (!(enabled === true && queue.length === 0 && trySend(frame))) {
        enqueue(frame);
      }
    } catch (err) {
      printInternal('console forwarding failed', err);
    } finally {
      busy = false;
    }
  }

  LEVELS.forEach(function (level) {
    var orig = typeof console[level] === 'function' ? console[level] : console.log;
    original[level] = orig;
    console[level] = function () {
      try {
        orig.apply(console, arguments);
      } catch (_) {
        /* ignore */
      }
      forward(level, arguments);
    };
  });

  // Uncaught errors / rejections: forward only (the browser prints them itself).
  window.addEventListener('error', function (ev) {
    forward('error', ['Uncaught', ev && (ev.error || ev.message)]);
  });
  window.addEventListener('unhandledrejection', function (ev) {
    forward('error', ['Unhandled promise rejection:', ev && ev.reason]);
  });

  window.PortholeConsole = {
    /** URL debug wins; otherwise the server's setting decides. */
    setEnabled: function (on) {
      enabled = urlDebug || on === true;
      if (!enabled) {
        queue.length = 0;
        dropped = 0;
      } else {
        flush();
      }
    },
    isEnabled: function () {
      return enabled === true;
    },
    urlDebug: urlDebug,
    /** sendFn(frameObject) must return true when the frame was sent. */
    attach: function (sendFn) {
      sender = sendFn;
      flush();
    },
    detach: function () {
      sender = null;
    },
    original: original,
  };
})();

/* ======================================================================
 * Part 2: chat application
 * ====================================================================== */
(function portholeChat() {
  'use strict';

  var PAGE_SIZE = 50;
  var CONVERSATION_LIMIT = 100;
  var PING_INTERVAL_MS = 25000;
  var PHONE_QUERY = window.matchMedia('(max-width: 640px)');

  var $ = function (id) {
    return document.getElementById(id);
  };

  var els = {
    body: document.body,
    sidebar: $('sidebar'),
    sidebarToggle: $('sidebar-toggle'),
    sidebarClose: $('sidebar-close'),
    backdrop: $('sidebar-backdrop'),
    newConversation: $('new-conversation'),
    list: $('conversation-list'),
    listEmpty: $('conversation-empty'),
    status: $('connection-status'),
    version: $('app-version'),
    title: $('conversation-title'),
    modelBadge: $('model-badge'),
    provider: $('llm-provider'),
    model: $('llm-model'),
    debugBadge: $('debug-badge'),
    banner: $('banner'),
    bannerText: $('banner-text'),
    bannerClose: $('banner-close'),
    messages: $('messages'),
    composer: $('composer'),
    input: $('message-input'),
    send: $('send-button'),
  };

  var state = {
    info: null,
    conversations: [],
    currentId: null, // string | null (null = new, unsaved conversation)
    viewToken: 0, // bumps whenever the message view is replaced
    pending: new Map(), // request_id -> request record
    oldestId: null,
    hasMore: false,
    loadingOlder: false,
    toolIndex: new Map(), // tool_call_id -> tool element (history view)
    needsReload: false,
  };

  var ws = {
    sock: null,
    attempts: 0,
    reconnectTimer: null,
    pingTimer: null,
    clientId: null,
    everOpened: false,
  };

  /* ---------------- small helpers ---------------- */

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function newRequestId() {
    if (window.crypto && typeof window.crypto.randomUUID === 'function') {
      return window.crypto.randomUUID();
    }
    return 'r-' + Date.now().toString(36) + '-' + Math.random().toString(36).slice(2, 10);
  }

  function sameId(a, b) {
    return a !== null && a !== undefined && b !== null && b !== undefined && String(a) === String(b);
  }

  function parseTime(v) {
    if (v === null || v === undefined || v === '') return null;
    if (typeof v === 'number') return new Date(v < 1e12 ? v * 1000 : v);
    var s = String(v);
    // SQLite style "YYYY-MM-DD HH:MM:SS" (UTC, no zone).
    if (/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(s)) s = s.replace(' ', 'T') + 'Z';
    var d = new Date(s);
    return isNaN(d.getTime()) ? null : d;
  }

  function relativeTime(v) {
    var d = parseTime(v);
    if (!d) return '';
    var secs = (Date.now() - d.getTime()) / 1000;
    if (secs < 45) return 'just now';
    if (secs < 3600) return Math.round(secs / 60) + ' min ago';
    if (secs < 86400) return Math.round(secs / 3600) + ' h ago';
    if (secs < 2 * 86400) return 'yesterday';
    if (secs < 7 * 86400) return Math.floor(secs / 86400) + ' days ago';
    return d.toLocaleDateString(undefined, { month: 'short', day: 'numeric', year: 'numeric' });
  }

  function fullTime(v) {
    var d = parseTime(v);
    return d ? d.toLocaleString() : '';
  }

  async function api(path, options) {
    var opts = Object.assign({ headers: {} }, options || {});
    opts.headers = Object.assign({ Accept: 'application/json' }, opts.headers);
    if (opts.json !== undefined) {
      opts.body = JSON.stringify(opts.json);
      opts.headers['Content-Type'] = 'application/json';
      delete opts.json;
    }
    var res = await fetch(path, opts);
    var text = await res.text();
    var data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (_) {
        data = null;
      }
    }
    if (!res.ok) {
      var msg = (data && data.error) || text || res.statusText || 'request failed';
      var err = new Error(msg + ' (HTTP ' + res.status + ')');
      err.status = res.status;
      throw err;
    }
    return data;
  }

  var bannerTimer = null;
  function showBanner(message) {
    els.bannerText.textContent = message;
    els.banner.hidden = false;
    clearTimeout(bannerTimer);
    bannerTimer = setTimeout(hideBanner, 12000);
  }
  function hideBanner() {
    els.banner.hidden = true;
  }

  /* ---------------- content rendering ---------------- */

  // Splits text into plain segments and ``` fenced code segments.
  // An unterminated fence (while streaming) runs to the end of the text.
  function splitFences(text) {
    var lines = String(text).split('\n');
    var parts = [];
    var buf = [];
    var inCode = false;
    var lang = '';
    function flushText() {
      if (buf.length) parts.push({ type: 'text', text: buf.join('\n') });
      buf = [];
    }
    for (var i = 0; i < lines.length; i++) {
      var line = lines[i];
      var trimmed = line.trim();
      if (!inCode) {
        var one = /^```([^`]*)```$/.exec(trimmed);
        if (one && one[1]) {
          flushText();
          parts.push({ type: 'code', lang: '', code: one[1] });
          continue;
        }
        if (trimmed.indexOf('```') === 0) {
          flushText();
          inCode = true;
          lang = trimmed.slice(3).trim();
          continue;
        }
        buf.push(line);
      } else if (/^```\s*$/.test(trimmed)) {
        parts.push({ type: 'code', lang: lang, code: buf.join('\n') });
        buf = [];
        inCode = false;
      } else {
        buf.push(line);
      }
    }
    if (inCode) parts.push({ type: 'code', lang: lang, code: buf.join('\n'), open: true });
    else flushText();
    return parts;
  }

  function appendInline(parent, text) {
    var re = /`([^`\n]+)`/g;
    var last = 0;
    var m;
    while ((m = re.exec(text)) !== null) {
      if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
      parent.appendChild(el('code', 'inline', m[1]));
      last = re.lastIndex;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  function codeBlock(lang, code) {
    var wrap = el('div', 'codeblock');
    var head = el('div', 'codeblock-head');
    head.appendChild(el('span', 'codeblock-lang', lang || 'code'));
    var copy = el('button', 'codeblock-copy', 'Copy');
    copy.type = 'button';
    copy.addEventListener('click', function () {
      copyText(code).then(
        function () {
          copy.textContent = 'Copied';
          setTimeout(function () {
            copy.textContent = 'Copy';
          }, 1200);
        },
        function () {
          copy.textContent = 'Copy failed';
        }
      );
    });
    head.appendChild(copy);
    var pre = el('pre');
    pre.appendChild(el('code', null, code));
    wrap.appendChild(head);
    wrap.appendChild(pre);
    return wrap;
  }

  function copyText(text) {
    if (navigator.clipboard && navigator.clipboard.writeText) {
      return navigator.clipboard.writeText(text);
    }
    return new Promise(function (resolve, reject) {
      var ta = el('textarea');
      ta.value = text;
      ta.style.position = 'fixed';
      ta.style.opacity = '0';
      document.body.appendChild(ta);
      ta.select();
      var ok = false;
      try {
        ok = document.execCommand('copy');
      } catch (_) {
        ok = false;
      }
      ta.remove();
      if (ok) resolve();
      else reject(new Error('copy failed'));
    });
  }

  function renderContent(target, text) {
    target.textContent = '';
    var parts = splitFences(text || '');
    for (var i = 0; i < parts.length; i++) {
      var p = parts[i];
      if (p.type === 'code') target.appendChild(codeBlock(p.lang, p.code));
      else appendInline(target, p.text);
    }
  }

  /* ---------------- message elements ---------------- */

  function isNearBottom() {
    var m = els.messages;
    return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
  }

  function scrollToBottom() {
    els.messages.scrollTop = els.messages.scrollHeight;
  }

  function removeEmptyState() {
    var empty = els.messages.querySelector('.empty-state');
    if (empty) empty.remove();
  }

  function appendToView(node) {
    var stick = isNearBottom();
    removeEmptyState();
    els.messages.appendChild(node);
    if (stick) scrollToBottom();
  }

  function userMessage(text, createdAt) {
    var wrap = el('div', 'message user');
    var bubble = el('div', 'bubble');
    var content = el('div', 'content');
    renderContent(content, text);
    bubble.appendChild(content);
    wrap.appendChild(bubble);
    if (createdAt) wrap.title = fullTime(createdAt);
    return wrap;
  }

  function assistantMessage(text, stateName, createdAt) {
    var wrap = el('div', 'message assistant');
    wrap.dataset.state = stateName;
    var bubble = el('div', 'bubble');
    var content = el('div', 'content');
    if (stateName === 'pending') {
      var typing = el('span', 'typing');
      typing.setAttribute('aria-label', 'Waiting for reply');
      typing.appendChild(el('span'));
      typing.appendChild(el('span'));
      typing.appendChild(el('span'));
      content.appendChild(typing);
    } else {
      renderContent(content, text);
    }
    bubble.appendChild(content);
    wrap.appendChild(bubble);
    if (createdAt) wrap.title = fullTime(createdAt);
    return wrap;
  }

  function argsToText(args, pretty) {
    if (args === undefined || args === null) return '';
    var value = args;
    if (typeof args === 'string') {
      try {
        value = JSON.parse(args);
      } catch (_) {
        return args;
      }
    }
    try {
      return JSON.stringify(value, null, pretty ? 2 : 0);
    } catch (_) {
      return String(args);
    }
  }

  function toolMessage(name, args) {
    var wrap = el('div', 'message tool');
    wrap.dataset.status = 'running';
    wrap.dataset.tool = name || '';
    var details = el('details');
    var summary = el('summary');
    summary.appendChild(el('span', 'tool-icon', '\u0192'));
    summary.appendChild(el('span', 'tool-name', name || 'tool'));
    var compact = argsToText(args, false);
    summary.appendChild(el('span', 'tool-args', compact ? compact : ''));
    var status = el('span', 'tool-status', 'running\u2026');
    summary.appendChild(status);
    details.appendChild(summary);

    var body = el('div', 'tool-body');
    var argSection = el('div', 'tool-section');
    argSection.appendChild(el('div', 'tool-label', 'Arguments'));
    argSection.appendChild(el('pre', null, argsToText(args, true) || '(none)'));
    body.appendChild(argSection);
    details.appendChild(body);
    wrap.appendChild(details);
    return wrap;
  }

  // A stored tool message keeps only its text: the agent writes a failed call's result
  // as "Error: …" (src/bot/agents/tool_loop.rs), so a reloaded conversation marks the
  // call failed as it was marked live, and as the "What happened" panel marks it.
  function isStoredToolFailure(content) {
    return typeof content === 'string' && content.indexOf('Error: ') === 0;
  }

  function setToolResult(wrap, content, isError) {
    wrap.dataset.status = isError ? 'error' : 'ok';
    var status = wrap.querySelector('.tool-status');
    if (status) status.textContent = isError ? 'error' : 'done';
    var body = wrap.querySelector('.tool-body');
    var existing = body.querySelector('.tool-section.result');
    if (existing) existing.remove();
    var section = el('div', 'tool-section result');
    section.appendChild(el('div', 'tool-label', isError ? 'Error' : 'Result'));
    section.appendChild(el('pre', null, content === undefined || content === null ? '' : String(content)));
    body.appendChild(section);
  }

  function systemMessage(text) {
    var wrap = el('div', 'message system');
    var content = el('div', 'content');
    var t = String(text || '');
    content.textContent = t.length > 160 ? t.slice(0, 160) + '\u2026' : t;
    content.title = t;
    wrap.appendChild(content);
    return wrap;
  }

  function renderEmptyState() {
    if (els.messages.querySelector('.message')) return;
    var existing = els.messages.querySelector('.empty-state');
    if (existing) existing.remove();
    var box = el('div', 'empty-state');
    box.id = 'empty-state';
    box.appendChild(el('h2', null, 'Start a conversation'));
    var p = el('p');
    p.appendChild(document.createTextNode('Ask anything, or type '));
    p.appendChild(el('code', 'inline', '/help'));
    p.appendChild(document.createTextNode(' to see the available slash commands.'));
    box.appendChild(p);
    var suggestions = el('div', 'suggestions');
    var help = el('button', 'suggestion');
    help.type = 'button';
    help.appendChild(el('code', null, '/help'));
    help.appendChild(document.createTextNode(' \u2014 list commands'));
    help.addEventListener('click', function () {
      els.input.value = '/help';
      autosize();
      sendMessage();
    });
    suggestions.appendChild(help);
    box.appendChild(suggestions);
    var llm = state.info && state.info.llm;
    if (llm && llm.provider === 'offline') {
      box.appendChild(
        el(
          'p',
          'note',
          'No language model is configured, so Porthole is running in offline mode. Slash commands still work.'
        )
      );
    }
    els.messages.appendChild(box);
  }

  /* ---------------- views ---------------- */

  function clearView() {
    state.viewToken++;
    state.oldestId = null;
    state.hasMore = false;
    state.toolIndex = new Map();
    els.messages.textContent = '';
  }

  function setHash(id) {
    var url = window.location.pathname + window.location.search + (id ? '#/c/' + encodeURIComponent(id) : '');
    try {
      window.history.replaceState(null, '', url);
    } catch (_) {
      /* ignore */
    }
  }

  function hashConversationId() {
    var m = /^#\/c\/(.+)$/.exec(window.location.hash || '');
    return m ? decodeURIComponent(m[1]) : null;
  }

  function currentConversation() {
    for (var i = 0; i < state.conversations.length; i++) {
      if (sameId(state.conversations[i].id, state.currentId)) return state.conversations[i];
    }
    return null;
  }

  function updateTitle() {
    var conv = currentConversation();
    var title = state.currentId ? (conv && conv.title) || 'Untitled conversation' : 'New conversation';
    els.title.textContent = title;
    document.title = state.currentId ? title + ' \u00b7 Porthole' : 'Porthole';
  }

  function startNewConversation() {
    clearView();
    state.currentId = null;
    setHash(null);
    renderEmptyState();
    renderConversationList();
    updateTitle();
    updateSendButton();
    closeSidebar();
    if (!PHONE_QUERY.matches) els.input.focus();
  }

  function renderHistoryMessages(messages) {
    // Returns a fragment of rendered nodes (oldest first).
    var frag = document.createDocumentFragment();
    for (var i = 0; i < messages.length; i++) {
      var m = messages[i];
      var role = m.role;
      if (role === 'user') {
        frag.appendChild(userMessage(m.content || '', m.created_at));
      } else if (role === 'assistant') {
        if (m.content && m.content.trim()) {
          var a = assistantMessage(m.content, 'history', m.created_at);
          a.dataset.messageId = String(m.id);
          a._portholeText = m.content;
          frag.appendChild(a);
        }
        if (Array.isArray(m.tool_calls)) {
          for (var j = 0; j < m.tool_calls.length; j++) {
            var call = m.tool_calls[j] || {};
            var t = toolMessage(call.name, call.arguments);
            t.dataset.status = 'called';
            t.querySelector('.tool-status').textContent = 'called';
            if (call.id) state.toolIndex.set(String(call.id), t);
            frag.appendChild(t);
          }
        }
      } else if (role === 'tool') {
        var target = m.tool_call_id ? state.toolIndex.get(String(m.tool_call_id)) : null;
        if (!target) {
          target = toolMessage(m.name || 'tool', null);
          frag.appendChild(target);
        }
        setToolResult(target, m.content, isStoredToolFailure(m.content));
      } else if (role === 'system') {
        frag.appendChild(systemMessage(m.content));
      }
    }
    return frag;
  }

  function updateLoadOlderButton() {
    var btn = els.messages.querySelector('.load-older');
    if (state.hasMore && state.oldestId !== null) {
      if (!btn) {
        btn = el('button', 'load-older', 'Load earlier messages');
        btn.type = 'button';
        btn.addEventListener('click', loadOlder);
        els.messages.insertBefore(btn, els.messages.firstChild);
      }
    } else if (btn) {
      btn.remove();
    }
  }

  async function openConversation(id) {
    if (id === null || id === undefined) {
      startNewConversation();
      return;
    }
    clearView();
    state.currentId = String(id);
    setHash(state.currentId);
    renderConversationList();
    updateTitle();
    updateSendButton();
    closeSidebar();
    var token = state.viewToken;
    var loading = el('div', 'message system loading');
    loading.appendChild(el('div', 'content', 'Loading\u2026'));
    els.messages.appendChild(loading);
    try {
      var data = await api(
        '/api/conversations/' + encodeURIComponent(state.currentId) + '/messages?limit=' + PAGE_SIZE
      );
      if (token !== state.viewToken) return;
      loading.remove();
      var messages = (data && data.messages) || [];
      els.messages.appendChild(renderHistoryMessages(messages));
      if (window.PortholeTrace) window.PortholeTrace.attachHistory(els.messages, state.currentId);
      state.oldestId = messages.length ? messages[0].id : null;
      state.hasMore = !!(data && data.has_more);
      updateLoadOlderButton();
      renderEmptyState();
      scrollToBottom();
    } catch (err) {
      if (token !== state.viewToken) return;
      loading.remove();
      console.warn('[porthole] could not load conversation', state.currentId, err);
      showBanner('Could not load conversation: ' + err.message);
      if (err.status === 404) startNewConversation();
      else renderEmptyState();
    }
    if (!PHONE_QUERY.matches) els.input.focus();
  }

  async function loadOlder() {
    if (state.loadingOlder || !state.hasMore || state.oldestId === null || !state.currentId) return;
    state.loadingOlder = true;
    var token = state.viewToken;
    var btn = els.messages.querySelector('.load-older');
    if (btn) btn.textContent = 'Loading\u2026';
    try {
      var data = await api(
        '/api/conversations/' +
          encodeURIComponent(state.currentId) +
          '/messages?limit=' +
          PAGE_SIZE +
          '&before=' +
          encodeURIComponent(state.oldestId)
      );
      if (token !== state.viewToken) return;
      var messages = (data && data.messages) || [];
      var box = els.messages;
      var prevHeight = box.scrollHeight;
      var prevTop = box.scrollTop;
      var anchor = btn ? btn.nextSibling : box.firstChild;
      box.insertBefore(renderHistoryMessages(messages), anchor);
      if (messages.length) state.oldestId = messages[0].id;
      state.hasMore = !!(data && data.has_more) && messages.length > 0;
      box.scrollTop = prevTop + (box.scrollHeight - prevHeight);
    } catch (err) {
      showBanner('Could not load earlier messages: ' + err.message);
    } finally {
      state.loadingOlder = false;
      var b = els.messages.querySelector('.load-older');
      if (b) b.textContent = 'Load earlier messages';
      if (token === state.viewToken) updateLoadOlderButton();
    }
  }

  /* ---------------- conversation list ---------------- */

  var listRefresh = { running: false, again: false };

  async function refreshConversations() {
    if (listRefresh.running) {
      listRefresh.again = true;
      return;
    }
    listRefresh.running = true;
    try {
      var data = await api('/api/conversations?limit=' + CONVERSATION_LIMIT);
      state.conversations = (data && data.conversations) || [];
      renderConversationList();
      updateTitle();
    } catch (err) {
      console.warn('[porthole] could not load conversations', err);
    } finally {
      listRefresh.running = false;
      if (listRefresh.again) {
        listRefresh.again = false;
        refreshConversations();
      }
    }
  }

  function renderConversationList() {
    var list = els.list;
    list.textContent = '';
    var convs = state.conversations;
    els.listEmpty.hidden = convs.length > 0;
    for (var i = 0; i < convs.length; i++) {
      var c = convs[i];
      var li = el('li');
      var btn = el('button', 'conversation-item');
      btn.type = 'button';
      btn.dataset.id = String(c.id);
      if (sameId(c.id, state.currentId)) {
        btn.classList.add('active');
        btn.setAttribute('aria-current', 'true');
      }
      btn.appendChild(el('span', 'title', c.title || 'Untitled conversation'));
      var meta = [];
      var when = relativeTime(c.updated_at || c.created_at);
      if (when) meta.push(when);
      if (typeof c.message_count === 'number') {
        meta.push(c.message_count + (c.message_count === 1 ? ' message' : ' messages'));
      }
      btn.appendChild(el('span', 'meta', meta.join(' \u00b7 ')));
      btn.title = c.title || '';
      li.appendChild(btn);
      list.appendChild(li);
    }
  }

  /* ---------------- sending & streaming ---------------- */

  function isBusy() {
    var busy = false;
    state.pending.forEach(function (req) {
      if (req.viewToken === state.viewToken) busy = true;
    });
    return busy;
  }

  function updateSendButton() {
    els.send.disabled = isBusy() || !els.input.value.trim();
  }

  function autosize() {
    var ta = els.input;
    ta.style.height = 'auto';
    ta.style.height = Math.min(ta.scrollHeight, 200) + 'px';
  }

  function scheduleRender(req) {
    if (req.renderQueued) return;
    req.renderQueued = true;
    var run = function () {
      req.renderQueued = false;
      var stick = req.viewToken === state.viewToken && isNearBottom();
      renderContent(req.content, req.text);
      if (stick) scrollToBottom();
    };
    if (document.hidden) setTimeout(run, 50);
    else window.requestAnimationFrame(run);
  }

  function startBubble(req) {
    var bubble = assistantMessage('', 'pending');
    bubble.dataset.requestId = req.id;
    req.bubble = bubble;
    req.content = bubble.querySelector('.content');
    req.text = '';
    if (req.viewToken === state.viewToken) appendToView(bubble);
  }

  function sendMessage() {
    var text = els.input.value.trim();
    if (!text || isBusy()) return;
    els.input.value = '';
    autosize();
    hideBanner();

    appendToView(userMessage(text, new Date().toISOString()));
    scrollToBottom();

    var req = {
      id: newRequestId(),
      viewToken: state.viewToken,
      conversationId: state.currentId,
      priorText: '', // text of earlier segments (before tool calls)
      tools: [],
      via: 'ws',
    };
    startBubble(req);
    scrollToBottom();
    state.pending.set(req.id, req);
    updateSendButton();

    var sent = sendFrame({
      type: 'chat',
      content: text,
      conversation_id: state.currentId,
      request_id: req.id,
    });
    if (!sent) {
      req.via = 'http';
      sendOverHttp(req, text);
    }
  }

  async function sendOverHttp(req, text) {
    try {
      var body = { content: text };
      if (req.conversationId) body.conversation_id = req.conversationId;
      var data = await api('/api/messages', { method: 'POST', json: body });
      if (!state.pending.has(req.id)) return;
      onConversationId(req, data && data.conversation_id);
      finishRequest(req, (data && data.response) || '');
    } catch (err) {
      if (!state.pending.has(req.id)) return;
      failRequest(req, err.message);
    }
  }

  function onConversationId(req, conversationId) {
    if (conversationId === null || conversationId === undefined) return;
    req.conversationId = String(conversationId);
    if (req.viewToken === state.viewToken && !state.currentId) {
      state.currentId = req.conversationId;
      setHash(state.currentId);
      renderConversationList();
      updateTitle();
      refreshConversations();
    }
  }

  function onToken(req, text) {
    if (!text) return;
    if (req.bubble.dataset.state === 'pending') {
      req.bubble.dataset.state = 'streaming';
      req.content.textContent = '';
    }
    req.text += text;
    scheduleRender(req);
  }

  function onToolCall(req, name, args) {
    // If text was already streamed, keep it as its own bubble and continue
    // the reply in a fresh bubble below the tool call.
    var hadText = req.text && req.text.trim();
    var stick = req.viewToken === state.viewToken && isNearBottom();
    if (hadText) {
      renderContent(req.content, req.text);
      req.bubble.dataset.state = 'segment';
      req.priorText += req.text;
    }
    var tool = toolMessage(name, args);
    req.tools.push({ name: name, el: tool, done: false });
    if (hadText) {
      if (req.viewToken === state.viewToken) appendToView(tool);
      startBubble(req);
    } else {
      if (req.bubble.parentNode) req.bubble.parentNode.insertBefore(tool, req.bubble);
      if (stick) scrollToBottom();
    }
  }

  function onToolResult(req, name, content, isError) {
    var entry = null;
    for (var i = 0; i < req.tools.length; i++) {
      if (!req.tools[i].done && req.tools[i].name === name) {
        entry = req.tools[i];
        break;
      }
    }
    if (!entry) {
      var tool = toolMessage(name, null);
      entry = { name: name, el: tool, done: false };
      req.tools.push(entry);
      if (req.bubble.parentNode) req.bubble.parentNode.insertBefore(tool, req.bubble);
    }
    entry.done = true;
    setToolResult(entry.el, content, isError);
  }

  function finishRequest(req, response) {
    state.pending.delete(req.id);
    // Measure before the final text replaces the bubble: a reply that arrives in one
    // piece (no streaming) can grow the view by far more than the "near" margin.
    var stick = req.viewToken === state.viewToken && isNearBottom();
    var finalText = typeof response === 'string' ? response : '';
    if (req.priorText && finalText.indexOf(req.priorText) === 0) {
      finalText = finalText.slice(req.priorText.length).replace(/^\s+/, '');
    }
    if (!finalText.trim()) finalText = req.text || '';
    req.text = finalText;
    if (finalText.trim()) {
      renderContent(req.content, finalText);
    } else if (req.priorText) {
      req.bubble.remove(); // nothing after the tool calls
    } else {
      req.content.textContent = '';
      req.content.appendChild(el('em', null, '(empty reply)'));
    }
    // Tools that never reported a result are shown as finished.
    req.tools.forEach(function (t) {
      if (!t.done && t.el.dataset.status === 'running') {
        t.el.dataset.status = 'called';
        var s = t.el.querySelector('.tool-status');
        if (s) s.textContent = 'called';
      }
    });
    req.bubble.dataset.state = 'done';
    req.bubble._portholeText = req.text;
    if (req.traceId && window.PortholeTrace && req.bubble.parentNode) {
      window.PortholeTrace.attach(req.bubble, req.traceId);
    }
    if (req.viewToken === state.viewToken) {
      if (stick) scrollToBottom();
    } else if (req.conversationId && sameId(req.conversationId, state.currentId) && !isBusy()) {
      // The user navigated away and back: reload to show the stored reply.
      openConversation(state.currentId);
    }
    updateSendButton();
    refreshConversations();
  }

  function failRequest(req, message) {
    state.pending.delete(req.id);
    var stick = req.viewToken === state.viewToken && isNearBottom();
    if (req.bubble.dataset.state === 'pending') req.content.textContent = '';
    else renderContent(req.content, req.text);
    var err = el('div', 'error-text', message || 'Something went wrong.');
    req.content.appendChild(err);
    req.bubble.dataset.state = 'error';
    if (stick) scrollToBottom();
    updateSendButton();
    if (req.conversationId) refreshConversations();
  }

  /* ---------------- WebSocket ---------------- */

  function wsUrl() {
    var scheme = window.location.protocol === 'https:' ? 'wss://' : 'ws://';
    return scheme + window.location.host + '/ws';
  }

  function setConnection(status) {
    els.status.dataset.state = status;
    var label = els.status.querySelector('.label');
    label.textContent =
      status === 'connected' ? 'Connected' : status === 'connecting' ? 'Connecting\u2026' : 'Offline \u2014 reconnecting';
    els.body.dataset.connected = status === 'connected' ? 'true' : 'false';
  }

  // Raw sender: must never log (it is also used by the console forwarder).
  function sendFrame(obj) {
    var sock = ws.sock;
    if (!sock || sock.readyState !== WebSocket.OPEN) return false;
    try {
      sock.send(JSON.stringify(obj));
      return true;
    } catch (_) {
      return false;
    }
  }

  function connect() {
    clearTimeout(ws.reconnectTimer);
    ws.reconnectTimer = null;
    if (ws.sock && (ws.sock.readyState === WebSocket.OPEN || ws.sock.readyState === WebSocket.CONNECTING)) {
      return;
    }
    setConnection('connecting');
    var sock;
    try {
      sock = new WebSocket(wsUrl());
    } catch (err) {
      console.error('[porthole] could not open websocket', err);
      scheduleReconnect();
      return;
    }
    ws.sock = sock;

    sock.addEventListener('open', function () {
      if (ws.sock !== sock) return;
      var reconnected = ws.everOpened;
      ws.everOpened = true;
      ws.attempts = 0;
      setConnection('connected');
      window.PortholeConsole.attach(sendFrame);
      clearInterval(ws.pingTimer);
      ws.pingTimer = setInterval(function () {
        sendFrame({ type: 'ping' });
      }, PING_INTERVAL_MS);
      console.info('[porthole] websocket connected');
      if (reconnected) {
        refreshConversations();
        if (state.needsReload && state.currentId && !isBusy()) openConversation(state.currentId);
        state.needsReload = false;
      }
    });

    sock.addEventListener('message', function (ev) {
      handleFrame(ev.data);
    });

    sock.addEventListener('close', function (ev) {
      if (ws.sock !== sock) return;
      ws.sock = null;
      window.PortholeConsole.detach();
      clearInterval(ws.pingTimer);
      setConnection('disconnected');
      var failed = 0;
      state.pending.forEach(function (req) {
        if (req.via === 'ws') {
          failed++;
          failRequest(req, 'Connection lost before the reply finished. It may appear after reconnecting.');
        }
      });
      if (failed) state.needsReload = true;
      console.warn('[porthole] websocket closed (code ' + ev.code + '); reconnecting');
      scheduleReconnect();
    });

    sock.addEventListener('error', function () {
      /* a close event follows; reconnect is handled there */
    });
  }

  function scheduleReconnect() {
    if (ws.reconnectTimer) return;
    var base = Math.min(10000, 500 * Math.pow(2, ws.attempts));
    var delay = Math.round(base * (0.75 + Math.random() * 0.5));
    ws.attempts = Math.min(ws.attempts + 1, 10);
    ws.reconnectTimer = setTimeout(function () {
      ws.reconnectTimer = null;
      connect();
    }, delay);
  }

  function reconnectNow() {
    if (!ws.sock) {
      ws.attempts = 0;
      connect();
    }
  }

  function handleFrame(raw) {
    var msg;
    try {
      msg = JSON.parse(raw);
    } catch (err) {
      console.warn('[porthole] ignoring non-JSON frame', String(raw).slice(0, 200));
      return;
    }
    if (!msg || typeof msg !== 'object') return;
    var req = msg.request_id ? state.pending.get(msg.request_id) : null;

    switch (msg.type) {
      case 'hello':
        ws.clientId = msg.client_id || null;
        if (ws.clientId) els.body.dataset.clientId = ws.clientId;
        els.body.dataset.hello = 'true';
        break;
      case 'pong':
        break;
      case 'conversation':
        if (req) onConversationId(req, msg.conversation_id);
        break;
      case 'token':
        if (req) {
          if (msg.conversation_id && !req.conversationId) onConversationId(req, msg.conversation_id);
          onToken(req, typeof msg.text === 'string' ? msg.text : '');
        }
        break;
      case 'tool_call':
        if (req) onToolCall(req, msg.name, msg.arguments);
        break;
      case 'tool_result':
        if (req) onToolResult(req, msg.name, msg.content, msg.is_error === true);
        break;
      case 'done':
        if (req) {
          if (msg.conversation_id && !req.conversationId) onConversationId(req, msg.conversation_id);
          if (typeof msg.trace_id === 'string') req.traceId = msg.trace_id;
          finishRequest(req, msg.response);
        } else {
          refreshConversations();
        }
        break;
      case 'error':
        if (req) {
          failRequest(req, msg.message || 'The server reported an error.');
        } else {
          console.warn('[porthole] server error:', msg.message);
          showBanner(msg.message || 'The server reported an error.');
        }
        break;
      default:
        console.info('[porthole] ignoring frame of type', msg.type);
    }
  }

  /* ---------------- server info ---------------- */

  async function loadInfo() {
    try {
      var info = await api('/api/info');
      state.info = info || {};
      var llm = state.info.llm || {};
      var provider = llm.provider || 'unknown';
      els.provider.textContent = provider;
      // The offline provider has no model (the server reports "none").
      var model = llm.model && provider !== 'offline' ? String(llm.model) : '';
      els.model.textContent = model;
      els.modelBadge.dataset.provider = provider;
      els.modelBadge.title = 'LLM provider: ' + provider + (model ? ' \u00b7 model: ' + model : '');
      if (state.info.version) els.version.textContent = 'v' + state.info.version;
      window.PortholeConsole.setEnabled(state.info.web_console_forwarding === true);
    } catch (err) {
      els.provider.textContent = 'unknown';
      window.PortholeConsole.setEnabled(false);
      console.warn('[porthole] could not load /api/info', err);
    }
    els.debugBadge.hidden = !window.PortholeConsole.isEnabled();
    // Refresh the offline note in the empty state, if shown.
    if (els.messages.querySelector('.empty-state')) renderEmptyState();
  }

  /* ---------------- sidebar (phone) ---------------- */

  function openSidebar() {
    els.body.classList.add('sidebar-open');
    els.backdrop.hidden = false;
    els.sidebarToggle.setAttribute('aria-expanded', 'true');
  }

  function closeSidebar() {
    els.body.classList.remove('sidebar-open');
    els.backdrop.hidden = true;
    els.sidebarToggle.setAttribute('aria-expanded', 'false');
  }

  /* ---------------- wiring ---------------- */

  function bindEvents() {
    els.composer.addEventListener('submit', function (ev) {
      ev.preventDefault();
      sendMessage();
    });
    els.input.addEventListener('keydown', function (ev) {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing && ev.keyCode !== 229) {
        ev.preventDefault();
        sendMessage();
      }
    });
    els.input.addEventListener('input', function () {
      autosize();
      updateSendButton();
    });
    els.newConversation.addEventListener('click', startNewConversation);
    els.list.addEventListener('click', function (ev) {
      var btn = ev.target.closest('.conversation-item');
      if (!btn) return;
      if (sameId(btn.dataset.id, state.currentId)) {
        closeSidebar();
        return;
      }
      openConversation(btn.dataset.id);
    });
    els.sidebarToggle.addEventListener('click', function () {
      if (els.body.classList.contains('sidebar-open')) closeSidebar();
      else openSidebar();
    });
    els.sidebarClose.addEventListener('click', closeSidebar);
    els.backdrop.addEventListener('click', closeSidebar);
    els.bannerClose.addEventListener('click', hideBanner);
    document.addEventListener('keydown', function (ev) {
      if (ev.key === 'Escape') closeSidebar();
    });
    var onMedia = function () {
      if (!PHONE_QUERY.matches) closeSidebar();
      els.input.placeholder = PHONE_QUERY.matches
        ? 'Message Porthole\u2026'
        : 'Message Porthole\u2026  (Enter to send, Shift+Enter for a new line)';
    };
    if (PHONE_QUERY.addEventListener) PHONE_QUERY.addEventListener('change', onMedia);
    else if (PHONE_QUERY.addListener) PHONE_QUERY.addListener(onMedia);
    onMedia();
    window.addEventListener('hashchange', function () {
      var id = hashConversationId();
      if (!sameId(id, state.currentId) && !(id === null && state.currentId === null)) openConversation(id);
    });
    document.addEventListener('visibilitychange', function () {
      if (!document.hidden) reconnectNow();
    });
    window.addEventListener('online', reconnectNow);
    // Relative times in the sidebar go stale; refresh them now and then.
    setInterval(renderConversationList, 60000);
  }

  function init() {
    bindEvents();
    connect();
    loadInfo();
    refreshConversations();
    var id = hashConversationId();
    if (id) openConversation(id);
    else startNewConversation();
    updateSendButton();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
