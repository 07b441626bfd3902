#!/usr/bin/env node
// The slides' tests (CTest label `slides`).
//
//   node tests/slides/slides_test.mjs includes           the decks' includes all resolve; and a missing
//                                                        region, a missing file and unbalanced markers
//                                                        (tests/slides/bad_decks/includes) are caught
//   node tests/slides/slides_test.mjs bad-render OUT     a slide too tall, a code line too wide and a
//                                                        broken image (tests/slides/bad_decks/render)
//                                                        are caught, and the slides that fit are not named;
//                                                        so is a cheat sheet longer than one page
//                                                        (tests/slides/bad_decks/cheatsheet)
//   node tests/slides/slides_test.mjs render OUT         every deck builds to HTML and PDF, and every
//                                                        slide fits in headless Chromium
//   node tests/slides/slides_test.mjs diagrams BIN_DIR   the diagrams show what the code does: the
//                                                        ring's moves are chapter 04's (run at 3 ranks),
//                                                        the sampler's indices are torch's
//                                                        DistributedSampler's, the buckets' times are
//                                                        the trace in chapter 09's README, chapter 12's
//                                                        stages hold and send what a real step does
//                                                        (sharding_facts), in the library's order
// The bad decks are there because a check that cannot fail is no test.
// Exit status: 0 pass, 1 fail, 77 no Marp (npm ci --prefix slides) or no browser (chromium).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BAD = join(ROOT, 'tests', 'slides', 'bad_decks');
let failures = 0;

function run(script, args) {
  const r = spawnSync(process.execPath, [join(ROOT, 'slides', 'tools', script), ...args], { encoding: 'utf8', timeout: 240000 });
  return { code: r.status, out: (r.stdout ?? '') + (r.stderr ?? '') };
}

function expect(what, ok, output) {
  process.stdout.write(`${ok ? 'ok  ' : 'FAIL'} ${what}\n`);
  if (!ok) {
    failures += 1;
    process.stdout.write(output.replace(/^/gm, '     | ') + '\n');
  }
}

