// Opens a fedpriv HTML report in headless Chromium and checks it the way a reader
// sees it: no console errors or warnings of level error (CSP violations and failed
// loads included), no page exceptions or dialogs, every <img> decoded, no placeholder
// for a missing image, the expected number of plots; then saves a screenshot.
//
// Chromium is driven through the DevTools protocol over --remote-debugging-pipe
// (file descriptors 3 and 4, NUL-terminated JSON), so nothing but node and Debian's
// chromium is needed.
//
//   node check-report.js REPORT.html SCREENSHOT.png [--expect-text TEXT]...
//        [--expect-selector CSS]... [--expect-count CSS N]... [--expect-in-view CSS]...
//        [--expect-fits CSS]... [--min-images N] [--min-plots N] [--width W] [--height H]
// --expect-selector fails unless the CSS selector matches at least one element;
// --expect-count unless it matches exactly N; --expect-in-view unless every element it
// matches (at least one) lies wholly inside the first screen, W x H (H: 900 when not
// given); --expect-fits unless every element it matches (at least one) is no wider than
// its box (scrollWidth <= clientWidth), sits inside the window's width, and has no
// ancestor that scrolls sideways; each also fails when the page itself is wider than
// the window. The window is W x H (H, default 900, is also the viewport height).
// Exit 0 when every check passes, 1 with one line per failure, 2 on bad usage.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

