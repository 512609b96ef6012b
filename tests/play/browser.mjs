// Drives `sluice play`'s page in headless chromium (playwright-core, no browser download) the
// way a user would, and prints what it saw as one JSON object on stdout for
// tests/cli_play.rs to assert on. It asserts nothing itself, so that a failure shows the
// whole picture.
//
//   SLUICE_PLAY_URL=http://127.0.0.1:PORT/?token=...  the running server, as it printed it
//   PLAYWRIGHT_CORE=.../node_modules/playwright-core   the driver (scripts/emulators.sh)
//   CHROMIUM=/usr/bin/chromium              the browser (Debian's `chromium`)
//   SLUICE_PLAY_SCREENSHOT=1                also save docs/images/play.png
//                                           (SLUICE_PLAY_SCREENSHOT_PATH overrides where)

import http from "node:http";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const url = process.env.SLUICE_PLAY_URL;
const require = createRequire(import.meta.url);
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

const CONFIG = `local sub = std.extVar('sub');
{
  tests: [{
    name: 'greets',
    transforms: [sub.tf.test.message({ value: { name: 'ada' } })],
    condition: sub.cnd.str.eq({ obj: { src: 'greeting' }, value: 'hello' }),
  }],
  transforms: [
    sub.tf.obj.insert({ obj: { trg: 'greeting' }, value: 'hello' }),
    sub.tf.str.to.upper({ obj: { src: 'name', trg: 'name' } }),
    sub.tf.send.stdout(),
  ],
}
`;
const INPUT = '{"name":"ada"}\n{"name":"grace"}';

// transforms[2] makes the data the text `ADA`, in which transforms[3] cannot set a key.
const FAILING = `local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.obj.insert({ obj: { trg: 'greeting' }, value: 'hello' }),
    sub.tf.str.to.upper({ obj: { src: 'name', trg: 'name' } }),
    sub.tf.obj.cp({ obj: { src: 'name' } }),
    sub.tf.obj.insert({ obj: { trg: 'x' }, value: 1 }),
    sub.tf.send.stdout(),
  ],
}
`;

// Keys added, changed and removed (nested), a filter that drops one, an aggregate.
const CHANGES = `local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.obj.insert({ obj: { trg: 'user.role' }, value: 'admin' }),
    sub.tf.str.to.upper({ obj: { src: 'name', trg: 'name' } }),
    sub.tf.obj.del({ obj: { src: 'user.id' } }),
    sub.tf.meta.switch({ cases: [{
      condition: sub.cnd.str.eq({ obj: { src: 'name' }, value: 'GRACE' }),
      transforms: [sub.tf.util.drop()],
    }] }),
    sub.tf.agg.to.array(),
  ],
}
`;
const CHANGES_INPUT = [
  '{"name":"ada","user":{"id":1}}',
  '{"name":"grace","user":{"id":2}}',
  '{"name":"bob","user":{"id":3}}',
].join("\n");

