// The gateway's web console in Debian's chromium, driven by Playwright's library: the page loads
// under its security headers, with no error in the browser's console (a Content Security Policy
// violation is one) and none thrown by the page, and axe-core finds no serious or critical
// accessibility problem. Run by tests/ui/test_console.py, which starts the gateway and sets:
// REX_GATEWAY_URL, REX_UI_KEY_A and REX_UI_KEY_B (keys of two tenants), REX_UI_TEST_ENV (where
// tests/ui's package-lock.json is installed), REX_CHROMIUM (the browser) and REX_UI_SCREENSHOTS.
//
// Scenario steps go in main(), each in step(NAME, fn): a step's time is logged, and a failure
// names the step. shot(page, NAME) saves REX_UI_SCREENSHOTS/NAME.png; axeCheck(page, NAME)
// throws on serious or critical axe violations. The whole script has a deadline (DEADLINE_MS):
// past it, it exits 1 saying which step it was in. Prints "ok: console MODE" when all passed.
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import { createRequire } from 'node:module';
import path from 'node:path';

function need(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`console.mjs: ${name} is not set (tests/ui/test_console.py sets it)`);
    process.exit(2);
  }
  return value;
}
const GATEWAY = need('REX_GATEWAY_URL').replace(/\/$/, '');
const KEY_A = need('REX_UI_KEY_A');
const KEY_B = need('REX_UI_KEY_B');
const TEST_ENV = need('REX_UI_TEST_ENV');
const CHROMIUM = need('REX_CHROMIUM');
const SHOTS = need('REX_UI_SCREENSHOTS');
// 'keys' (two tenants' keys) or 'no-keys' (a gateway without keys, loopback only).
const MODE = process.env.REX_UI_MODE || 'keys';

// The pinned packages, from REX_UI_TEST_ENV's node_modules (not from beside this file).
const require = createRequire(path.join(TEST_ENV, 'package.json'));
const { chromium } = require('playwright-core');
const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

const DEADLINE_MS = 180_000;
const started = Date.now();
const seconds = (since) => ((Date.now() - since) / 1000).toFixed(2);
let current = 'starting';
let browser;
let timedOut = false;

// Past the deadline: say where, close the browser if it answers quickly, and exit 1 (Playwright
// kills the browsers it launched when Node exits, so none is left behind).
const deadline = setTimeout(async () => {
  timedOut = true;
  console.error(`FAIL: the deadline of ${DEADLINE_MS / 1000} s passed in step "${current}"`);
  await Promise.race([browser?.close(), new Promise((r) => setTimeout(r, 5000))]).catch(() => {});
  process.exit(1);
}, DEADLINE_MS);
deadline.unref();

// step(NAME, fn): runs fn, logging its time; a failure is rethrown naming the step.
async function step(name, fn) {
  const outer = current;
  current = outer === 'main' ? name : `${outer} > ${name}`;
  const t0 = Date.now();
  console.log(`- ${current} ...`);
  try {
    const result = await fn();
    console.log(`  ${current}: ok (${seconds(t0)} s)`);
    return result;
  } catch (e) {
    if (e?.step) throw e;  // already named by an inner step
    const err = new Error(`step "${current}" failed after ${seconds(t0)} s: ${e?.stack ?? e}`);
    err.step = current;
    throw err;
  } finally {
    current = outer;
  }
}

// shot(page, NAME): the whole page as REX_UI_SCREENSHOTS/NAME.png.
async function shot(page, name) {
  const file = path.join(SHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`  screenshot: ${file}`);
  return file;
}

// axeCheck(page, PAGE_NAME): runs axe-core in the page (WCAG 2 A and AA, and best practices),
// prints every violation, and throws if any is serious or critical; returns those.
//
// axe's source goes in through page.evaluate, which Chromium's DevTools protocol runs outside the
// page's Content Security Policy (script-src 'self' forbids an inline <script>, so addScriptTag
// could not). It is evaluated once per document: a navigation needs it again.
async function axeCheck(page, pageName) {
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(AXE_SOURCE);
  const results = await page.evaluate(() =>
    window.axe.run(document, { runOnly: ['wcag2a', 'wcag2aa', 'best-practice'] }));
  const bad = [];
  for (const v of results.violations) {
    const nodes = v.nodes.map((n) => n.target.join(' ')).slice(0, 5).join(', ');
    console.log(`  axe [${pageName}] ${v.impact}: ${v.id}: ${v.help} (${v.nodes.length} ` +
                `node(s): ${nodes}) ${v.helpUrl}`);
    if (v.impact === 'serious' || v.impact === 'critical') bad.push(v);
  }
  console.log(`  axe [${pageName}]: ${results.passes.length} rules passed, ` +
              `${results.violations.length} violated (${bad.length} serious or critical)`);
  if (bad.length)
    throw new Error(`axe: ${bad.length} serious or critical violation(s) on ${pageName}: ` +
                    bad.map((v) => v.id).join(', '));
  return bad;
}

