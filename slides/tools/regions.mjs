// Code on slides comes from the sources, never from a copy: a deck line
//
//   <!-- include: chapters/04_all_reduce/main.cpp#ring_all_reduce -->
//
// is replaced, when the decks are built, by the lines between the markers
//
//   // --8<-- [start:ring_all_reduce]
//   ...
//   // --8<-- [end:ring_all_reduce]
//
// in that file (any comment style: the marker is found anywhere on its line). Most code needs no
// markers at all; two other cuts find their lines by what the code already says:
//
//   <!-- include: chapters/04_all_reduce/main.cpp#ring_all_reduce() -->   a function: its comment
//       lines just above, its signature and its body to the closing brace (C++), or its `def`
//       block (Python); `Class::method()` names a member defined outside its class
//   <!-- include: chapters/04_all_reduce/main.cpp#step:3 -->    main()'s "---- Step 3" banner and
//   <!-- include: chapters/04_all_reduce/main.cpp#step:2-3 -->  what follows, up to the next step's
//       banner (after step 3 here) or the end of the enclosing block
//
// A region from a Markdown file is pasted as it is, less its one-line HTML comments (it may hold
// its own fenced block, such as a README's checked expected output); from any other file it
// becomes a fenced code block in that file's language.
// A deck that names a missing file or region, or a file whose markers do not pair up, fails the
// build with the deck's line number, so a slide cannot drift from the code it shows.
import { readFileSync } from 'node:fs';
import { extname, basename, join } from 'node:path';

