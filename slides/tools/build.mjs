#!/usr/bin/env node
// Builds the decks: slides/decks/*.md, with every <!-- include: file#region --> replaced by that
// region of the sources (regions.mjs) and the diagrams drawn (diagrams.mjs), into HTML and PDF
// with Marp; and the cheat sheet, CHEATSHEET.md, as one printed page (cheatsheet.html and
// cheatsheet.pdf, in the theme slides/theme/cheatsheet.css). `./tutorial slides` runs it; the
// tests run it too.
//
//   node slides/tools/build.mjs [--out DIR] [--no-pdf] [--check] [--decks DIR] [--no-lint]
//
//   --out DIR    where the decks go (default: build/slides); DIR/NAME.html, DIR/NAME.pdf
//   --no-pdf     HTML only (no browser needed)
//   --check      expand and check the decks, build nothing (needs no npm packages)
//   --decks DIR  read the decks from DIR instead of slides/decks (the tests' bad decks)
//   --no-lint    skip the checks that tie decks to chapters (for decks outside slides/decks)
//   --only NAME  build only the decks whose file name starts with NAME (repeatable), e.g. 04;
//                --only cheatsheet builds the cheat sheet alone
//   --cheatsheet FILE   build FILE as the cheat sheet (default: CHEATSHEET.md, built with the
//                decks of slides/decks; with --decks DIR only when this option names one)
//   --no-cheatsheet     build the decks only
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expandIncludes, RegionError } from './regions.mjs';
import { DIAGRAMS } from './diagrams.mjs';

const SLIDES = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ROOT = resolve(SLIDES, '..');

const HELP = readFileSync(fileURLToPath(import.meta.url), 'utf8')
  .split('\n')
  .slice(1)
  .filter((l) => l.startsWith('//'))
  .map((l) => l.replace(/^\/\/ ?/, ''))
  .join('\n');

function parseArgs(argv) {
  const opts = { out: join(ROOT, 'build', 'slides'), pdf: true, check: false, decks: join(SLIDES, 'decks'), lint: true, only: [], cheatsheet: undefined };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value`, 2);
      return resolve(argv[++i]);
    };
    if (a === '--out') opts.out = value();
    else if (a === '--decks') opts.decks = value();
    else if (a === '--only') {
      if (i + 1 >= argv.length) fail('--only needs a deck name, such as 04', 2);
      opts.only.push(argv[++i]);
    } else if (a === '--cheatsheet') opts.cheatsheet = value();
    else if (a === '--no-cheatsheet') opts.cheatsheet = null;
    else if (a === '--no-pdf') opts.pdf = false;
    else if (a === '--check') opts.check = true;
    else if (a === '--no-lint') opts.lint = false;
    else if (a === '-h' || a === '--help') {
      process.stdout.write(HELP + '\n');
      process.exit(0);
    } else fail(`unknown option '${a}' (--help lists them)`, 2);
  }
  return opts;
}

// The cheat sheet is a Markdown file that reads well on GitHub (no Marp front matter); the build
// adds the front matter that makes it one page in the cheatsheet theme. A line that Marp would
// take for a slide break (---, ***, ___ on their own) would make it two pages: refused here.
const CHEATSHEET_NAME = 'cheatsheet.md';
function cheatsheetMarkdown(file) {
  const text = readFileSync(file, 'utf8');
  let fenced = false;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; ++i) {
    if (/^\s*(```|~~~)/.test(lines[i])) fenced = !fenced;
    else if (!fenced && /^ {0,3}([-*_])( *\1){2,} *$/.test(lines[i])) {
      fail(`${relative(ROOT, file)}:${i + 1}: '${lines[i].trim()}' would start a second page; the cheat sheet is one page`);
    }
  }
  return `---\nmarp: true\ntheme: cheatsheet\npaginate: false\n---\n\n${text}`;
}

function fail(message, code = 1) {
  process.stderr.write(`slides: ${message}\n`);
  process.exit(code);
}

// The lessons `./tutorial run NAME` knows: the first field of each row of the lesson table.
function tutorialLessons() {
  const text = readFileSync(join(ROOT, 'chapters', 'lessons.txt'), 'utf8');
  return new Set([...text.matchAll(/^([A-Za-z0-9-]+) *\|/gm)].map((m) => m[1]));
}