function usage(msg) {
  process.stderr.write(`check-report: ${msg}\nusage: node check-report.js REPORT.html SCREENSHOT.png ` +
                       `[--expect-text TEXT]... [--expect-selector CSS]... [--expect-count CSS N]... ` +
                       `[--expect-in-view CSS]... [--expect-fits CSS]... [--min-images N] [--min-plots N] [--width W] [--height H]\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
const opt = { expect: [], selectors: [], counts: [], inView: [], fits: [], minImages: 0, minPlots: 0, width: 1280,
              height: 0 };
const pos = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const num = () => { const v = Number(args[++i]); if (!Number.isFinite(v) || v < 0) usage(`${a} needs a number`); return v; };
  if (a === '--expect-text') { if (i + 1 >= args.length) usage('--expect-text needs a value'); opt.expect.push(args[++i]); }
  else if (a === '--expect-selector') { if (i + 1 >= args.length) usage('--expect-selector needs a value'); opt.selectors.push(args[++i]); }
  else if (a === '--expect-count') {
    if (i + 2 >= args.length) usage('--expect-count needs a selector and a number');
    const sel = args[++i];
    opt.counts.push({ sel, n: num() });
  }
  else if (a === '--expect-in-view') { if (i + 1 >= args.length) usage('--expect-in-view needs a value'); opt.inView.push(args[++i]); }
  else if (a === '--expect-fits') { if (i + 1 >= args.length) usage('--expect-fits needs a value'); opt.fits.push(args[++i]); }
  else if (a === '--min-images') opt.minImages = num();
  else if (a === '--min-plots') opt.minPlots = num();
  else if (a === '--width') opt.width = num();
  else if (a === '--height') opt.height = num();
  else if (a.startsWith('--')) usage(`unknown option ${a}`);
  else pos.push(a);
}
if (pos.length !== 2) usage('REPORT.html and SCREENSHOT.png are required');
const report = path.resolve(pos[0]);
const shot = path.resolve(pos[1]);
if (!fs.existsSync(report)) usage(`${pos[0]}: no such file`);

const viewHeight = opt.height > 0 ? opt.height : 900;
const chrome = process.env.CHROMIUM || 'chromium';
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'fedpriv-chromium-'));
const proc = spawn(chrome, [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-extensions',
  '--enable-logging=stderr', '--v=0', `--user-data-dir=${profile}`, '--remote-debugging-pipe',
  'about:blank'], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });

const failures = [];
let chromeLog = '';
proc.stderr.on('data', (d) => { chromeLog += d.toString(); });
// Chromium logs console messages of the page as ...:INFO:CONSOLE(...)] "msg" lines.
const toChrome = proc.stdio[3], fromChrome = proc.stdio[4];
let nextId = 1;
const pending = new Map();
const listeners = [];
let buffer = Buffer.alloc(0);
fromChrome.on('data', (chunk) => {
  buffer = Buffer.concat([buffer, chunk]);
  let nul;
  while ((nul = buffer.indexOf(0)) >= 0) {
    const msg = JSON.parse(buffer.subarray(0, nul).toString('utf8'));
    buffer = buffer.subarray(nul + 1);
    if (msg.id && pending.has(msg.id)) {
      const { resolve, reject, method } = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) reject(new Error(`${method}: ${msg.error.message}`)); else resolve(msg.result);
    } else if (msg.method) for (const l of listeners) l(msg);
  }
});
function send(method, params = {}, sessionId) {
  const id = nextId++;
  const m = { id, method, params };
  if (sessionId) m.sessionId = sessionId;
  toChrome.write(JSON.stringify(m) + '\0');
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject, method }));
}
function waitFor(pred, ms, what) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
    listeners.push((m) => { if (pred(m)) { clearTimeout(t); resolve(m); } });
  });
}

let exited = false;
proc.on('exit', () => { exited = true; });
function finish(code) {
  try { fs.rmSync(profile, { recursive: true, force: true }); } catch (e) { /* best effort */ }
  process.exit(code);
}
const watchdog = setTimeout(() => {
  process.stderr.write('check-report: chromium did not finish in 90 s\n');
  proc.kill('SIGKILL');
  finish(1);
}, 90000);

(async () => {
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  listeners.push((m) => {
    if (m.sessionId !== sessionId) return;
    if (m.method === 'Runtime.consoleAPICalled' && (m.params.type === 'error' || m.params.type === 'assert'))
      failures.push(`console ${m.params.type}: ${m.params.args.map((a) => a.value ?? a.description).join(' ')}`);
    if (m.method === 'Runtime.exceptionThrown')
      failures.push(`page exception: ${m.params.exceptionDetails.text} ${m.params.exceptionDetails.exception?.description ?? ''}`);
    if (m.method === 'Log.entryAdded' && m.params.entry.level === 'error')
      failures.push(`console error (${m.params.entry.source}): ${m.params.entry.text}`);
    if (m.method === 'Page.javascriptDialogOpening') {
      failures.push(`a dialog opened: ${m.params.type} "${m.params.message}"`);
      send('Page.handleJavaScriptDialog', { accept: false }, sessionId).catch(() => {});
    }
    if (m.method === 'Network.loadingFailed')
      failures.push(`a resource failed to load: ${m.params.errorText}`);
  });
  for (const d of ['Runtime', 'Log', 'Page', 'Network']) await send(`${d}.enable`, {}, sessionId);
  await send('Emulation.setDeviceMetricsOverride',
             { width: opt.width, height: viewHeight, deviceScaleFactor: 1, mobile: false }, sessionId);
  const loaded = waitFor((m) => m.sessionId === sessionId && m.method === 'Page.loadEventFired', 30000, 'the page load');
  await send('Page.navigate', { url: 'file://' + report }, sessionId);
  await loaded;
  // Let image decoding and layout settle before inspecting.
  await send('Runtime.evaluate', {
    expression: 'Promise.all([...document.images].map(i => i.decode().catch(() => null)))', awaitPromise: true,
  }, sessionId);
  const probe = await send('Runtime.evaluate', {
    returnByValue: true,
    expression: `((selectors, counts, inView, fits, W, H) => {
      const imgs = [...document.images];
      const name = (e) => e.tagName.toLowerCase() + (e.className ? '.' + String(e.className).split(' ').join('.') : '');
      // Layout: what is cut off sideways, and what lies below (or beside) the first screen.
      const cut = [], away = [];
      const pageWide = document.documentElement.scrollWidth > W;
      for (const s of fits) {
        const els = [...document.querySelectorAll(s)];
        if (!els.length) cut.push(s + ': no element matches');
        for (const e of els) {
          const r = e.getBoundingClientRect();
          if (e.scrollWidth > e.clientWidth + 1) cut.push(s + ': ' + name(e) + ' is cut off (scrollWidth ' + e.scrollWidth + ' > clientWidth ' + e.clientWidth + ')');
          if (r.right > W + 1) cut.push(s + ': ' + name(e) + ' is cut off (right edge at ' + Math.ceil(r.right) + ' px of ' + W + ')');
          for (let p = e.parentElement; p && p !== document.documentElement; p = p.parentElement)
            if (p.scrollWidth > p.clientWidth + 1 && getComputedStyle(p).overflowX !== 'visible')
              cut.push(s + ': ' + name(e) + ' is cut off by its scroll box ' + name(p) + ' (' + p.scrollWidth + ' px in ' + p.clientWidth + ')');
        }
        if (pageWide) cut.push(s + ': the page is cut off (' + document.documentElement.scrollWidth + ' px wide in a ' + W + ' px window)');
      }
      for (const s of inView) {
        const els = [...document.querySelectorAll(s)];
        if (!els.length) away.push(s + ': no element matches');
        const outside = els.filter(e => { const r = e.getBoundingClientRect(); return r.top < 0 || r.left < 0 || r.bottom > H + 0.5 || r.right > W + 0.5; });
        if (outside.length) away.push(s + ': ' + outside.length + ' of ' + els.length + ' not within the first ' + W + 'x' + H + ' (the first at y = ' + Math.round(outside[0].getBoundingClientRect().top) + ')');
      }
      return {
        counts: counts.map(c => document.querySelectorAll(c.sel).length),
        cut, away,
        images: imgs.length,
        broken: imgs.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.alt || i.src.slice(0, 40)),
        missing: [...document.querySelectorAll('.missing')].map(e => e.textContent),
        plots: document.querySelectorAll('svg.plot').length,
        scripts: document.scripts.length,
        text: document.body.innerText,
        height: Math.ceil(document.documentElement.scrollHeight),
        selectors: selectors.map(s => document.querySelectorAll(s).length),
      };
    })(${JSON.stringify(opt.selectors)}, ${JSON.stringify(opt.counts)}, ${JSON.stringify(opt.inView)}, ` +
      `${JSON.stringify(opt.fits)}, ${opt.width}, ${viewHeight})`,
  }, sessionId);
  const r = probe.result.value;
  if (r.broken.length) failures.push(`${r.broken.length} image(s) did not decode: ${r.broken.slice(0, 5).join(', ')}`);
  if (r.missing.length) failures.push(`${r.missing.length} missing-image placeholder(s) in the page`);
  if (r.images < opt.minImages) failures.push(`${r.images} image(s), expected at least ${opt.minImages}`);
  if (r.plots < opt.minPlots) failures.push(`${r.plots} plot(s), expected at least ${opt.minPlots}`);
  if (r.scripts !== 0) failures.push(`${r.scripts} <script> element(s) in the page (the report has none)`);
  for (const t of opt.expect)
    if (!r.text.includes(t)) failures.push(`the page text does not contain ${JSON.stringify(t)}`);
  opt.selectors.forEach((s, i) => {
    if (r.selectors[i] === 0) failures.push(`no element matches ${JSON.stringify(s)}`);
  });
  opt.counts.forEach((c, i) => {
    if (r.counts[i] !== c.n) failures.push(`${r.counts[i]} element(s) match ${JSON.stringify(c.sel)}, expected ${c.n}`);
  });
  for (const m of r.cut) failures.push(m);
  for (const m of r.away) failures.push(m);
  const height = Math.min(opt.height > 0 ? opt.height : r.height, 16000);
  const png = await send('Page.captureScreenshot', {
    format: 'png', captureBeyondViewport: true, clip: { x: 0, y: 0, width: opt.width, height, scale: 1 },
  }, sessionId);
  fs.mkdirSync(path.dirname(shot), { recursive: true });
  fs.writeFileSync(shot, Buffer.from(png.data, 'base64'));
  await send('Browser.close').catch(() => {});
  // Console lines Chromium logged itself (covers messages sent before we attached).
  for (const line of chromeLog.split('\n'))
    if (/:(ERROR|FATAL):CONSOLE/.test(line)) failures.push(`chromium log: ${line.trim()}`);
  clearTimeout(watchdog);
  if (!exited) proc.kill('SIGKILL');
  process.stdout.write(`check-report: ${r.images} images, ${r.plots} plots, screenshot ${opt.width}x${height} ` +
                       `in ${pos[1]}\n`);
  if (failures.length) {
    for (const f of failures) process.stderr.write(`check-report: FAIL: ${f}\n`);
    finish(1);
  }
  finish(0);
})().catch((e) => {
  process.stderr.write(`check-report: ${e.message}\n`);
  if (!exited) proc.kill('SIGKILL');
  finish(1);
});
