// sluice play: the page's script (page.html), served as a file because the page's
// Content-Security-Policy allows no inline script.
"use strict";
const $ = (id) => document.getElementById(id);
const DEFAULT_CONFIG = `local sub = std.extVar('sub');

{
  transforms: [
    sub.tf.obj.insert({ obj: { trg: 'greeting' }, value: 'hello' }),
    sub.tf.str.to.upper({ obj: { src: 'name', trg: 'name' } }),
    sub.tf.send.stdout(),
  ],
}
`;

// POSTs (or GETs) JSON; resolves to the reply, or rejects with the server's {error}.
async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const resp = await fetch(path, init);
  let reply;
  try { reply = await resp.json(); } catch (e) { throw new Error(`${path}: HTTP ${resp.status}`); }
  if (!resp.ok) {
    // The reply goes with the error: a run that failed at run time still has its steps.
    const err = new Error(reply.error || `${path}: HTTP ${resp.status}`);
    err.reply = reply;
    throw err;
  }
  return reply;
}

// Line numbers: each editor's gutter holds one number per line of its textarea and is moved
// with the textarea's scroll (both have the same whole-pixel line height, play.css).
const lineHeight = (ta) => parseFloat(getComputedStyle(ta).lineHeight);
const gutters = {};
function gutter(id) {
  const ta = $(id);
  const nums = $(id + "-lines");
  const refresh = () => {
    const n = ta.value.split("\n").length;
    while (nums.children.length < n) {
      const d = document.createElement("div");
      d.textContent = String(nums.children.length + 1);
      nums.appendChild(d);
    }
    while (nums.children.length > n) nums.lastChild.remove();
    nums.parentElement.style.setProperty("--digits", String(Math.max(2, String(n).length)));
    nums.style.transform = `translateY(${-ta.scrollTop}px)`;
    if (id === "config") paintError();
  };
  ta.addEventListener("input", refresh);
  ta.addEventListener("scroll", refresh);
  new ResizeObserver(refresh).observe(ta);
  gutters[id] = refresh;
}
// Sets an editor's text (which fires no input event) and its line numbers.
function setText(id, text) {
  $(id).value = text;
  gutters[id]();
}

// The place a config error cites (`config.jsonnet:3:5`), marked in the gutter and with a
// band over its line, and a button that goes there; null when the error cites none.
let errorAt = null;
function markError(message) {
  const m = /config\.jsonnet:(\d+):(\d+)/.exec(message || "");
  errorAt = m ? { line: Number(m[1]), col: Number(m[2]) } : null;
  paintError();
}
function paintError() {
  const ta = $("config");
  const nums = $("config-lines");
  const band = $("config-band");
  const button = $("goto-error");
  nums.querySelectorAll(".err").forEach((d) => d.classList.remove("err"));
  if (!errorAt || errorAt.line > nums.children.length) {
    band.hidden = true;
    button.hidden = true;
    return;
  }
  const { line, col } = errorAt;
  nums.children[line - 1].classList.add("err");
  button.textContent = `Go to the error: config line ${line}, column ${col}`;
  button.hidden = false;
  const pad = parseFloat(getComputedStyle(ta).paddingTop);
  const lh = lineHeight(ta);
  const top = pad + (line - 1) * lh - ta.scrollTop;
  band.hidden = top < 0 || top + lh > ta.clientHeight;
  band.style.top = `${ta.offsetTop + top}px`;
}
function gotoError() {
  if (!errorAt) return;
  const ta = $("config");
  const lines = ta.value.split("\n");
  const line = Math.min(errorAt.line, lines.length);
  let start = 0;
  for (let i = 0; i < line - 1; i++) start += lines[i].length + 1;
  const end = start + lines[line - 1].length;
  ta.focus();
  ta.setSelectionRange(Math.min(start + errorAt.col - 1, end), end);
  ta.scrollTop = Math.max(0, (line - 1) * lineHeight(ta) - ta.clientHeight / 2);
  gutters.config();
}

// Runs `work` with the buttons disabled, showing its error (with its place) if it fails.
async function busy(what, work) {
  const buttons = document.querySelectorAll("header button");
  buttons.forEach((b) => (b.disabled = true));
  $("status").textContent = what + "…";
  $("error").textContent = "";
  markError(null);
  try {
    await work();
    $("status").textContent = "";
  } catch (e) {
    $("error").textContent = e.message;
    markError(e.message);
    $("status").textContent = what + " failed";
  } finally {
    buttons.forEach((b) => (b.disabled = false));
  }
}

