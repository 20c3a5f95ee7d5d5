/*
 * Porthole web chat: the Replay button of an LLM row in the "What happened" panel.
 *
 * It opens a form prefilled with what the call was sent (system prompt, model,
 * temperature, max_tokens). Submitting it posts what was changed to
 * POST /api/conversations/{id}/replay, which sends the recorded call to the same
 * provider once more (one call; the tools the model asks for are shown, never run),
 * and shows the new answer beside the original. "Replay from here" sends the same
 * changes with turn: true: the whole turn from this call on, step by step (recorded tool
 * results reused, no tool run), each step beside the original's, with where the replay
 * left the recording and a one-line verdict. The server checks everything (the values'
 * ranges, the per-minute budget, redacted parts); the form shows its refusals.
 * trace-panel.js calls window.PortholeReplay.attach.
 */
(function replayForm() {
  'use strict';

  var REDACTED = '[REDACTED]';

  /* trace-panel.js's element maker (that file loads after this one, before any click). */
  function el(tag, className, text) {
    return window.PortholeTrace.el(tag, className, text);
  }

  /* What the call was sent, as the form shows it ('' where nothing was recorded). */
  function recorded(span) {
    var attrs = span.attributes || {};
    var params = attrs.parameters || {};
    var request = Array.isArray(attrs.request) ? attrs.request : [];
    var system = request.length && request[0].role === 'system' ? request[0].content : '';
    var maxTokens = params.max_tokens != null ? params.max_tokens : params.max_completion_tokens;
    return {
      system: typeof system === 'string' ? system : '',
      model: String(params.model || span.model || ''),
      temperature: params.temperature != null ? String(params.temperature) : '',
      max_tokens: maxTokens != null ? String(maxTokens) : '',
      redacted: JSON.stringify(request).indexOf(REDACTED) >= 0,
    };
  }

  function field(form, label, input) {
    var wrap = el('label', 'replay-field');
    wrap.appendChild(el('span', 'replay-label', label));
    wrap.appendChild(input);
    form.appendChild(wrap);
    return input;
  }

  function input(type, value, attrs) {
    var node = el(type === 'textarea' ? 'textarea' : 'input');
    if (type !== 'textarea') node.type = type;
    node.value = value;
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    return node;
  }

  /* The body to send: the span, and only the values that differ from the recorded ones. */
  function changes(spanId, was, inputs, turn) {
    var body = { span_id: spanId };
    if (turn) body.turn = true;
    if (inputs.system.value !== was.system) body.system = inputs.system.value;
    var model = inputs.model.value.trim();
    if (model && model !== was.model) body.model = model;
    ['temperature', 'max_tokens'].forEach(function (key) {
      var text = inputs[key].value.trim();
      if (text && text !== was[key]) body[key] = Number(text);
    });
    if (inputs.allow.checked) body.allow_redacted = true;
    return body;
  }

  function changedText(changed) {
    var parts = [];
    if (changed.system !== undefined) parts.push('system prompt');
    ['model', 'temperature', 'max_tokens'].forEach(function (key) {
      if (changed[key] !== undefined) parts.push(key + ' \u2192 ' + changed[key]);
    });
    return parts.length ? 'Changed: ' + parts.join(', ') : 'No change: the request as it was recorded';
  }

  function answerColumn(title, answer) {
    var col = el('div', 'replay-answer');
    col.appendChild(el('div', 'trace-key', title));
    var facts = ['finish ' + (answer.finish_reason || '\u2013'),
      (answer.input_tokens || 0) + '\u2192' + (answer.output_tokens || 0) + ' tok',
      (answer.latency_ms || 0).toFixed(0) + ' ms'];
    col.appendChild(el('div', 'trace-facts', facts.join(' \u00b7 ')));
    if (answer.error) col.appendChild(el('div', 'trace-error', answer.error));
    col.appendChild(el('pre', 'trace-payload replay-text', answer.text || '(no text)'));
    (answer.tool_calls || []).forEach(function (call) {
      col.appendChild(el('pre', 'trace-payload replay-tool-call',
        'calls ' + call.name + ' ' + JSON.stringify(call.arguments)));
    });
    return col;
  }

  function showResult(box, data) {
    box.textContent = '';
    box.appendChild(el('div', 'replay-changed', changedText(data.changes || {})));
    var cmp = (data.comparison || [])[0];
    if (cmp) {
      box.appendChild(el('div', 'trace-facts', (cmp.same_tool_calls ? 'same tool calls' : 'other tool calls') +
        ' \u00b7 text ' + (cmp.text_changed ? 'changed' : 'unchanged')));
    }
    if ((data.redacted || []).length) {
      box.appendChild(el('div', 'trace-facts', 'recorded with placeholders in: ' + data.redacted.join(', ')));
    }
    var columns = el('div', 'replay-columns');
    columns.appendChild(answerColumn('Original', data.original || {}));
    columns.appendChild(answerColumn('Replay', (data.replays || [])[0] || {}));
    box.appendChild(columns);
    /* The replay is a trace of its own: its panel opens to what was sent this time. */
    if (data.replay_trace_id) window.PortholeTrace.attach(box, data.replay_trace_id);
  }

  /* A whole turn's replay: the verdict, where it left the recording, then each step. */
  function showTurn(box, data) {
    box.textContent = '';
    box.appendChild(el('div', 'replay-changed', changedText(data.changes || {})));
    box.appendChild(el('div', 'replay-verdict', data.verdict || ''));
    if (data.stop_detail && data.stopped !== 'final_answer') {
      box.appendChild(el('div', 'trace-facts', 'stopped: ' + data.stop_detail));
    }
    (data.steps || []).forEach(function (step) {
      box.appendChild(el('div', 'trace-key replay-step', 'Step ' + step.step +
        (step.same_tool_calls ? ' \u00b7 same tool calls' : ' \u00b7 other tool calls')));
      var columns = el('div', 'replay-columns');
      columns.appendChild(answerColumn('Original', step.original || { text: '(the recording had ended)' }));
      columns.appendChild(answerColumn('Replay', step.replay || {}));
      box.appendChild(columns);
      (step.tools || []).forEach(function (tool) {
        box.appendChild(el('div', 'trace-facts', tool.name + ': ' +
          (tool.result === 'recording' ? 'the recorded result' : tool.result === 'ran' ? 'ran' : 'not run')));
      });
    });
    if (data.replay_trace_id) window.PortholeTrace.attach(box, data.replay_trace_id);
  }

  async function submit(ctx, turn) {
    var body = changes(ctx.spanId, ctx.was, ctx.inputs, turn);
    ctx.error.hidden = true;
    ctx.button.disabled = true;
    ctx.turnButton.disabled = true;
    ctx.status.textContent = turn ? 'Replaying the turn\u2026' : 'Replaying\u2026';
    try {
      var res = await fetch('/api/conversations/' + encodeURIComponent(ctx.conversationId) + '/replay', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify(body),
      });
      var data = await res.json().catch(function () { return {}; });
      if (!res.ok) {
        if (res.status === 422 && data.redacted) ctx.allowRow.hidden = false;
        throw new Error((data && data.error) || 'HTTP ' + res.status);
      }
      ctx.status.textContent = '';
      (turn ? showTurn : showResult)(ctx.result, data);
    } catch (err) {
      ctx.status.textContent = '';
      ctx.error.textContent = 'Not replayed: ' + err.message;
      ctx.error.hidden = false;
      console.warn('[porthole] replay refused', ctx.spanId, err.message);
    } finally {
      ctx.button.disabled = false;
      ctx.turnButton.disabled = false;
    }
  }

  function buildForm(span, conversationId) {
    var was = recorded(span);
    var form = el('form', 'replay-form');
    form.noValidate = true;
    form.appendChild(el('div', 'trace-key', 'Replay this call with changes'));
    var inputs = {
      system: field(form, 'System prompt', input('textarea', was.system, { rows: '5' })),
      model: field(form, 'Model', input('text', was.model)),
      temperature: field(form, 'Temperature', input('number', was.temperature,
        { step: '0.1', placeholder: 'as recorded' })),
      max_tokens: field(form, 'max_tokens', input('number', was.max_tokens, { step: '1', placeholder: 'as recorded' })),
    };
    inputs.allow = input('checkbox', '', {});
    var allowRow = el('label', 'replay-allow');
    allowRow.appendChild(inputs.allow);
    allowRow.appendChild(document.createTextNode(
      ' Send the ' + REDACTED + ' placeholders to the model as they are (allow_redacted)'));
    allowRow.hidden = !was.redacted;
    form.appendChild(allowRow);
    var actions = el('div', 'replay-actions');
    var button = el('button', 'replay-submit', 'Replay now');
    button.type = 'submit';
    actions.appendChild(button);
    var turnButton = el('button', 'replay-turn', 'Replay from here');
    turnButton.type = 'button';
    turnButton.title = 'Replay the whole turn from this call on: recorded tool results reused, no tool run';
    actions.appendChild(turnButton);
    var status = el('span', 'replay-status');
    actions.appendChild(status);
    form.appendChild(actions);
    var error = el('div', 'trace-error replay-error');
    error.setAttribute('role', 'alert');
    error.hidden = true;
    form.appendChild(error);
    var result = el('div', 'replay-result');
    form.appendChild(result);
    var ctx = { spanId: span.span_id, conversationId: conversationId, was: was, inputs: inputs,
      allowRow: allowRow, button: button, turnButton: turnButton, status: status, error: error,
      result: result };
    form.addEventListener('submit', function (event) {
      event.preventDefault();
      submit(ctx, false);
    });
    turnButton.addEventListener('click', function () {
      submit(ctx, true);
    });
    return form;
  }

  /* Adds the Replay button of the LLM call `span` (of conversation `conversationId`) to `box`. */
  function attach(box, span, conversationId) {
    var open = el('button', 'replay-open', 'Replay');
    open.type = 'button';
    open.title = 'Send this call again with a change and compare the answers';
    open.addEventListener('click', function () {
      var form = box.querySelector('.replay-form');
      if (form) {
        form.hidden = !form.hidden;
        return;
      }
      box.insertBefore(buildForm(span, conversationId), open.nextSibling);
    });
    box.insertBefore(open, box.firstChild);
  }

  window.PortholeReplay = { attach: attach };
})();