// The step view as the page shows it: each step's head, note, messages, marks and error.
const stepView = (page) =>
  page.$$eval("#steps li", (lis) =>
    lis.map((li) => ({
      head: li.querySelector(".step-head").textContent,
      failed: li.classList.contains("failed"),
      note: li.querySelector(".step-note")?.textContent ?? "",
      error: li.querySelector(".step-error")?.textContent ?? "",
      messages: [...li.querySelectorAll(".msg")].map((m) => m.firstChild.textContent),
      marks: [...li.querySelectorAll(".msg")].map((m) =>
        [...m.querySelectorAll(".mark")].map((x) => x.textContent),
      ),
    })),
  );

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM,
  headless: true,
  args: ["--no-sandbox"],
});
const out = {};
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  const text = (sel) => page.locator(sel).innerText();
  // Clicks a button and waits for the work it starts to end (the buttons come back).
  const press = async (id) => {
    await page.click(id);
    await page.waitForFunction(() => !document.querySelector("#run").disabled);
  };

  // Every API call the browser makes, from any page or frame.
  const apiRuns = [];
  context.on("request", (r) => {
    if (r.url().includes("/api/run")) apiRuns.push(r.frame() ? r.frame().url() : "");
  });

  const opened = await page.goto(url);
  await page.waitForSelector("body[data-ready=true]");
  out.opened = { url: page.url(), headers: opened.headers() };

  // Run: type a config and input, read the output and the step view.
  await page.fill("#config", CONFIG);
  await page.fill("#input", INPUT);
  await press("#run");
  out.run = {
    error: await text("#error"),
    stdout: await page.locator("#stdout").textContent(),
    output: await page.locator("#output").textContent(),
    steps: await stepView(page),
  };

  // A run that fails at run time: the steps before the failing transform, then its error.
  await page.fill("#config", FAILING);
  await press("#run");
  out.failing = {
    error: await text("#error"),
    output: await page.locator("#output").textContent(),
    stdout: await page.locator("#stdout").textContent(),
    steps: await stepView(page),
  };

  // What each step changed, and the count when a filter or an aggregate changes it.
  await page.fill("#config", CHANGES);
  await page.fill("#input", CHANGES_INPUT);
  await press("#run");
  out.changes = { error: await text("#error"), steps: await stepView(page) };

  // Line numbers: one per line, beside their lines after a scroll with the mouse wheel.
  const lines = Array.from({ length: 80 }, (_, i) => `// line ${i + 1}`);
  await page.fill("#config", lines.join("\n") + "\n{ transforms: [] }\n");
  await page.fill("#input", "a\nb\nc");
  await page.hover("#config");
  await page.mouse.wheel(0, 700);
  await page.waitForFunction(() => document.querySelector("#config").scrollTop > 0);
  await page.waitForTimeout(300);
  out.lines = await page.evaluate(() => {
    const ta = document.querySelector("#config");
    const nums = [...document.querySelectorAll("#config-lines div")];
    const cs = getComputedStyle(ta);
    const lh = parseFloat(cs.lineHeight);
    const pad = parseFloat(cs.paddingTop);
    const box = ta.getBoundingClientRect();
    // Where the textarea draws line k (no wrapping: white-space pre), against its number.
    const drift = [1, 30, 37, 45, 60, 82].map((k) => {
      const want = box.top + ta.clientTop + pad + (k - 1) * lh - ta.scrollTop;
      return nums[k - 1].getBoundingClientRect().top - want;
    });
    // The number seen beside the textarea's first visible line.
    const gutter = document.querySelector("#config-lines").getBoundingClientRect();
    const y = box.top + ta.clientTop + pad + 2;
    const seen = document.elementFromPoint(gutter.left + gutter.width / 2, y);
    return {
      count: nums.length,
      inputCount: document.querySelectorAll("#input-lines div").length,
      scrollTop: ta.scrollTop,
      lineHeight: lh,
      numberLineHeight: parseFloat(getComputedStyle(nums[0]).lineHeight),
      drift,
      seenAtTop: seen ? seen.textContent : null,
      wantAtTop: String(Math.floor((ta.scrollTop + 2) / lh) + 1),
    };
  });
  await page.fill("#config", CONFIG);
  await page.fill("#input", INPUT);

  // Test: the config's tests: report.
  await press("#test");
  out.test = { error: await text("#error"), report: await page.locator("#report").textContent() };

  // Format a messy config.
  await page.fill("#config", "{transforms:[\n],\n      a:   1}");
  await press("#format");
  out.format = { error: await text("#error"), config: await page.inputValue("#config") };

  // Pick an example: its config and sample input load.
  const options = await page.$$eval("#examples option", (os) => os.map((o) => o.textContent));
  await page.selectOption("#examples", { label: "hello" });
  out.example = {
    options,
    config: await page.inputValue("#config"),
    input: await page.inputValue("#input"),
  };

  // Share: the state goes into the URL; a fresh page at that URL gets it back.
  await page.fill("#config", "{ transforms: [] }  // shared ✓\n");
  await page.fill("#input", "one\ntwo");
  await page.click("#share");
  const shared = page.url();
  const other = await context.newPage();
  const runsBefore = apiRuns.length;
  await other.goto(shared);
  await other.waitForSelector("body[data-ready=true]");
  // Nothing runs on its own: give it time to, then count.
  await other.waitForTimeout(1000);
  out.share = {
    url: shared,
    config: await other.inputValue("#config"),
    input: await other.inputValue("#input"),
    notice: await other.locator("#shared").innerText(),
    runsBeforeClick: apiRuns.length - runsBefore,
    stdoutBeforeClick: await other.locator("#stdout").textContent(),
  };
  // The user's own click runs it.
  await other.click("#run");
  await other.waitForFunction(() => !document.querySelector("#run").disabled);
  out.share.runsAfterClick = apiRuns.length - runsBefore;
  await other.close();

  // A page of another origin framing the playground (clickjacking): the frame stays
  // empty, and a click where the Run button would be runs nothing.
  const base = new URL(url).origin;
  const framer = http.createServer((req, res) => {
    res.setHeader("content-type", "text/html");
    res.end(
      `<!doctype html><iframe id="f" src="${base}/#${shared.split("#")[1]}" ` +
        `style="position:absolute;left:0;top:0;width:1200px;height:800px;opacity:0.01"></iframe>`,
    );
  });
  await new Promise((ok) => framer.listen(0, "127.0.0.1", ok));
  const attacker = await context.newPage();
  const refused = [];
  attacker.on("console", (m) => refused.push(m.text()));
  const runsBeforeFrame = apiRuns.length;
  // `localhost` is another origin than `127.0.0.1` (and another site).
  await attacker.goto(`http://localhost:${framer.address().port}/`);
  await attacker.waitForTimeout(1500);
  const frame = attacker.frames().find((f) => f !== attacker.mainFrame());
  let runButton = null;
  try {
    runButton = frame ? await frame.$("#run") : null;
  } catch (e) {
    runButton = null;
  }
  await attacker.mouse.click(40, 20);
  await attacker.waitForTimeout(500);
  out.framed = {
    frameUrl: frame ? frame.url() : null,
    hasRunButton: runButton !== null,
    runs: apiRuns.length - runsBeforeFrame,
    console: refused,
  };
  await attacker.close();
  framer.close();

  // A bad config shows its error with the place.
  await page.fill("#config", "local sub = std.extVar('sub');\n{ transforms: [\n  error 'boom' ] }");
  await press("#run");
  const jsonnetError = await text("#error");
  // The line it cites is marked, and a button goes there.
  const marked = {
    gutter: await page.$$eval("#config-lines .err", (ds) => ds.map((d) => d.textContent)),
    band: await page.isVisible("#config-band"),
    button: await page.isVisible("#goto-error") ? await text("#goto-error") : null,
  };
  await page.click("#goto-error");
  marked.selected = await page.evaluate(() => {
    const ta = document.querySelector("#config");
    return {
      focused: document.activeElement === ta,
      text: ta.value.slice(ta.selectionStart, ta.selectionEnd),
    };
  });
  // An edit clears the mark (the lines may have moved).
  await page.type("#config", " ");
  marked.afterEdit = await page.$$eval("#config-lines .err", (ds) => ds.length);
  marked.buttonAfterEdit = await page.isVisible("#goto-error");
  out.marked = marked;
  await page.fill(
    "#config",
    "{ transforms: [{ type: 'string_to_upper', settings: { object: { source_key: 1 } } }] }",
  );
  await press("#run");
  out.errors = { jsonnet: jsonnetError, build: await text("#error") };

  if (process.env.SLUICE_PLAY_SCREENSHOT === "1") {
    await page.selectOption("#examples", { label: "hello" });
    await press("#run");
    await press("#test");
    const file =
      process.env.SLUICE_PLAY_SCREENSHOT_PATH || path.join(here, "..", "..", "docs", "images", "play.png");
    await page.screenshot({ path: file, clip: { x: 0, y: 0, width: 1280, height: 630 } });
    out.screenshot = file;
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
