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
  if (!resp.ok) throw new Error(reply.error || `${path}: HTTP ${resp.status}`);
  return reply;
}

// Runs `work` with the buttons disabled, showing its error (with its place) if it fails.
async function busy(what, work) {
  const buttons = document.querySelectorAll("header button");
  buttons.forEach((b) => (b.disabled = true));
  $("status").textContent = what + "…";
  $("error").textContent = "";
  try {
    await work();
    $("status").textContent = "";
  } catch (e) {
    $("error").textContent = e.message;
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

function showRun(r) {
  $("stdout").textContent = r.stdout;
  $("output").textContent = r.output.map((m) => m.data).join("\n");
  $("warnings").textContent = r.warnings.map((w) => "warning: " + w).join("\n");
  const steps = $("steps");
  steps.replaceChildren();
  for (const s of r.steps) {
    const li = document.createElement("li");
    li.dataset.index = s.index;
    const head = document.createElement("div");
    head.className = "step-head";
    head.innerHTML = `transforms[${s.index}] <span class="type"></span> <span class="id"></span>`;
    head.querySelector(".type").textContent = s.type;
    head.querySelector(".id").textContent = s.id ? `id ${s.id}` : "";
    li.appendChild(head);
    if (s.messages.length === 0) {
      const none = document.createElement("div");
      none.className = "none";
      none.textContent = "no messages";
      li.appendChild(none);
    }
    s.messages.forEach((m) => li.appendChild(messageLine(m)));
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
    showRun(await api("/api/run", { config: $("config").value, input: $("input").value }));
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
    $("config").value = r.config;
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
    $("config").value = String(state.config ?? "");
    $("input").value = String(state.input ?? "");
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
  $("config").value = ex.config;
  $("input").value = ex.input;
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

if (!loadShared()) {
  $("config").value = DEFAULT_CONFIG;
  $("input").value = '{"name":"ada"}\n{"name":"grace"}';
}
loadExamples().then(() => document.body.dataset.ready = "true");