const MARKER = /--8<-- \[(start|end):([A-Za-z0-9_.-]+)\]/;
const INCLUDE = /^<!--\s*include:\s*([^#\s]+)#([A-Za-z0-9_.:-]+(?:\(\))?)\s*-->\s*$/;
const STEP_BANNER = /(?:\/\/|#) ---- Step (\d+)\b/;

export class RegionError extends Error {}

// Every region of one file, as name -> lines (marker lines of nested regions left out, common
// indentation removed).
export function parseRegions(text, file) {
  const lines = text.split('\n');
  const open = new Map();  // name -> first line index
  const regions = new Map();
  lines.forEach((line, i) => {
    const m = MARKER.exec(line);
    if (!m) return;
    const [, kind, name] = m;
    if (kind === 'start') {
      if (open.has(name) || regions.has(name)) {
        throw new RegionError(`${file}:${i + 1}: region '${name}' starts twice`);
      }
      open.set(name, i + 1);
    } else {
      if (!open.has(name)) throw new RegionError(`${file}:${i + 1}: region '${name}' ends but never started`);
      const body = lines.slice(open.get(name), i).filter((l) => !MARKER.test(l));
      open.delete(name);
      if (body.every((l) => l.trim() === '')) throw new RegionError(`${file}:${i + 1}: region '${name}' is empty`);
      regions.set(name, dedent(body));
    }
  });
  for (const [name, line] of open) throw new RegionError(`${file}:${line}: region '${name}' never ends`);
  return regions;
}

function dedent(lines) {
  const indents = lines.filter((l) => l.trim() !== '').map((l) => l.match(/^ */)[0].length);
  const cut = Math.min(...indents);
  return lines.map((l) => l.slice(cut));
}

const indentOf = (line) => line.match(/^\s*/)[0].length;

// The comment lines directly above line `at` (no blank line between), for a function's cut.
function leadingComments(lines, at, comment) {
  let first = at;
  while (first > 0 && lines[first - 1].trim().startsWith(comment)) first -= 1;
  return first;
}

// A function named `name` ("f" or "Class::f"): from its comments to its closing brace (C++,
// braces counted outside strings and comments well enough for this project's code) or to the
// end of its indented block (Python).
export function cutFunction(text, file, name) {
  const lines = text.split('\n');
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  if (extname(file) === '.py') {
    const at = lines.findIndex((l) => new RegExp(`^\\s*def ${escaped}\\(`).test(l));
    if (at < 0) return null;
    let end = at + 1;
    while (end < lines.length && (lines[end].trim() === '' || indentOf(lines[end]) > indentOf(lines[at]))) end += 1;
    while (end > at + 1 && lines[end - 1].trim() === '') end -= 1;
    return dedent(lines.slice(leadingComments(lines, at, '#'), end).filter((l) => !MARKER.test(l)));
  }
  // A definition: the name followed by "(", on a line that is not a call or a declaration.
  const head = new RegExp(`(^|[\\s*&:])${escaped}\\(`);
  for (let at = 0; at < lines.length; at += 1) {
    if (!head.test(lines[at]) || /^\s*(\/\/|return\b)/.test(lines[at])) continue;
    if (!/^\s*[A-Za-z_~]/.test(lines[at]) || /=\s*[^=]*\(/.test(lines[at].split(name)[0])) continue;
    // Find the body's opening brace before any ';' (a declaration ends at ';').
    let depth = 0, opened = false, end = -1;
    for (let i = at; i < lines.length && end < 0; i += 1) {
      const code = lines[i].replace(/\/\/.*$/, '').replace(/"(\\.|[^"\\])*"/g, '""').replace(/'(\\.|[^'\\])*'/g, "''");
      for (const ch of code) {
        if (!opened && ch === ';') break;
        if (ch === '{') { depth += 1; opened = true; }
        if (ch === '}') { depth -= 1; if (opened && depth === 0) { end = i; break; } }
      }
      if (!opened && code.includes(';')) break;
    }
    if (end < 0) continue;
    return dedent(lines.slice(leadingComments(lines, at, '//'), end + 1).filter((l) => !MARKER.test(l)));
  }
  return null;
}

// Step banners "// ---- Step N: ..." (or "# ---- Step N"): from step `from`'s banner to the line
// before the first banner of a later step than `to`, or to the end of the enclosing block.
export function cutSteps(text, from, to) {
  const lines = text.split('\n');
  const at = lines.findIndex((l) => Number(STEP_BANNER.exec(l)?.[1]) === from);
  if (at < 0) return null;
  const indent = indentOf(lines[at]);
  let end = at + 1;
  for (; end < lines.length; end += 1) {
    const step = STEP_BANNER.exec(lines[end]);
    if (step && Number(step[1]) > to) break;
    if (lines[end].trim() !== '' && indentOf(lines[end]) < indent) break;
  }
  while (end > at + 1 && lines[end - 1].trim() === '') end -= 1;
  return dedent(lines.slice(at, end).filter((l) => !MARKER.test(l)));
}

// What an include names in a file: a marker region, a function() or step:N[-M].
function cut(text, file, regionsOf, name) {
  const step = /^step:(\d+)(?:-(\d+))?$/.exec(name);
  if (step) return cutSteps(text, Number(step[1]), Number(step[2] ?? step[1]));
  if (name.endsWith('()')) return cutFunction(text, file, name.slice(0, -2));
  return regionsOf().get(name) ?? null;
}

function language(file) {
  if (basename(file) === 'CMakeLists.txt') return 'cmake';
  return { '.cpp': 'cpp', '.h': 'cpp', '.cu': 'cpp', '.py': 'python', '.sh': 'bash', '.json': 'json' }[extname(file)] ?? '';
}

// The deck with every include line replaced. `root` is the repository; `used` (optional) collects
// "file#region" for every region the deck shows.
export function expandIncludes(deckText, deckName, root, used = new Set()) {
  const cache = new Map();
  return deckText
    .split('\n')
    .map((line, i) => {
      const m = INCLUDE.exec(line.trim());
      if (!m) {
        if (/<!--\s*include:/.test(line)) throw new RegionError(`${deckName}:${i + 1}: malformed include (write <!-- include: path/to/file#region -->)`);
        return line;
      }
      const [, file, name] = m;
      if (!cache.has(file)) {
        let text;
        try {
          text = readFileSync(join(root, file), 'utf8');
        } catch {
          throw new RegionError(`${deckName}:${i + 1}: includes ${file}, which does not exist`);
        }
        cache.set(file, { text, regions: parseRegions(text, file) });
      }
      const { text, regions } = cache.get(file);
      const region = cut(text, file, () => regions, name);
      if (!region) {
        if (name.endsWith('()')) throw new RegionError(`${deckName}:${i + 1}: ${file} defines no function ${name}`);
        if (name.startsWith('step:')) throw new RegionError(`${deckName}:${i + 1}: ${file} has no "---- Step" banner for ${name}`);
        throw new RegionError(`${deckName}:${i + 1}: ${file} has no region '${name}' (mark it with --8<-- [start:${name}] and --8<-- [end:${name}], or include a function() or a step:N)`);
      }
      used.add(`${file}#${name}`);
      // A Markdown region keeps its text, less its one-line HTML comments (the README's test
      // markers), which Marp would otherwise show as speaker notes.
      if (extname(file) === '.md') return region.filter((l) => !/^\s*<!--.*-->\s*$/.test(l)).join('\n');
      return ['```' + language(file), ...region, '```'].join('\n');
    })
    .join('\n');
}
