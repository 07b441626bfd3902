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
// in that file (any comment style: the marker is found anywhere on its line). A region from a
// Markdown file is pasted as it is, less its one-line HTML comments (it may hold its own fenced
// block, such as a README's checked expected output); from any other file it becomes a fenced code block in that file's language.
// A deck that names a missing file or region, or a file whose markers do not pair up, fails the
// build with the deck's line number, so a slide cannot drift from the code it shows.
import { readFileSync } from 'node:fs';
import { extname, basename, join } from 'node:path';

const MARKER = /--8<-- \[(start|end):([A-Za-z0-9_.-]+)\]/;
const INCLUDE = /^<!--\s*include:\s*([^#\s]+)#([A-Za-z0-9_.-]+)\s*-->\s*$/;

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
        cache.set(file, parseRegions(text, file));
      }
      const region = cache.get(file).get(name);
      if (!region) {
        throw new RegionError(`${deckName}:${i + 1}: ${file} has no region '${name}' (mark it with --8<-- [start:${name}] and --8<-- [end:${name}])`);
      }
      used.add(`${file}#${name}`);
      // A Markdown region keeps its text, less its one-line HTML comments (the README's test
      // markers), which Marp would otherwise show as speaker notes.
      if (extname(file) === '.md') return region.filter((l) => !/^\s*<!--.*-->\s*$/.test(l)).join('\n');
      return ['```' + language(file), ...region, '```'].join('\n');
    })
    .join('\n');
}
