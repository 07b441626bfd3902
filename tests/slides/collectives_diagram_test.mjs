#!/usr/bin/env node
// Chapter 04's collectives diagram (collectives.svg, slides/tools/diagrams.mjs) draws what chapter
// 04's program does: for each collective it draws, the buffers it shows after the call on each of
// 3 ranks are the values the program prints for that call on that rank, and a rank it draws
// without a result prints none. It also draws no more and no fewer collectives than it names.
//
//   node tests/slides/collectives_diagram_test.mjs BIN_DIR      exit 0 pass, 1 fail
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const WORLD = 3;
let failures = 0;

function expect(what, ok, detail) {
  process.stdout.write(`${ok ? 'ok  ' : 'FAIL'} ${what}\n`);
  if (!ok) {
    failures += 1;
    process.stdout.write(String(detail).replace(/^/gm, '     | ') + '\n');
  }
}

const bin = process.argv[2];
if (!bin) {
  process.stderr.write('usage: collectives_diagram_test.mjs BIN_DIR\n');
  process.exit(2);
}
const { collectiveSteps, collectivesDiagram } = await import(join(ROOT, 'slides', 'tools', 'diagrams.mjs'));

const run = spawnSync(join(bin, 'ddprun'), ['--standalone', '--nproc-per-node', String(WORLD), join(bin, 'ch04_all_reduce')], { encoding: 'utf8', timeout: 120000 });
expect(`chapter 04 runs on ${WORLD} ranks`, run.status === 0, (run.stdout ?? '') + (run.stderr ?? ''));

// "[rank 1/3] all_gather:      [tensor([1, 2, 3]), tensor([4, 5, 6])]  (...)" -> rank 1, "all_gather",
// [[1, 2, 3], [4, 5, 6]]: the tensors of the line, each as its list of values.
const printed = new Map();  // "name rank" -> tensors
for (const m of (run.stdout ?? '').matchAll(/^\[rank (\d+)\/\d+\] ([A-Za-z_]+):\s+(.*)$/gm)) {
  const tensors = [...m[3].matchAll(/tensor\(\[([^\]]*)\]/g)].map((t) => t[1].split(',').map((v) => Number(v.trim())));
  printed.set(`${m[2]} ${m[1]}`, tensors);
}

const steps = collectiveSteps(WORLD);
for (const step of steps) {
  for (let r = 0; r < WORLD; ++r) {
    const drawn = step.after[r] && step.after[r].map((tensor) => tensor.map((cell) => cell.value));
    const got = printed.get(`${step.name} ${r}`);
    if (drawn === null) {
      expect(`${step.name}: rank ${r} is drawn without a result and prints none`, got === undefined, JSON.stringify(got));
    } else {
      expect(`${step.name}: rank ${r} is drawn with ${JSON.stringify(drawn)}, as printed`, JSON.stringify(got) === JSON.stringify(drawn), `printed: ${JSON.stringify(got)}`);
    }
  }
  // What every rank starts with is post C's tensor, as the program prints it ("tensor:").
  for (let r = 0; r < WORLD; ++r) {
    const start = step.before[r]?.flat().filter((cell) => cell.from.length === 1 && cell.from[0] === r).map((cell) => cell.value);
    if (start && start.length === WORLD) {
      expect(`${step.name}: rank ${r} starts, as drawn, from the tensor it prints`, JSON.stringify([start]) === JSON.stringify(printed.get(`tensor ${r}`)), `printed: ${JSON.stringify(printed.get(`tensor ${r}`))}`);
    }
  }
}
const svg = collectivesDiagram(WORLD);
const panels = [...svg.matchAll(/font-weight='bold' fill='#1d2433' font-family='DejaVu Sans Mono, monospace'>([a-z_]+)\(/g)].map((m) => m[1]);
expect(`collectives.svg has one panel per collective (${panels.join(', ')})`, panels.length === steps.length, panels.join(', '));

process.stdout.write(failures ? `${failures} check(s) failed\n` : 'collectives.svg draws what chapter 04 does\n');
process.exit(failures ? 1 : 0);