function messageLine(m) {
  const div = document.createElement("div");
  div.className = "msg";
  div.textContent = m.data === "" ? "(empty)" : m.data;
  if (m.metadata !== "") {
    const meta = document.createElement("div");
    meta.className = "meta";
    meta.textContent = "metadata: " + m.metadata;
    div.appendChild(meta);
  }
  return div;
}

// A mark for one key: a symbol and the key (the symbols are text, the colours a help).
function mark(kind, text) {
  const [cls, symbol, word] = {
    added: ["add", "+", "added"], changed: ["chg", "~", "changed"], removed: ["del", "−", "removed"],
    new: ["add", "+", "new"],
  }[kind];
  const span = document.createElement("span");
  span.className = "mark " + cls;
  span.textContent = symbol + text;
  span.title = `${word}: ${text}`;
  return span;
}

// The marks of one message's changes (diff.rs's Changes); null when nothing changed.
function marksOf(c) {
  const div = document.createElement("div");
  div.className = "marks";
  c.added.forEach((k) => div.appendChild(mark("added", k)));
  c.changed.forEach((k) => div.appendChild(mark("changed", k)));
  c.removed.forEach((k) => div.appendChild(mark("removed", k)));
  if (c.data_changed) div.appendChild(mark("changed", "data (as text)"));
  if (c.metadata_changed) div.appendChild(mark("changed", "metadata (as text)"));
  return div.children.length ? div : null;
}

const plural = (n, what) => `${n} ${what}${n === 1 ? "" : "s"}`;

// What a step did to the count of messages, or "no change".
function stepNote(ch) {
  const paired = ch.before === 0 || ch.messages.some((m) => m !== null);
  if (ch.after < ch.before && paired) {
    const which = ch.dropped.map((i) => i + 1).join(", ");
    return `−${plural(ch.before - ch.after, "message")} dropped (${which} of ${ch.before} before)`;
  }
  if (ch.after > ch.before && paired) {
    return `+${plural(ch.after - ch.before, "message")} added`;
  }
  if (ch.after !== ch.before) {
    // Not paired (an aggregate, a split): the count only.
    const diff = ch.after - ch.before;
    return `${plural(ch.before, "message")} in, ${ch.after} out ` +
      `(${diff < 0 ? `${-diff} fewer` : `${diff} more`})`;
  }
  const changed = ch.messages.some((m) => m && marksOf(m));
  return changed ? "" : "no change";
}

function stepHead(index, type, id) {
  const head = document.createElement("div");
  head.className = "step-head";
  head.innerHTML = `transforms[${index}] <span class="type"></span> <span class="id"></span>`;
  head.querySelector(".type").textContent = type;
  head.querySelector(".id").textContent = id ? `id ${id}` : "";
  return head;
}

function showRun(r) {
  $("stdout").textContent = r.stdout;
  $("output").textContent = r.failed
    ? `(none: the run failed at ${r.failed.at})`
    : r.output.map((m) => m.data).join("\n");
  $("warnings").textContent = r.warnings.map((w) => "warning: " + w).join("\n");
  const steps = $("steps");
  steps.replaceChildren();
  for (const s of r.steps) {
    const li = document.createElement("li");
    li.dataset.index = s.index;
    li.appendChild(stepHead(s.index, s.type, s.id));
    const note = stepNote(s.changes);
    if (note) {
      const p = document.createElement("div");
      p.className = "step-note";
      p.textContent = note;
      li.appendChild(p);
    }
    if (s.messages.length === 0) {
      const none = document.createElement("div");
      none.className = "none";
      none.textContent = "no messages";
      li.appendChild(none);
    }
    const paired = s.changes.before === 0 || s.changes.messages.some((m) => m !== null);
    s.messages.forEach((m, i) => {
      const line = messageLine(m);
      const c = s.changes.messages[i];
      const marks = c ? marksOf(c) : null;
      if (marks) line.appendChild(marks);
      else if (!c && paired) line.appendChild(mark("new", "message"));
      li.appendChild(line);
    });
    steps.appendChild(li);
  }
  if (r.failed) {
    const f = r.failed;
    const li = document.createElement("li");
    li.dataset.index = f.index;
    li.className = "failed";
    li.appendChild(stepHead(f.index, f.type, f.id));
    const err = document.createElement("div");
    err.className = "step-error";
    err.textContent = `failed: ${f.at}: ${f.message}`;
    li.appendChild(err);
    const rest = document.createElement("div");
    rest.className = "none";
    rest.textContent = "the run stopped at this transform: none after it ran";
    li.appendChild(rest);
    steps.appendChild(li);
  }
}