// The browser's console errors and the page's uncaught exceptions, for every page of a context:
// checked at the end (a CSP violation is reported as a console error).
const browserErrors = [];
function watch(page, label) {
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const where = msg.location()?.url ? ` (${msg.location().url}:${msg.location().lineNumber})` : '';
    browserErrors.push(`[${label}] console error: ${msg.text()}${where}`);
  });
  page.on('pageerror', (e) => browserErrors.push(`[${label}] page error: ${e?.stack ?? e}`));
  page.on('crash', () => browserErrors.push(`[${label}] the page crashed`));
}

// --- The scenario's helpers ------------------------------------------------------------------

// A TCP relay between the browser and the gateway, so a test can cut every connection the page
// has (as a network that drops does) while the gateway and its sandboxes go on.
function startRelay(target) {
  const url = new URL(target);
  const pairs = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(url.port), url.hostname);
    const pair = [client, upstream];
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    url: `http://127.0.0.1:${server.address().port}`,
    dropAll() {
      const n = pairs.size;
      for (const [a, b] of [...pairs]) { a.destroy(); b.destroy(); }
      return n;
    },
    close() { server.close(); this.dropAll(); },
  })));
}

// The gateway's API as another client (not the browser) calls it.
async function api(key, method, route, body) {
  const headers = { Authorization: `Bearer ${key}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(`${GATEWAY}${route}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${route}: ${r.status} ${text}`);
  try { return JSON.parse(text); } catch { return text; }
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

// Waits for fn() (run in Node, polling) to be truthy; its last value.
async function until(what, fn, timeoutMs = 20_000) {
  const t0 = Date.now();
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() - t0 > timeoutMs) throw new Error(`waited ${timeoutMs / 1000} s for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// What the terminal shows now (xterm.js's rows, as text: its no-break spaces as spaces, each
// line without its trailing ones).
async function screenText(page) {
  const text = await page.locator('#terminal .xterm-rows').innerText();
  return text.replace(/\u00a0/g, ' ').split('\n').map((l) => l.trimEnd()).join('\n');
}
async function waitScreen(page, pattern, what) {
  try {
    return await until(`the terminal to show ${what ?? pattern}`, async () => {
      const text = await screenText(page);
      return pattern.test(text) ? text : null;
    });
  } catch (e) {
    const status = await page.locator('#terminal-status').innerText().catch(() => '');
    throw new Error(`${e.message}; its status: ${status}; it shows:\n${await screenText(page)}`);
  }
}
// Waits for the shell's prompt on the terminal's last line that has text.
async function waitPrompt(page, what = 'a prompt') {
  return until(`the terminal to show ${what}`, async () => {
    const lines = (await screenText(page)).split('\n').filter((l) => l.trim());
    return /[$#]$/.test(lines[lines.length - 1] ?? '');
  });
}
async function typeLine(page, text) {
  await page.keyboard.type(text, { delay: 5 });
  await page.keyboard.press('Enter');
}

// --- The scenario ------------------------------------------------------------------------------

async function main() {
  current = 'main';
  fs.mkdirSync(SHOTS, { recursive: true });
  const relay = await startRelay(GATEWAY);
  browser = await step('launch chromium', () => chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Chromium's sandbox cannot start as root (the tests run as root in CI).
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
    timeout: 60_000,
  }));
  console.log(`  chromium ${browser.version()}`);
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  context.setDefaultTimeout(20_000);
  const page = await context.newPage();
  watch(page, 'tenant A');
  const UI = `${relay.url}/ui/`;

  if (MODE === 'no-keys') {
    await step('a gateway without keys: no sign-in', async () => {
      await page.goto(UI);
      await page.locator('table#sessions').waitFor();
      check((await page.locator('#who').innerText()) === 'no key', 'the header does not say "no key"');
      check(!(await page.locator('#api-key').count()), 'a sign-in form on a gateway without keys');
      await axeCheck(page, 'sessions (no keys)');
    });
    await step('browser errors', () => {
      if (browserErrors.length) throw new Error(browserErrors.join('\n  '));
    });
    relay.close();
    return;
  }

  await step('a wrong key is refused', async () => {
    const response = await page.goto(`${UI}#key=not-a-key`);
    const headers = await response.allHeaders();
    check((headers['content-security-policy'] ?? '').includes("script-src 'self'"),
          `Content-Security-Policy: ${headers['content-security-policy']}`);
    check((headers['x-frame-options'] ?? '').toUpperCase() === 'DENY', 'X-Frame-Options is not DENY');
    await page.locator('#sign-in-error', { hasText: 'The API key is not valid.' }).waitFor();
    check(!page.url().includes('not-a-key'), `the key stayed in the address: ${page.url()}`);
    check(await page.evaluate(() => sessionStorage.length === 0), 'a refused key was kept');
    await shot(page, 'sign-in');
    await axeCheck(page, 'sign-in');
    // The browser reports the refused call in its console: that one is expected.
    const refused = browserErrors.findIndex((e) => /status of 401 .*\/api\/sessions\?limit=1/.test(e));
    check(refused >= 0, 'the refused call is not in the browser console');
    browserErrors.splice(refused, 1);
  });

  await step('sign in with the form, by keyboard', async () => {
    await page.locator('#api-key').focus();
    await page.keyboard.type(KEY_A);
    await page.keyboard.press('Enter');
    await page.locator('table#sessions').waitFor();
    await page.locator('#live-status', { hasText: 'live' }).waitFor();
    check(await page.evaluate((k) => sessionStorage.getItem('rex.console.key') === k, KEY_A),
          'the key is not in the tab\'s session storage');
    check((await context.cookies()).length === 0, 'the console set a cookie');
  });

  const hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">';
  const session = await step('a session another client creates appears live', async () => {
    const record = await api(KEY_A, 'POST', '/api/sessions',
                             { environment: 'local', metadata: { team: 'ui', note: hostile } });
    const other = await api(KEY_B, 'POST', '/api/sessions', { environment: 'local', metadata: { team: 'b' } });
    const row = page.locator(`tr[data-session="${record.session_id}"]`);
    await row.locator('.state', { hasText: 'ready' }).waitFor();
    check((await row.innerText()).includes(`note=${hostile}`), 'the metadata is not shown as its text');
    check(await page.evaluate(() => window.__pwned === undefined), 'metadata ran as HTML');
    // Another tenant's session is not shown (its events do not reach this key's stream either).
    await api(KEY_A, 'POST', '/api/sessions', { environment: 'local', metadata: { team: 'second' } })
      .then((s) => page.locator(`tr[data-session="${s.session_id}"]`).waitFor());
    check(!(await page.locator(`tr[data-session="${other.session_id}"]`).count()),
          "another tenant's session is in the table");
    await shot(page, 'sessions');
    await axeCheck(page, 'sessions');
    return record;
  });
  const sid = session.session_id;

  await step('filters: by label', async () => {
    await page.locator('#filter-label').fill('team=second');
    await until('one row', async () => (await page.locator('table#sessions tbody tr').count()) === 1);
    check(!(await page.locator(`tr[data-session="${sid}"]`).count()), 'the filter kept a row it should hide');
    await page.locator('#filter-label').fill('');
    await page.locator(`tr[data-session="${sid}"]`).waitFor();
  });

  await step('an agent works in the session', async () => {
    await api(KEY_A, 'POST', `/api/sessions/${sid}/execute`,
              { code: 'print("<script>window.__pwned = 3</script>")' });
    await api(KEY_A, 'POST', `/api/sessions/${sid}/files`, { path: 'hello.txt', content: 'hello from the sandbox\n' });
    await api(KEY_A, 'POST', `/api/sessions/${sid}/swerex/create_session`, { session: 'default' });
    await api(KEY_A, 'POST', `/api/sessions/${sid}/swerex/run_in_session`,
              { command: 'export AGENT=was-here', session: 'default' });
    await api(KEY_A, 'POST', `/api/sessions/${sid}/swerex/run_in_session`,
              { command: 'python3 -c "print(\'y\' * 5000)"', session: 'default' });
    await api(KEY_A, 'POST', `/api/sessions/${sid}/artifacts`, { paths: ['hello.txt'] });
  });

  await step('the session page: its record', async () => {
    await page.locator(`tr[data-session="${sid}"] th a`).click();
    await page.locator('dl.record').waitFor();
    await until('the last call in the record', async () =>
      /artifacts/.test(await page.locator('dl.record').innerText()));
    await shot(page, 'session');
    await axeCheck(page, 'session record');
  });

  await step('its transcript', async () => {
    await page.locator('nav.tabs a', { hasText: 'Transcript' }).click();
    const timeline = page.locator('#transcript');
    await timeline.waitFor();
    const text = await timeline.innerText();
    for (const call of ['create', 'execute', 'files', 'swerex/run_in_session', 'artifacts'])
      check(text.includes(call), `the transcript has no ${call}: ${text.slice(0, 2000)}`);
    check(text.includes('<script>window.__pwned = 3</script>'), 'the code is not shown as text');
    check(await page.evaluate(() => window.__pwned === undefined && !document.querySelector('#transcript script, #transcript img')),
          'a transcript ran as HTML');
    check(/\d+ ms|\d+\.\d+ s/.test(text), 'no call shows its duration');
    check(/by team-a\//.test(text), 'no call shows its actor');
    // The long answer is folded.
    check((await timeline.locator('details.part').count()) >= 1, 'no large body is folded');
    await shot(page, 'transcript');
    await axeCheck(page, 'transcript');
  });

  await step('its artifacts: the list and a download', async () => {
    await page.locator('nav.tabs a', { hasText: 'Artifacts' }).click();
    const row = page.locator('#artifacts tbody tr', { hasText: 'hello.txt' });
    await row.waitFor();
    const expected = crypto.createHash('sha256').update('hello from the sandbox\n').digest('hex');
    check((await row.innerText()).includes(expected), `the sha256 shown is not ${expected}`);
    const [download] = await Promise.all([page.waitForEvent('download'), row.getByRole('button', { name: 'Download hello.txt' }).click()]);
    const file = path.join(SHOTS, 'downloaded-hello.txt');
    await download.saveAs(file);
    check(fs.readFileSync(file, 'utf8') === 'hello from the sandbox\n', 'the download is not the artifact');
    check(download.suggestedFilename() === 'hello.txt', `downloaded as ${download.suggestedFilename()}`);
    await shot(page, 'artifacts');
    await axeCheck(page, 'artifacts');
  });

  await step('its events', async () => {
    await page.locator('nav.tabs a', { hasText: 'Events' }).click();
    for (const type of ['created', 'ready', 'artifact_saved'])
      await page.locator('#events tbody th', { hasText: type }).first().waitFor();
    await shot(page, 'events');
    await axeCheck(page, 'events');
  });

  await step('a terminal: python3, Ctrl-C, resize, a dropped connection', async () => {
    await page.locator('nav.tabs a', { hasText: 'Terminal' }).click();
    await page.locator('#terminal-status', { hasText: 'connected' }).waitFor();
    await page.locator('#terminal').click();
    await waitScreen(page, /[$#]$/m, 'a prompt');
    await typeLine(page, 'python3');
    await waitScreen(page, />>>$/m, '>>>');
    await typeLine(page, '6 * 7');
    await waitScreen(page, /^42$/m, '42');
    await page.keyboard.press('Control+c');
    await waitScreen(page, /KeyboardInterrupt/, 'KeyboardInterrupt');
    await typeLine(page, 'exit()');
    await waitPrompt(page, 'the prompt after python3');
    await typeLine(page, 'sleep 60');
    await new Promise((r) => setTimeout(r, 500));
    await page.keyboard.press('Control+c');
    await waitPrompt(page, 'the prompt after Ctrl-C');
    await typeLine(page, 'echo after-$((40 + 2))');
    await waitScreen(page, /^after-42$/m, 'after-42 (Ctrl-C ended sleep)');
    // Resize: the terminal in the sandbox gets the page's size.
    const before = await page.locator('#terminal').getAttribute('data-cols');
    await page.setViewportSize({ width: 900, height: 700 });
    await until('the terminal to shrink', async () =>
      (await page.locator('#terminal').getAttribute('data-cols')) !== before);
    const cols = await page.locator('#terminal').getAttribute('data-cols');
    const rows = await page.locator('#terminal').getAttribute('data-rows');
    await new Promise((r) => setTimeout(r, 300));
    await typeLine(page, 'echo size-$(stty size | tr " " x)');
    await waitScreen(page, new RegExp(`^size-${rows}x${cols}$`, 'm'), `size-${rows}x${cols}`);
    await waitPrompt(page);
    await typeLine(page, 'KEPT=still-here');
    await waitPrompt(page);
    await shot(page, 'terminal');
    // Every connection of the page is cut; the terminal takes its shell up again.
    const cut = relay.dropAll();
    check(cut > 0, 'no connection to cut');
    await page.locator('#terminal-status', { hasText: /reconnecting|connected/ }).waitFor();
    await page.locator('#terminal-status', { hasText: 'connected' }).waitFor({ timeout: 15_000 });
    await page.locator('#terminal').click();
    await typeLine(page, 'echo "back-$KEPT"');
    await waitScreen(page, /^back-still-here$/m, 'back-still-here (the same shell after the drop)');
    // The keyboard: Tab goes to the shell (completion); Escape then Tab or Shift+Tab leaves,
    // and an Escape followed by another key still reaches the shell, before that key.
    const inTerminal = () => page.evaluate(() => document.getElementById('terminal').contains(document.activeElement));
    await page.keyboard.type('ech');
    await page.keyboard.press('Tab');
    await typeLine(page, 'tab-ok');
    await waitScreen(page, /^tab-ok$/m, 'tab-ok (Tab completed "ech" in the shell)');
    check(await inTerminal(), 'Tab took the focus out of the terminal');
    await waitPrompt(page);
    await page.keyboard.type('echo again-');
    await page.keyboard.press('Escape');
    await page.keyboard.type('.');
    await page.keyboard.press('Enter');
    await waitScreen(page, /^again-tab-ok$/m, 'again-tab-ok (Escape then "." in the shell: the last argument)');
    await waitPrompt(page);
    await page.keyboard.press('Escape');
    await page.keyboard.press('Tab');
    check(!(await inTerminal()), 'Escape then Tab did not leave the terminal');
    await page.keyboard.press('Shift+Tab');
    check(await inTerminal(), 'Shift+Tab did not come back to the terminal');
    await typeLine(page, 'echo clean-$((2 + 3))');
    await waitScreen(page, /^clean-5$/m, 'clean-5 (nothing of the Escape left in the shell)');
    await waitPrompt(page);
    await page.keyboard.press('Escape');
    await page.keyboard.press('Shift+Tab');
    check(!(await inTerminal()), 'Escape then Shift+Tab did not leave the terminal');
    check((await page.evaluate(() => document.activeElement.id)) === 'attach', 'Escape then Shift+Tab did not reach the control before the terminal');
    check((await page.locator('#terminal textarea').getAttribute('aria-describedby')) === 'terminal-keys', 'the terminal does not say how to leave it');
    await page.locator('#terminal').click();
    await page.setViewportSize({ width: 1280, height: 800 });
    await axeCheck(page, 'terminal');
    // The cut streams are reported in the browser's console: those are expected.
    for (let i = browserErrors.length - 1; i >= 0; i -= 1)
      if (/ERR_INCOMPLETE_CHUNKED_ENCODING|ERR_EMPTY_RESPONSE|ERR_CONNECTION_RESET/.test(browserErrors[i])) browserErrors.splice(i, 1);
  });

  await step("attaching to the agent's bash session", async () => {
    await page.locator('#attach-name').fill('default');
    await page.locator('#attach').click();
    await page.locator('#terminal-status', { hasText: 'attached to default' }).waitFor();
    await page.locator('#terminal').click();
    await typeLine(page, 'echo "agent-$AGENT"');
    await waitScreen(page, /^agent-was-here$/m, 'agent-was-here (the agent\'s shell)');
    // Leaving gives the session back to the agent's commands.
    await page.locator('nav.tabs a', { hasText: 'Record' }).click();
    const answer = await until('the agent\'s next command', async () => {
      try {
        return await api(KEY_A, 'POST', `/api/sessions/${sid}/swerex/run_in_session`,
                         { command: 'echo "$AGENT"', session: 'default' });
      } catch (e) {
        if (/SessionBusyError/.test(String(e))) return null;
        throw e;
      }
    });
    check(answer.output.trim() === 'was-here', `the agent's command answered ${JSON.stringify(answer)}`);
  });

  await step('a checkpoint and a fork show', async () => {
    const checkpoint = await api(KEY_A, 'POST', `/api/sessions/${sid}/checkpoints`, {});
    const cid = checkpoint.checkpoint_id;
    await page.locator('nav[aria-label="Pages"] a', { hasText: 'Checkpoints' }).click();
    const row = page.locator('#checkpoints tbody tr', { hasText: cid });
    await row.waitFor();
    await row.getByRole('button', { name: `Start sessions from ${cid}` }).click();
    await page.locator('dialog #fork-count').fill('1');
    await page.locator('dialog button[type=submit]').click();
    const forkOf = async () => (await api(KEY_A, 'GET', '/api/sessions?limit=1000')).sessions
      .find((s) => s.origin_checkpoint === cid)?.session_id;
    const fork = await until('the fork', forkOf);
    await page.reload();
    await row.locator(`td.forks a[href="#/sessions/${fork}"]`).waitFor();
    await shot(page, 'checkpoints');
    await axeCheck(page, 'checkpoints');
    // The session's own page lists its checkpoint and the fork, which links to the new session.
    await page.goto(`${UI}#/sessions/${sid}`);
    await page.locator('#session-checkpoints li', { hasText: cid }).first().waitFor();
    await page.locator(`#session-checkpoints a[href="#/sessions/${fork}"]`).click();
    await page.locator('h1', { hasText: fork }).waitFor();
  });

  await step('overview', async () => {
    await page.locator('nav[aria-label="Pages"] a', { hasText: 'Overview' }).click();
    await page.locator('#overview-cards', { hasText: 'Sessions by state' }).waitFor();
    await page.locator('#environments th', { hasText: 'local' }).waitFor();
    await page.locator('figure svg.chart').first().waitFor();
    await shot(page, 'overview');
    await axeCheck(page, 'overview');
  });

  await step('create, extend and destroy from the table', async () => {
    await page.locator('nav[aria-label="Pages"] a', { hasText: 'Sessions' }).click();
    await page.locator('table#sessions').waitFor();
    // Create, by keyboard: the button, then the dialog's fields.
    await page.locator('#new-session').focus();
    await page.keyboard.press('Enter');
    await page.locator('#create-environment').selectOption('local');
    await page.locator('#create-metadata').fill('from=ui');
    await shot(page, 'create-dialog');
    await axeCheck(page, 'create dialog');
    await page.locator('dialog button[type=submit]').click();
    const made = page.locator('tr', { hasText: 'from=ui' });
    await made.locator('.state', { hasText: 'ready' }).waitFor();
    // Extend.
    await page.getByRole('button', { name: `Extend session ${sid}` }).click();
    await page.locator('#extend-seconds').fill('1234');
    await page.locator('dialog button[type=submit]').click();
    await until('the new timeout', async () => (await api(KEY_A, 'GET', `/api/sessions/${sid}`)).timeout === 1234);
    // Destroy, cancelled with Escape, then confirmed.
    await page.getByRole('button', { name: `Destroy session ${sid}` }).click();
    await page.keyboard.press('Escape');
    check((await api(KEY_A, 'GET', `/api/sessions/${sid}`)).state === 'ready', 'a cancelled destroy destroyed');
    await page.getByRole('button', { name: `Destroy session ${sid}` }).click();
    await page.locator('dialog button[type=submit]').click();
    await page.locator(`tr[data-session="${sid}"]`).waitFor({ state: 'detached' });
    check((await api(KEY_A, 'GET', `/api/sessions/${sid}`)).state === 'destroyed', 'the session is not destroyed');
    // It is still there with the filter on All.
    await page.locator('#filter-state').selectOption('');
    await page.locator(`tr[data-session="${sid}"] .state`, { hasText: 'destroyed' }).waitFor();
  });

  await step('sign out', async () => {
    await page.locator('#sign-out').click();
    await page.locator('#api-key').waitFor();
    check(await page.evaluate(() => sessionStorage.length === 0), 'the key outlived signing out');
  });

  await step('browser errors', () => {
    if (browserErrors.length)
      throw new Error(`${browserErrors.length} error(s) in the browser:\n  ` +
                      browserErrors.join('\n  '));
  });
  relay.close();
}

let status = 0;
try {
  await main();
  console.log(`ok: console ${MODE} (${seconds(started)} s)`);
} catch (e) {
  if (timedOut) await new Promise(() => {});  // the deadline's handler reports and exits
  console.error(`FAIL: ${e?.message ?? e}`);
  if (browserErrors.length && e?.step !== 'browser errors')
    console.error(`errors in the browser meanwhile:\n  ${browserErrors.join('\n  ')}`);
  status = 1;
} finally {
  current = 'closing the browser';
  await browser?.close().catch((e) => console.error(`closing the browser: ${e}`));
  clearTimeout(deadline);
}
process.exit(status);
