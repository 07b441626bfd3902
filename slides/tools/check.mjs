#!/usr/bin/env node
// Opens every built deck in headless Chromium, as an audience would see it, and checks each
// slide: nothing may spill out of the slide or out of its box (a code line too long, a list too
// tall), and every image must load. It saves a screenshot of each slide, so a failure can be
// looked at, and checks that each HTML deck has its PDF. The cheat sheet (cheatsheet.html) is
// checked the same way, as one page: a second page, or content taller than the page, fails.
//
//   node slides/tools/check.mjs DIR [--no-pdf] [--screenshots OUT]
//
//   DIR              the output of build.mjs (DIR/*.html)
//   --no-pdf         do not require DIR/NAME.pdf
//   --screenshots    where the PNGs go (default: DIR/screenshots/NAME/NN.png)
// The browser is $CHROME_PATH, or /usr/bin/chromium (Debian's chromium package).
// Exit status: 0 every slide fits, 1 a slide does not (each problem is listed), 77 no browser.
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { inflateSync } from 'node:zlib';


function fail(message, code = 1) {
  process.stderr.write(`slides check: ${message}\n`);
  process.exit(code);
}

function parseArgs(argv) {
  const opts = { dir: null, pdf: true, shots: null };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--no-pdf') opts.pdf = false;
    else if (a === '--screenshots') {
      if (i + 1 >= argv.length) fail('--screenshots needs a folder', 2);
      opts.shots = resolve(argv[++i]);
    } else if (a === '-h' || a === '--help') {
      const text = readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(1);
      process.stdout.write(text.filter((l) => l.startsWith('//')).map((l) => l.replace(/^\/\/ ?/, '')).join('\n') + '\n');
      process.exit(0);
    } else if (a.startsWith('-')) fail(`unknown option '${a}' (--help lists them)`, 2);
    else if (opts.dir) fail(`one folder only, got '${opts.dir}' and '${a}'`, 2);
    else opts.dir = resolve(a);
  }
  if (!opts.dir) fail('which folder? node slides/tools/check.mjs build/slides', 2);
  opts.shots ??= join(opts.dir, 'screenshots');
  return opts;
}

// The page sizes of a PDF, in points: each /MediaBox, found in the file or in its compressed
// object streams (Chromium writes them there).
function pdfPageSizes(bytes) {
  const boxes = [];
  const scan = (text) => {
    for (const m of text.matchAll(/\/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s*\]/g)) {
      boxes.push({ width: m[3] - m[1], height: m[4] - m[2] });
    }
  };
  const raw = bytes.toString('latin1');
  scan(raw);
  for (const m of raw.matchAll(/stream\r?\n/g)) {
    const end = raw.indexOf('endstream', m.index);
    if (end < 0) continue;
    try {
      scan(inflateSync(bytes.subarray(m.index + m[0].length, end)).toString('latin1'));
    } catch {
      // not a Flate stream (an image, a font): no page there
    }
  }
  return boxes;
}

// The printed page the cheat sheet must fit: A4 (595.28 x 841.89 pt) and US Letter (612 x 792 pt).
const ONE_PAGE = { width: 595.28, height: 792 };

// Runs in the page, on the active slide: every way its content can fail to fit.
function problemsOnSlide() {
  const svg = document.querySelector('svg.bespoke-marp-active[data-marpit-svg]');
  const section = svg?.querySelector('foreignObject > section');
  if (!section) return ['no active slide found'];
  const problems = [];
  const name = (el) => {
    const text = (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 50);
    return `<${el.tagName.toLowerCase()}>${text ? ` "${text}"` : ''}`;
  };
  // The slide: content taller or wider than 1280x720 (its padding included) is cut off.
  if (section.scrollHeight > section.clientHeight + 1) problems.push(`content is ${section.scrollHeight - section.clientHeight}px taller than the slide`);
  if (section.scrollWidth > section.clientWidth + 1) problems.push(`content is ${section.scrollWidth - section.clientWidth}px wider than the slide`);
  // Each box: content wider or taller than its box (a long code line, a wide table).
  const slide = section.getBoundingClientRect();
  const scale = slide.width / section.offsetWidth;
  for (const el of section.querySelectorAll('*')) {
    if (el.closest('footer, header')) continue;
    const style = getComputedStyle(el);
    if (style.display === 'inline' || style.display === 'none') continue;
    if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1) problems.push(`${name(el)} is ${el.scrollWidth - el.clientWidth}px wider than its box`);
    if (el.clientHeight > 0 && el.scrollHeight > el.clientHeight + 1 && style.overflowY !== 'visible') problems.push(`${name(el)} is ${el.scrollHeight - el.clientHeight}px taller than its box`);
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    const out = Math.max(slide.left - r.left, r.right - slide.right, slide.top - r.top, r.bottom - slide.bottom) / scale;
    if (out > 1) problems.push(`${name(el)} reaches ${Math.round(out)}px outside the slide`);
  }
  return problems;
}