function clearResults() {
  for (const id of ["stdout", "output", "warnings"]) $(id).textContent = "";
  $("steps").replaceChildren();
}

async function run() {
  await busy("Running", async () => {
    clearResults();
    try {
      showRun(await api("/api/run", { config: $("config").value, input: $("input").value }));
    } catch (e) {
      // Failed at run time: the steps up to the failing transform, then the error.
      if (e.reply && Array.isArray(e.reply.steps)) showRun(e.reply);
      throw e;
    }
  });
}

async function test() {
  await busy("Testing", async () => {
    $("report").textContent = "";
    const r = await api("/api/test", { config: $("config").value });
    $("report").textContent = r.report;
    $("report").className = r.passed ? "pass" : "fail";
  });
}

async function format() {
  await busy("Formatting", async () => {
    const r = await api("/api/fmt", { config: $("config").value });
    setText("config", r.config);
  });
}

// base64url of UTF-8 JSON, and back.
function encodeState(state) {
  const bytes = new TextEncoder().encode(JSON.stringify(state));
  let bin = "";
  bytes.forEach((b) => (bin += String.fromCharCode(b)));
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
function decodeState(text) {
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const bin = atob(b64 + "===".slice((b64.length + 3) % 4));
  const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes));
}

function share() {
  const hash = "#" + encodeState({ config: $("config").value, input: $("input").value });
  history.replaceState(null, "", hash);
  $("share-url").textContent = "Share this URL: " + location.href;
  if (navigator.clipboard) navigator.clipboard.writeText(location.href).catch(() => {});
}

// Loads the state in the URL fragment; false when there is none.
function loadShared() {
  if (location.hash.length <= 1) return false;
  try {
    const state = decodeState(location.hash.slice(1));
    setText("config", String(state.config ?? ""));
    setText("input", String(state.input ?? ""));
    // Shown, never run: a shared link (or a page framing this one, which the server's
    // headers forbid) must not run a config without the user reading it and pressing Run.
    clearResults();
    $("shared").textContent =
      "This config came from a shared link. Read it before you press Run: nothing has run yet.";
    return true;
  } catch (e) {
    $("error").textContent = "the shared state in this URL could not be read: " + e.message;
    return false;
  }
}

let examples = [];
async function loadExamples() {
  try {
    examples = await api("/api/examples");
  } catch (e) {
    $("error").textContent = "listing the examples: " + e.message;
    return;
  }
  const select = $("examples");
  examples.forEach((ex, i) => {
    const opt = document.createElement("option");
    opt.value = String(i);
    opt.textContent = ex.name.replace(/^examples\//, "").replace(/\/config\.jsonnet$/, "");
    select.appendChild(opt);
  });
}

function pickExample() {
  const ex = examples[Number($("examples").value)];
  if (!ex) return;
  setText("config", ex.config);
  setText("input", ex.input);
  clearResults();
  $("report").textContent = "";
  $("error").textContent = "";
  $("share-url").textContent = "";
  history.replaceState(null, "", location.pathname);
  $("shared").textContent = "";
}

// Tab indents by two spaces in the editors instead of leaving them.
for (const id of ["config", "input"]) {
  $(id).addEventListener("keydown", (e) => {
    if (e.key === "Tab" && !e.shiftKey) {
      e.preventDefault();
      const t = e.target;
      t.setRangeText("  ", t.selectionStart, t.selectionEnd, "end");
    }
  });
}
document.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); }
});
$("run").addEventListener("click", run);
$("test").addEventListener("click", test);
$("format").addEventListener("click", format);
$("share").addEventListener("click", share);
$("examples").addEventListener("change", pickExample);
window.addEventListener("hashchange", loadShared);

gutter("config");
gutter("input");
// An edit moves the lines: the error's mark no longer says where it is.
$("config").addEventListener("input", () => markError(null));
$("goto-error").addEventListener("click", gotoError);
if (!loadShared()) {
  setText("config", DEFAULT_CONFIG);
  setText("input", '{"name":"ada"}\n{"name":"grace"}');
}
loadExamples().then(() => document.body.dataset.ready = "true");