// The checks that tie the decks to the chapters: one deck per chapter, named like its folder;
// each chapter deck has a "Run this now" slide with `./tutorial run NN`, a lesson that exists;
// each chapter README links its deck; every deck has speaker notes.
function lint(decks, expanded) {
  const problems = [];
  const chapters = readdirSync(join(ROOT, 'chapters'), { withFileTypes: true })
    .filter((d) => d.isDirectory() && /^\d\d_/.test(d.name))
    .map((d) => d.name);
  const lessons = tutorialLessons();
  for (const chapter of chapters) {
    const deck = `${chapter}.md`;
    if (!decks.includes(deck)) problems.push(`chapter ${chapter} has no deck slides/decks/${deck}`);
    const readme = readFileSync(join(ROOT, 'chapters', chapter, 'README.md'), 'utf8');
    if (!readme.includes(`../../slides/decks/${deck}`)) problems.push(`chapters/${chapter}/README.md does not link its deck ../../slides/decks/${deck}`);
  }
  const rootReadme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  for (const deck of decks) {
    const text = expanded.get(deck);
    const number = deck.slice(0, 2);
    if (!rootReadme.includes(`slides/decks/${deck}`)) problems.push(`README.md does not link slides/decks/${deck}`);
    if (!/<!--(?!\s*(include:|_?[a-zA-Z]+:))[\s\S]*?-->/.test(text)) problems.push(`${deck} has no speaker notes (HTML comments)`);
    if (!/^\d\d_/.test(deck) || deck === '00_introduction.md') continue;  // the course, not a chapter
    if (!chapters.includes(deck.replace(/\.md$/, ''))) problems.push(`${deck} names no chapter folder chapters/${deck.replace(/\.md$/, '')}`);
    const cue = text.match(/Run this now[\s\S]*?\.\/tutorial run ([A-Za-z0-9-]+)/);
    if (!cue) problems.push(`${deck} has no "Run this now" slide with ./tutorial run ${number}`);
    else if (cue[1] !== number) problems.push(`${deck}'s "Run this now" runs lesson ${cue[1]}, not ${number}`);
    for (const m of text.matchAll(/\.\/tutorial run ([A-Za-z0-9-]+)/g)) {
      if (!lessons.has(m[1])) problems.push(`${deck} shows ./tutorial run ${m[1]}, which is not a lesson in chapters/lessons.txt`);
    }
  }
  return problems;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const all = readdirSync(opts.decks).filter((f) => f.endsWith('.md')).sort();
  const decks = opts.only.length ? all.filter((f) => opts.only.some((o) => f.startsWith(o))) : all;
  // The cheat sheet comes with the real decks (or when named), and with --only only if asked for.
  if (opts.cheatsheet === undefined) opts.cheatsheet = opts.decks === join(SLIDES, 'decks') ? join(ROOT, 'CHEATSHEET.md') : null;
  if (opts.only.length && !opts.only.some((o) => 'cheatsheet'.startsWith(o))) opts.cheatsheet = null;
  if (decks.length === 0 && !opts.cheatsheet) fail(`no decks (*.md${opts.only.length ? ` starting with ${opts.only.join(' or ')}` : ''}) in ${opts.decks}`);
  const expanded = new Map();
  try {
    for (const deck of decks) expanded.set(deck, expandIncludes(readFileSync(join(opts.decks, deck), 'utf8'), deck, ROOT));
  } catch (e) {
    if (e instanceof RegionError) fail(e.message);
    throw e;
  }
  if (opts.lint && opts.only.length === 0) {
    const problems = lint(decks, expanded);
    if (problems.length) fail(`the decks do not match the chapters:\n  ${problems.join('\n  ')}`);
  }
  const cheatsheet = opts.cheatsheet ? cheatsheetMarkdown(opts.cheatsheet) : null;
  if (opts.check) {
    process.stdout.write(`slides: ${decks.length} decks checked, every include found${cheatsheet ? ', and the cheat sheet' : ''}\n`);
    return;
  }
  if (cheatsheet) expanded.set(CHEATSHEET_NAME, cheatsheet);

  // Write the expanded decks and the diagrams side by side: relative image paths then resolve
  // the same way in the HTML, in the PDF and in the Markdown.
  rmSync(opts.out, { recursive: true, force: true });
  mkdirSync(join(opts.out, 'diagrams'), { recursive: true });
  for (const [name, draw] of Object.entries(DIAGRAMS)) writeFileSync(join(opts.out, 'diagrams', name), draw());
  const sources = [];
  for (const [deck, text] of expanded) {
    const file = join(opts.out, deck);
    writeFileSync(file, text);
    sources.push(file);
  }
  let marpCli;
  try {
    ({ marpCli } = await import('@marp-team/marp-cli'));
  } catch {
    fail(`Marp is not installed: run  npm ci --prefix ${relative(process.cwd(), SLIDES) || '.'}  (./tutorial slides does)`);
  }
  // A generous browser timeout: the tests build the PDFs while other tests load both cores.
  const common = ['--no-stdin', '--no-config-file', '--theme-set', join(SLIDES, 'theme', 'tutorial.css'), '--theme-set', join(SLIDES, 'theme', 'cheatsheet.css'), '--html', '--allow-local-files', '--browser-timeout', '120'];
  const formats = opts.pdf ? [[], ['--pdf']] : [[]];
  for (const format of formats) {
    const code = await marpCli([...common, ...format, ...sources]);
    if (code !== 0) fail(`marp failed (exit ${code}) building ${format.length ? 'PDF' : 'HTML'}`);
  }
  process.stdout.write(`slides: ${decks.length} decks${cheatsheet ? ' and the cheat sheet' : ''} in ${relative(process.cwd(), opts.out) || '.'}/ (HTML${opts.pdf ? ' and PDF' : ''})\n`);
}

main().catch((e) => fail(e.stack ?? String(e)));