const mode = process.argv[2];
if (mode === 'includes') {
  const decks = join(BAD, 'includes');
  const cases = [
    ['missing_region', /missing_region\.md:7: chapters\/04_all_reduce\/main\.cpp has no region 'no_such_region'/],
    ['missing_file', /missing_file\.md:7: includes chapters\/04_all_reduce\/no_such_file\.cpp, which does not exist/],
    ['unbalanced', /tests\/slides\/bad_decks\/unbalanced\.cpp:2: region 'opened' never ends/],
    ['missing_function', /missing_function\.md:7: chapters\/04_all_reduce\/main\.cpp defines no function no_such_function\(\)/],
    ['missing_step', /missing_step\.md:7: chapters\/04_all_reduce\/main\.cpp has no "---- Step" banner for step:99/],
  ];
  for (const [deck, message] of cases) {
    const r = run('build.mjs', ['--check', '--no-lint', '--decks', decks, '--only', deck]);
    expect(`${deck}: the build fails (exit ${r.code}) and names the problem`, r.code === 1 && message.test(r.out), r.out);
  }
  // The cuts that need no markers: a function (its comments, not a declaration of it, a brace in
  // a string kept) and a step banner's lines, each exactly.
  const { cutFunction, cutSteps } = await import('../../slides/tools/regions.mjs');
  const cpp = readFileSync(join(ROOT, 'tests', 'slides', 'fixtures', 'cuts.cpp'), 'utf8');
  const py = readFileSync(join(ROOT, 'tests', 'slides', 'fixtures', 'cuts.py'), 'utf8');
  const cuts = [
    ['twice()', cutFunction(cpp, 'cuts.cpp', 'twice'), ['// Doubles x.', '// Two comment lines travel with it.', 'int twice(int x) {', '  const std::string brace = "}";  // a brace in a string does not end the body', '  return 2 * x;', '}']],
    ['Counter::add()', cutFunction(cpp, 'cuts.cpp', 'Counter::add'), ['// Adds `by` and says what it holds now.', 'int Counter::add(int by) {', '  n += by;', '  return n;', '}']],
    ['half() in Python', cutFunction(py, 'cuts.py', 'half'), ['# Halves x.', 'def half(x):', '    if x % 2:', '        return x / 2', '', '    return x // 2']],
    ['step:1', cutSteps(cpp, 1, 1), ['// ---- Step 1: count to three', 'c.add(1);', 'c.add(2);']],
    ['step:2-3', cutSteps(cpp, 2, 3), ['// ---- Step 2: double it', 'const int d = twice(c.n);', '', '// ---- Step 3: done', 'return d == 6 ? 0 : 1;']],
    ['no such function', cutFunction(cpp, 'cuts.cpp', 'thrice'), null],
    ['no such step', cutSteps(cpp, 4, 4), null],
  ];
  for (const [what, got, want] of cuts) {
    expect(`the cut ${what} gives its lines`, JSON.stringify(got) === JSON.stringify(want), `got:\n${JSON.stringify(got, null, 1)}\nwant:\n${JSON.stringify(want, null, 1)}`);
  }
  // A cheat sheet with a slide break would print on two pages: the build refuses it.
  const twoPages = run('build.mjs', ['--check', '--cheatsheet', join(BAD, 'cheatsheet', 'two_pages.md')]);
  expect(`a cheat sheet with '---' is refused (exit ${twoPages.code})`, twoPages.code === 1 && /two_pages\.md:5: '---' would start a second page/.test(twoPages.out), twoPages.out);
  // And the real decks pass the same check, so the failures above are the bad decks' own.
  const good = run('build.mjs', ['--check']);
  expect(`slides/decks: every include is found (exit ${good.code})`, good.code === 0, good.out);
} else if (mode === 'render' || mode === 'bad-render') {
  const out = process.argv[3];
  if (!out) {
    process.stderr.write(`usage: slides_test.mjs ${mode} OUT_DIR\n`);
    process.exit(2);
  }
  if (!existsSync(join(ROOT, 'slides', 'node_modules', '@marp-team', 'marp-cli'))) {
    process.stdout.write('skipped: Marp is not installed (npm ci --prefix slides; ./tutorial test does it)\n');
    process.exit(77);
  }
  if (!existsSync(process.env.CHROME_PATH || '/usr/bin/chromium')) {
    process.stdout.write('skipped: no browser (apt-get install chromium; ./tutorial test does it)\n');
    process.exit(77);
  }
  if (mode === 'render') {
    const built = run('build.mjs', ['--out', out]);
    expect(`every deck builds to HTML and PDF (exit ${built.code})`, built.code === 0, built.out);
    const r = run('check.mjs', [out]);
    expect(`every slide fits and every image loads (exit ${r.code})`, r.code === 0, r.out);
    process.stdout.write(r.out);
    process.exit(failures ? 1 : 0);
  }
  const built = run('build.mjs', ['--no-lint', '--no-pdf', '--decks', join(BAD, 'render'), '--out', out]);
  expect(`the bad deck builds (exit ${built.code})`, built.code === 0, built.out);
  const r = run('check.mjs', [out, '--no-pdf']);
  expect(`the check fails (exit ${r.code})`, r.code === 1, r.out);
  expect('slide 2 is reported too tall', /bad slide 2: content is \d+px taller than the slide/.test(r.out), r.out);
  expect('slide 3 is reported too wide', /bad slide 3: <pre> "const int a_very_long_name.*" is \d+px wider than its box/.test(r.out), r.out);
  expect('the missing image is reported', /bad: image does not load: \S*diagrams\/no_such_diagram\.svg/.test(r.out), r.out);
  expect('slides 1 and 5, which fit, are not reported', !/bad slide [15]:/.test(r.out) && !/sampler\.svg/.test(r.out), r.out);
  expect('a screenshot of every slide is written', [1, 2, 3, 4, 5].every((n) => existsSync(join(out, 'screenshots', 'bad', `0${n}.png`))), r.out);
  // A cheat sheet too long for its one page.
  const sheetOut = `${out}_cheatsheet`;
  const sheet = run('build.mjs', ['--only', 'cheatsheet', '--cheatsheet', join(BAD, 'cheatsheet', 'too_long.md'), '--out', sheetOut]);
  expect(`the too-long cheat sheet builds (exit ${sheet.code})`, sheet.code === 0, sheet.out);
  const c = run('check.mjs', [sheetOut]);
  expect(`its check fails (exit ${c.code})`, c.code === 1, c.out);
  expect('its page is reported too tall', /cheatsheet slide 1: content is \d+px taller than the slide/.test(c.out), c.out);
} else if (mode === 'diagrams') {
  const bin = process.argv[3];
  if (!bin) {
    process.stderr.write('usage: slides_test.mjs diagrams BIN_DIR\n');
    process.exit(2);
  }
  const { ringSchedule, samplerIndices, CH09_TRACE } = await import('../../slides/tools/diagrams.mjs');
  // The ring: rank 0 of chapter 04 prints every step's moves, "0->1 c0 | 1->2 c1 | 2->0 c2".
  const ch04 = spawnSync(join(bin, 'ddprun'), ['--standalone', '--nproc-per-node', '3', join(bin, 'ch04_all_reduce')], { encoding: 'utf8', timeout: 60000 });
  const printed = [...(ch04.stdout ?? '').matchAll(/(reduce-scatter|all-gather) +step (\d+): (.*)$/gm)].map((m) => `${m[1]} ${m[2]}: ${m[3].trim()}`);
  const drawn = ringSchedule(3).slice(1).map((step) => `${step.name}: ${step.moves.map((m) => `${m.from}->${m.to} c${m.chunk}`).join(' | ')}`);
  expect(`ring_all_reduce.svg moves the chunks chapter 04 moves at 3 ranks (${printed.length} steps)`, ch04.status === 0 && printed.length === 4 && JSON.stringify(printed) === JSON.stringify(drawn), `chapter 04 printed:\n${printed.join('\n')}\nthe diagram draws:\n${drawn.join('\n')}\n${ch04.stderr ?? ''}`);
  // The sampler: torch.utils.data.DistributedSampler, shuffle off, with and without drop_last.
  const torch = spawnSync('/usr/bin/python3', ['-c', [
    'import json, torch.utils.data as d',
    'print(json.dumps({str(dl): [list(d.DistributedSampler(range(10), num_replicas=4, rank=r, shuffle=False, drop_last=dl)) for r in range(4)] for dl in (False, True)}))',
  ].join('\n')], { encoding: 'utf8', timeout: 120000 });
  if (torch.status !== 0) expect('torch computes the sampler indices', false, torch.stderr ?? '');
  else {
    const ref = JSON.parse(torch.stdout);
    for (const dropLast of [false, true]) {
      const ours = samplerIndices(10, 4, dropLast).ranks;
      expect(`sampler.svg (drop_last=${dropLast}) gives each rank torch's indices: ${JSON.stringify(ours)}`, JSON.stringify(ours) === JSON.stringify(ref[dropLast ? 'True' : 'False']), `torch: ${JSON.stringify(ref)}`);
    }
  }
  // The buckets: every interval the diagram draws is in chapter 09's README timeline.
  const readme = readFileSync(join(ROOT, 'chapters', '09_ddp_classifier', 'README.md'), 'utf8');
  const missing = [...CH09_TRACE.main, ...CH09_TRACE.ddp].filter(([, a, b]) => !readme.includes(`${a}-${b}`));
  expect("ddp_buckets.svg draws the intervals of chapter 09's README timeline", missing.length === 0, `not in the README: ${JSON.stringify(missing)}`);
  // Chapter 12: sharding_stages.svg's bytes are what the library holds between two steps
  // (ShardedDataParallel::memory(), and its closed form expected_memory), what dist::Adam's state
  // takes, and what one step sends (bytes_sent(), and expected_bytes_sent), in a real step of each
  // stage (sharding_facts); sharding_timeline.svg's order is the one the communication group
  // received (the flight recorder), on 4 units of distinct chunk sizes.
  const { CH12_UNITS, shardedMemory, shardedBytesSent, stage3Schedule } = await import('../../slides/tools/diagrams.mjs');
  const facts = (world, units) => {
    const r = spawnSync(join(bin, 'ddprun'), ['--standalone', '--nproc-per-node', String(world), join(bin, 'sharding_facts'), ...units.map(String)], { encoding: 'utf8', timeout: 120000 });
    const lines = (r.stdout ?? '').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    const ok = r.status === 0 && lines.length === 5;
    expect(`sharding_facts runs one step of each stage on ${world} ranks (units ${units.join(', ')})`, ok, (r.stdout ?? '') + (r.stderr ?? ''));
    return ok ? lines : [];
  };
  const fields = ['parameters', 'gradients', 'shards', 'shard_gradients'];
  for (const [world, units] of [[4, CH12_UNITS], [3, CH12_UNITS], [1, CH12_UNITS], [2, [41, 24, 15, 6]]]) {
    for (const fact of facts(world, units)) {
      const drawn = shardedMemory(fact.stage, units, world);
      const where = `stage ${fact.stage}${fact.stage === 3 ? `, prefetch ${fact.prefetch ? 'on' : 'off'}` : ''}, W = ${world}`;
      expect(`sharding_stages.svg's Adam state at ${where} is dist::Adam's (${drawn.optimizer_state} bytes)`, drawn.optimizer_state === fact.adam_state, `the library's Adam holds ${fact.adam_state}`);
      if (fact.stage === 0) continue;
      const held = Object.fromEntries(fields.map((f) => [f, drawn[f]]));
      const measured = Object.fromEntries(fields.map((f) => [f, fact.memory[f]]));
      const closed = Object.fromEntries(fields.map((f) => [f, fact.expected_memory[f]]));
      expect(`sharding_stages.svg holds, at ${where}, what memory() and expected_memory say`, JSON.stringify(held) === JSON.stringify(measured) && JSON.stringify(held) === JSON.stringify(closed) && fact.memory.in_flight === 0, `drawn ${JSON.stringify(held)}\nmemory() ${JSON.stringify(fact.memory)}\nexpected_memory ${JSON.stringify(fact.expected_memory)}`);
      const sends = shardedBytesSent(fact.stage, units, world);
      expect(`sharding_stages.svg sends, at ${where}, what the step sent (${sends} bytes)`, sends === fact.bytes_sent && sends === fact.expected_bytes_sent, `sent ${fact.bytes_sent}, expected_bytes_sent ${fact.expected_bytes_sent}`);
      if (fact.stage === 3 && world === 2) {
        const order = stage3Schedule(units, world, { prefetch: fact.prefetch }).order;
        expect(`sharding_timeline.svg's order (${where}) is the library's: ${order.join(' ')}`, JSON.stringify(order) === JSON.stringify(fact.order), `the communication group received ${fact.order.join(' ')}`);
      }
    }
  }
} else {
  process.stderr.write('usage: slides_test.mjs includes | bad-render OUT_DIR | render OUT_DIR | diagrams BIN_DIR\n');
  process.exit(2);
}
process.exit(failures ? 1 : 0);