// Runs in the page: every image of the deck (inline and background) must load.
async function brokenImages() {
  const urls = new Set();
  for (const img of document.querySelectorAll('section img')) urls.add(img.currentSrc || img.src);
  for (const el of document.querySelectorAll('section [style*="url("], section figure')) {
    for (const m of getComputedStyle(el).backgroundImage.matchAll(/url\("?([^")]+)"?\)/g)) urls.add(m[1]);
  }
  const results = await Promise.all(
    [...urls].map(
      (url) =>
        new Promise((done) => {
          const probe = new Image();
          probe.onload = () => done(probe.naturalWidth > 0 ? null : url);
          probe.onerror = () => done(url);
          probe.src = url;
        }),
    ),
  );
  return { count: urls.size, broken: results.filter(Boolean) };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!existsSync(opts.dir)) fail(`${opts.dir} does not exist: build the decks first (./tutorial slides)`);
  const decks = readdirSync(opts.dir).filter((f) => f.endsWith('.html')).sort();
  if (decks.length === 0) fail(`no HTML decks in ${opts.dir}: build them first (./tutorial slides)`);
  const browserPath = process.env.CHROME_PATH || '/usr/bin/chromium';
  if (!existsSync(browserPath)) fail(`no browser at ${browserPath}: apt-get install chromium (or set CHROME_PATH)`, 77);
  let puppeteer;
  try {
    puppeteer = (await import('puppeteer-core')).default;
  } catch {
    fail(`puppeteer-core is not installed: run  npm ci --prefix slides  (./tutorial slides does)`, 77);
  }
  // The flags a sandboxed CI machine needs: no sandbox for root, and no network of its own.
  const browser = await puppeteer.launch({
    executablePath: browserPath,
    headless: true,
    timeout: 60000,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--allow-file-access-from-files'],
  });
  const problems = [];
  let slides = 0;
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(30000);
    await page.setViewport({ width: 1280, height: 720 });
    for (const deck of decks) {
      const base = deck.replace(/\.html$/, '');
      if (opts.pdf) {
        const pdf = join(opts.dir, `${base}.pdf`);
        if (!existsSync(pdf)) problems.push(`${base}: no PDF (${pdf})`);
        else {
          const bytes = readFileSync(pdf);
          if (bytes.subarray(0, 5).toString() !== '%PDF-' || !bytes.subarray(-1024).toString('latin1').includes('%%EOF')) problems.push(`${base}.pdf is not a complete PDF`);
          else if (base === 'cheatsheet') {
            const pages = pdfPageSizes(bytes);
            const mm = (pt) => `${(pt / 72 * 25.4).toFixed(1)}`;
            if (pages.length !== 1) problems.push(`cheatsheet.pdf has ${pages.length} pages: it must be one`);
            for (const p of pages.filter((p) => p.width > ONE_PAGE.width + 0.5 || p.height > ONE_PAGE.height + 0.5)) {
              problems.push(`cheatsheet.pdf's page is ${mm(p.width)} x ${mm(p.height)} mm: it must fit A4 and Letter (210 x 279.4 mm)`);
            }
          }
        }
      }
      await page.goto(pathToFileURL(join(opts.dir, deck)).href, { waitUntil: 'load' });
      await page.evaluate(() => document.fonts.ready);
      // The presenter's on-screen buttons are not part of a slide: keep them out of the pictures.
      await page.addStyleTag({ content: '.bespoke-marp-osc { display: none !important; }' });
      const images = await page.evaluate(brokenImages);
      for (const url of images.broken) problems.push(`${base}: image does not load: ${url}`);
      const count = await page.evaluate(() => document.querySelectorAll('svg[data-marpit-svg]').length);
      if (base === 'cheatsheet') {
        if (count !== 1) problems.push(`cheatsheet has ${count} pages: it must fit one (a line '---' starts a page)`);
        // Screenshot the page at its printed size, so that it can be read.
        const [width, height] = await page.evaluate(() => document.querySelector('svg[data-marpit-svg]').getAttribute('viewBox').split(/\s+/).slice(2).map(Number));
        await page.setViewport({ width: Math.round(width), height: Math.round(height), deviceScaleFactor: 2 });
      }
      mkdirSync(join(opts.shots, base), { recursive: true });
      for (let n = 1; n <= count; ++n) {
        await page.evaluate((i) => { location.hash = `#${i}`; }, n);
        await page.waitForFunction((i) => document.querySelectorAll('svg[data-marpit-svg]')[i - 1]?.classList.contains('bespoke-marp-active'), {}, n);
        await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
        for (const p of await page.evaluate(problemsOnSlide)) problems.push(`${base} slide ${n}: ${p}`);
        await page.screenshot({ path: join(opts.shots, base, `${String(n).padStart(2, '0')}.png`) });
        ++slides;
      }
      await page.setViewport({ width: 1280, height: 720 });
    }
  } finally {
    await browser.close();
  }
  if (problems.length) fail(`${problems.length} problem(s) in ${slides} slides:\n  ${problems.join('\n  ')}\nscreenshots: ${opts.shots}`);
  process.stdout.write(`slides check: ${decks.length} decks, ${slides} slides: every slide fits and every image loads (screenshots in ${opts.shots})\n`);
}

main().catch((e) => fail(e.stack ?? String(e)));
