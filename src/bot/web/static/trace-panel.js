/*
 * Porthole web chat: the collapsed "What happened" panel under each answer.
 *
 * Opening it reads GET /api/traces/{trace_id} (read-only; the server redacts every
 * answer) and shows the turn's LLM calls, tool calls and worker agents as a timeline:
 * a bar for when each ran within the turn, its duration, tokens and error. Each row
 * opens to the full request and response it recorded; an LLM row also to its Replay
 * button (replay-form.js). Plain JavaScript, no build step; app.js calls
 * window.PortholeTrace.attach / attachHistory.
 */
(function tracePanel() {
  'use strict';

  var KIND_LABELS = { turn: 'turn', llm: 'LLM', tool: 'tool', agent: 'agent' };
  /* Attributes shown when a row is opened, in this order. */
  var PAYLOADS = ['input', 'request', 'tools_offered', 'parameters', 'response', 'arguments', 'result',
    'task', 'answer', 'output'];

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function ms(us) {
    var v = (us || 0) / 1000;
    return v >= 1000 ? (v / 1000).toFixed(2) + ' s' : v.toFixed(v < 10 ? 1 : 0) + ' ms';
  }

  function depthOf(span, byId) {
    var depth = 0;
    var parent = byId[span.parent_span_id];
    while (parent && depth < 32) {
      depth++;
      parent = byId[parent.parent_span_id];
    }
    return depth;
  }

  function spanLabel(span) {
    if (span.kind === 'llm') return span.model || span.name;
    if (span.kind === 'tool') return span.tool || span.name;
    return span.name;
  }

  function tokensText(span) {
    if (span.input_tokens == null && span.output_tokens == null) return '';
    return (span.input_tokens || 0) + '\u2192' + (span.output_tokens || 0) + ' tok';
  }

  function payloadText(value) {
    return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
  }

  function details(span, conversationId) {
    var box = el('div', 'trace-details');
    var attrs = span.attributes || {};
    if (span.error) box.appendChild(el('div', 'trace-error', span.error));
    var facts = [];
    if (attrs.provider) facts.push('provider ' + attrs.provider);
    if (attrs.finish_reason) facts.push('finish ' + attrs.finish_reason);
    if (typeof attrs.time_to_first_token_ms === 'number') {
      facts.push('first token ' + attrs.time_to_first_token_ms.toFixed(0) + ' ms');
    }
    if (attrs.source) facts.push('source ' + attrs.source);
    if (facts.length) box.appendChild(el('div', 'trace-facts', facts.join(' \u00b7 ')));
    PAYLOADS.forEach(function (key) {
      if (attrs[key] === undefined) return;
      box.appendChild(el('div', 'trace-key', key));
      box.appendChild(el('pre', 'trace-payload', payloadText(attrs[key])));
    });
    if (span.kind === 'llm' && conversationId && window.PortholeReplay) {
      window.PortholeReplay.attach(box, span, conversationId);
    }
    return box;
  }

  function row(span, depth, turnStart, turnLength, conversationId) {
    var item = el('details', 'trace-span');
    item.dataset.kind = span.kind;
    item.dataset.status = span.error ? 'error' : 'ok';
    var head = el('summary', 'trace-row');
    head.style.paddingLeft = (0.4 + depth * 1.1) + 'rem';
    head.appendChild(el('span', 'trace-kind', KIND_LABELS[span.kind] || span.kind));
    head.appendChild(el('span', 'trace-name', spanLabel(span)));
    var track = el('span', 'trace-track');
    var bar = el('span', 'trace-bar');
    var left = turnLength > 0 ? ((span.start_us - turnStart) / turnLength) * 100 : 0;
    var width = turnLength > 0 ? (span.duration_us / turnLength) * 100 : 100;
    bar.style.left = Math.max(0, Math.min(100, left)) + '%';
    bar.style.width = Math.max(0.8, Math.min(100 - left, width)) + '%';
    track.appendChild(bar);
    head.appendChild(track);
    head.appendChild(el('span', 'trace-duration', ms(span.duration_us)));
    head.appendChild(el('span', 'trace-tokens', tokensText(span)));
    if (span.error) head.appendChild(el('span', 'trace-failed', 'failed'));
    item.appendChild(head);
    item.appendChild(details(span, conversationId));
    return item;
  }

  function render(panel, spans) {
    var byId = {};
    spans.forEach(function (s) { byId[s.span_id] = s; });
    var start = Math.min.apply(null, spans.map(function (s) { return s.start_us; }));
    var end = Math.max.apply(null, spans.map(function (s) { return s.start_us + s.duration_us; }));
    var llm = spans.filter(function (s) { return s.kind === 'llm'; });
    var tools = spans.filter(function (s) { return s.kind === 'tool'; });
    var failed = spans.filter(function (s) { return !!s.error; }).length;
    var tokensIn = 0;
    var tokensOut = 0;
    llm.forEach(function (s) { tokensIn += s.input_tokens || 0; tokensOut += s.output_tokens || 0; });
    var summary = panel.querySelector('summary');
    summary.textContent = 'What happened \u00b7 ' + llm.length + ' LLM call' + (llm.length === 1 ? '' : 's') +
      ' \u00b7 ' + tools.length + ' tool call' + (tools.length === 1 ? '' : 's') + ' \u00b7 ' + ms(end - start) +
      (tokensIn || tokensOut ? ' \u00b7 ' + tokensIn + '\u2192' + tokensOut + ' tokens' : '') +
      (failed ? ' \u00b7 ' + failed + ' failed' : '');
    /* The turn's root names the conversation: the only one whose calls the page may replay. */
    var conversationId = (spans.filter(function (s) { return s.conversation_id; })[0] || {}).conversation_id;
    var list = el('div', 'trace-timeline');
    spans.forEach(function (s) {
      list.appendChild(row(s, depthOf(s, byId), start, end - start, conversationId));
    });
    panel.replaceChild(list, panel.querySelector('.trace-body'));
  }

  async function load(panel, traceId) {
    var body = panel.querySelector('.trace-body');
    try {
      var res = await fetch('/api/traces/' + encodeURIComponent(traceId), { headers: { Accept: 'application/json' } });
      var data = await res.json();
      if (!res.ok) throw new Error((data && data.error) || 'HTTP ' + res.status);
      render(panel, data.spans || []);
    } catch (err) {
      body.textContent = 'Could not load the trace: ' + err.message;
      console.warn('[porthole] could not load trace', traceId, err);
    }
  }

  /* Adds a collapsed panel for `traceId` at the end of `host` (an answer), once. */
  function attach(host, traceId) {
    if (!host || !traceId || host.querySelector('.trace-panel')) return;
    var panel = el('details', 'trace-panel');
    panel.dataset.traceId = traceId;
    panel.appendChild(el('summary', null, 'What happened'));
    panel.appendChild(el('div', 'trace-body', 'Loading\u2026'));
    panel.addEventListener('toggle', function () {
      if (panel.open && !panel.dataset.loaded) {
        panel.dataset.loaded = '1';
        load(panel, traceId);
      }
    });
    host.appendChild(panel);
  }

  /* For a conversation read from history: gives each shown answer the trace of the turn
   * that ended with that text (answers of turns recorded before tracing get none). */
  async function attachHistory(container, conversationId) {
    try {
      var res = await fetch('/api/conversations/' + encodeURIComponent(conversationId) + '/traces',
        { headers: { Accept: 'application/json' } });
      if (!res.ok) return;
      var traces = ((await res.json()) || {}).traces || [];
      var answers = container.querySelectorAll('.message.assistant');
      var used = {};
      Array.prototype.forEach.call(answers, function (node) {
        var text = (node._portholeText || '').trim();
        if (!text) return;
        for (var i = traces.length - 1; i >= 0; i--) {
          var t = traces[i];
          if (!used[t.trace_id] && typeof t.output === 'string' && t.output.trim() === text) {
            used[t.trace_id] = true;
            attach(node, t.trace_id);
            return;
          }
        }
      });
    } catch (err) {
      console.warn('[porthole] could not load the conversation\u2019s traces', err);
    }
  }

  window.PortholeTrace = { attach: attach, attachHistory: attachHistory, el: el };
})();
