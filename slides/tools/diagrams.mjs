// The decks' diagrams, drawn as SVG from the same rules the code follows, so a picture cannot
// show a schedule the code does not run:
//   ring_all_reduce.svg    chapter 04's ring_all_reduce on 3 ranks, step by step
//   collectives.svg        chapter 04's collectives on 3 ranks: each rank's buffers before and after
//   rank_local_rank.svg    post B's machines A and B: RANK, LOCAL_RANK, WORLD_SIZE
//   sampler.svg            DistributedSampler's padding and striding, and drop_last
//   ddp_buckets.svg        chapter 09's gradient buckets, overlapping backward
//   sharding_stages.svg    chapter 12's stages: what each rank keeps, and what it sends per step
//   sharding_timeline.svg  chapter 12's stage 3: the gathers and reduce_scatters of one step
// Each function returns the SVG text; build.mjs writes them next to the HTML decks.

const FONT = "font-family='DejaVu Sans, sans-serif'";
const MONO = "font-family='DejaVu Sans Mono, monospace'";
// One colour per rank, used by every diagram (and matching the decks' theme).
export const RANK_COLOURS = ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1'];
const INK = '#1d2433';
const MUTED = '#6b7280';

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const svg = (w, h, body, title) =>
  `<svg xmlns='http://www.w3.org/2000/svg' width='${w}' height='${h}' viewBox='0 0 ${w} ${h}' role='img'>` +
  `<title>${esc(title)}</title>` +
  `<defs><marker id='arrow' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' markerHeight='7' orient='auto-start-reverse'>` +
  `<path d='M0,0 L10,5 L0,10 z' fill='${INK}'/></marker>` +
  `<pattern id='hatch' width='8' height='8' patternUnits='userSpaceOnUse' patternTransform='rotate(45)'>` +
  `<rect width='8' height='8' fill='#ffffff'/><line x1='0' y1='0' x2='0' y2='8' stroke='#9ca3af' stroke-width='4'/></pattern></defs>` +
  `<rect width='${w}' height='${h}' fill='#ffffff'/>${body}</svg>\n`;
const text = (x, y, s, { size = 16, anchor = 'start', weight = 'normal', fill = INK, mono = false } = {}) =>
  `<text x='${x}' y='${y}' font-size='${size}' text-anchor='${anchor}' font-weight='${weight}' fill='${fill}' ${mono ? MONO : FONT}>${esc(s)}</text>`;
const rect = (x, y, w, h, { fill = '#ffffff', stroke = INK, width = 1.5, rx = 4 } = {}) =>
  `<rect x='${x}' y='${y}' width='${w}' height='${h}' rx='${rx}' fill='${fill}' stroke='${stroke}' stroke-width='${width}'/>`;

// The ring schedule of chapter 04 (ring_all_reduce and draw_ring in main.cpp): in reduce-scatter
// step s rank r sends chunk (r - s) mod W and adds the chunk (r - s - 1) mod W it receives; in
// all-gather step s it sends chunk (r + 1 - s) mod W and stores the chunk (r - s) mod W.
export function ringSchedule(world) {
  const mod = (c) => ((c % world) + world) % world;
  // held[r][c]: the set of ranks whose chunk c is summed into rank r's chunk c
  let held = Array.from({ length: world }, (_, r) => Array.from({ length: world }, () => new Set([r])));
  const steps = [{ name: 'start', held, moves: [] }];
  for (const phase of ['reduce-scatter', 'all-gather']) {
    for (let s = 0; s < world - 1; ++s) {
      const next = held.map((chunks) => chunks.map((set) => new Set(set)));
      const moves = [];
      for (let r = 0; r < world; ++r) {
        const right = mod(r + 1);
        const c = phase === 'reduce-scatter' ? mod(r - s) : mod(r + 1 - s);
        moves.push({ from: r, to: right, chunk: c });
        if (phase === 'reduce-scatter') for (const x of held[r][c]) next[right][c].add(x);
        else next[right][c] = new Set(held[r][c]);
      }
      held = next;
      steps.push({ name: `${phase} ${s + 1}`, held, moves });
    }
  }
  return steps;
}

export function ringAllReduce(world = 3) {
  const steps = ringSchedule(world);
  const cell = 80, gap = 26, labelW = 192, rowH = 78, top = 64;
  const groupW = world * cell;
  const width = labelW + world * groupW + (world - 1) * gap + 262;
  const height = top + steps.length * rowH + 30;
  let body = text(16, 30, `Ring all-reduce (SUM) on ${world} ranks: the tensor is cut in ${world} chunks c0..c${world - 1}`, { size: 20, weight: 'bold' });
  for (let r = 0; r < world; ++r) {
    body += text(labelW + r * (groupW + gap) + groupW / 2, top - 10, `rank ${r}`, { anchor: 'middle', weight: 'bold', fill: RANK_COLOURS[r] });
  }
  steps.forEach((step, i) => {
    const y = top + i * rowH;
    body += text(16, y + 36, step.name, { size: 17, weight: i === 0 ? 'normal' : 'bold' });
    const touched = new Set(step.moves.map((m) => `${m.to}:${m.chunk}`));
    for (let r = 0; r < world; ++r) {
      for (let c = 0; c < world; ++c) {
        const x = labelW + r * (groupW + gap) + c * cell;
        const set = [...step.held[r][c]].sort();
        const full = set.length === world;
        const fill = full ? '#d1fae5' : set.length > 1 ? '#fef3c7' : '#f3f4f6';
        const hot = touched.has(`${r}:${c}`);
        body += rect(x + 3, y + 8, cell - 6, rowH - 22, { fill, stroke: hot ? '#dc2626' : '#9ca3af', width: hot ? 3 : 1.2 });
        body += text(x + cell / 2, y + 29, `c${c}`, { size: 14, anchor: 'middle', fill: MUTED });
        body += text(x + cell / 2, y + 50, full ? 'Σ all' : set.map((s) => `r${s}`).join('+'), { size: 16, anchor: 'middle', weight: full ? 'bold' : 'normal', mono: true });
      }
    }
    if (step.moves.length) {
      const moves = step.moves.map((m) => `${m.from}→${m.to} c${m.chunk}`).join(' | ');
      body += text(labelW + world * groupW + (world - 1) * gap + 16, y + 42, moves, { size: 16, mono: true });
    }
  });
  body += text(16, height - 10, `red border: the chunk that arrived in this step · each rank sends 2(W−1) = ${2 * (world - 1)} chunks of 1/W of the tensor`, { size: 14, fill: MUTED });
  return svg(width, height, body, `ring all-reduce on ${world} ranks`);
}

// Chapter 04's collectives, by the rules its main.cpp checks them against: rank r starts with post
// C's tensor t_r = [1 + W r, ..., W + W r]; each entry below is one collective, with every rank's
// buffers before and after the call. A buffer is a list of tensors (one tensor, or the list a
// call takes or fills), a tensor a list of cells {value, from}: `from` is the set of ranks whose
// values were combined into it. null: the rank has no such buffer (gather's non-roots get no list,
// scatter's non-roots give none).
export function postCTensor(rank, world) {
  return Array.from({ length: world }, (_, i) => ({ value: i + 1 + world * rank, from: [rank] }));
}

export function collectiveSteps(world) {
  const ranks = [...Array(world).keys()];
  const t = (r) => postCTensor(r, world);
  const all = ranks.map(t);
  const sum = ranks.map((i) => ({ value: ranks.reduce((s, r) => s + i + 1 + world * r, 0), from: ranks }));
  const mine = ranks.map((r) => [t(r)]);
  return [
    { name: 'broadcast', call: 'broadcast(t, src=0)', says: "every rank ends with rank 0's tensor",
      before: mine, after: ranks.map(() => [t(0)]) },
    { name: 'SUM', call: 'all_reduce(t, SUM)', says: 'every rank ends with the element-wise sum',
      before: mine, after: ranks.map(() => [sum]) },
    { name: 'reduce_scatter', call: 'reduce_scatter(out, pieces, SUM)', says: 'rank r ends with the sum of every rank\'s piece r',
      before: ranks.map((r) => t(r).map((cell) => [cell])), after: ranks.map((r) => [[sum[r]]]) },
    { name: 'all_gather', call: 'all_gather(list, t)', says: "every rank ends with every rank's tensor",
      before: mine, after: ranks.map(() => all) },
    { name: 'gather', call: 'gather(t, list, dst=0)', says: "rank 0 ends with every rank's tensor",
      before: mine, after: ranks.map((r) => (r === 0 ? all : null)) },
    { name: 'scatter', call: 'scatter(out, list, src=0)', says: "rank r ends with item r of rank 0's list",
      before: ranks.map((r) => (r === 0 ? all : null)), after: mine },
  ];
}

export function collectivesDiagram(world = 3) {
  const steps = collectiveSteps(world);
  const cell = 34, cellH = 28, listGap = 8, rowH = 36, labelW = 74, arrowW = 54;
  const panelW = 580, panelH = 64 + world * rowH + 12, gapX = 24, gapY = 14, top = 46;
  const width = 2 * panelW + gapX + 32, height = top + 3 * (panelH + gapY) + 22;
  const bufferWidth = (buffer) => (buffer ? buffer.reduce((w, tensor) => w + tensor.length * cell, 0) + (buffer.length - 1) * listGap : 0);
  const drawBuffer = (x, y, buffer, noneText) => {
    if (!buffer) return text(x, y + 19, noneText, { size: 13, fill: MUTED });
    let out = '', at = x;
    for (const tensor of buffer) {
      for (const { value, from } of tensor) {
        const summed = from.length > 1;
        out += rect(at + 1, y, cell - 2, cellH, { fill: summed ? '#d1fae5' : '#ffffff', stroke: summed ? '#059669' : RANK_COLOURS[from[0]], width: 2, rx: 3 });
        out += text(at + cell / 2, y + 19, value, { size: 14, anchor: 'middle', weight: 'bold', mono: true, fill: summed ? INK : RANK_COLOURS[from[0]] });
        at += cell;
      }
      at += listGap;
    }
    return out;
  };
  let body = text(16, 30, `Chapter 04's collectives on ${world} ranks: rank r starts with t_r = [1 + ${world}r, ..., ${world} + ${world}r]`, { size: 20, weight: 'bold' });
  steps.forEach((step, k) => {
    const px = 16 + (k % 2) * (panelW + gapX), py = top + Math.floor(k / 2) * (panelH + gapY);
    const beforeW = Math.max(...step.before.map(bufferWidth), 3 * cell);
    const ax = px + labelW + beforeW + 10;
    body += rect(px, py, panelW, panelH, { fill: '#f9fafb', stroke: '#d1d5db', width: 1.2, rx: 8 });
    body += text(px + 12, py + 24, step.call, { size: 16, weight: 'bold', mono: true });
    body += text(px + 12, py + 44, step.says, { size: 13, fill: MUTED });
    body += text(px + labelW, py + 60, 'before', { size: 12, fill: MUTED });
    body += text(ax + arrowW, py + 60, 'after', { size: 12, fill: MUTED });
    for (let r = 0; r < world; ++r) {
      const y = py + 66 + r * rowH;
      body += text(px + 12, y + 19, `rank ${r}`, { size: 14, weight: 'bold', fill: RANK_COLOURS[r] });
      body += drawBuffer(px + labelW, y, step.before[r], step.name === 'scatter' ? 'gives no list' : '');
      body += `<line x1='${ax}' y1='${y + cellH / 2}' x2='${ax + arrowW - 14}' y2='${y + cellH / 2}' stroke='${INK}' stroke-width='1.5' marker-end='url(#arrow)'/>`;
      body += drawBuffer(ax + arrowW, y, step.after[r], 'gets no list');
    }
  });
  body += text(16, height - 8, "a cell's colour: the rank its value came from · green: summed over every rank · the lists are what the call takes or fills", { size: 13, fill: MUTED });
  return svg(width, height, body, `chapter 04's collectives on ${world} ranks`);
}

// Post B: 4 ranks, 2 on machine A and 2 on machine B. GROUP_RANK is the machine's index
// (ddprun --node-rank), LOCAL_WORLD_SIZE its number of ranks (--nproc-per-node).
export function rankLocalRank() {
  const width = 1100, height = 430;
  let body = text(20, 32, 'WORLD_SIZE = 4: two machines, two ranks on each', { size: 22, weight: 'bold' });
  const machines = [
    { name: 'machine A', node: 0, addr: '10.0.0.1 (MASTER_ADDR)' },
    { name: 'machine B', node: 1, addr: '10.0.0.2' },
  ];
  machines.forEach((m, i) => {
    const x = 20 + i * 540, y = 60;
    body += rect(x, y, 510, 300, { fill: '#f9fafb', stroke: INK, width: 2, rx: 10 });
    body += text(x + 20, y + 34, `${m.name}  ·  GROUP_RANK ${m.node}`, { size: 20, weight: 'bold' });
    body += text(x + 20, y + 60, m.addr, { size: 15, fill: MUTED, mono: true });
    for (let local = 0; local < 2; ++local) {
      const rank = m.node * 2 + local;
      const px = x + 20 + local * 245, py = y + 84;
      body += rect(px, py, 225, 190, { fill: '#ffffff', stroke: RANK_COLOURS[rank], width: 3, rx: 8 });
      body += text(px + 112, py + 36, `RANK ${rank}`, { size: 24, anchor: 'middle', weight: 'bold', fill: RANK_COLOURS[rank] });
      body += text(px + 112, py + 70, `LOCAL_RANK ${local}`, { size: 18, anchor: 'middle' });
      body += text(px + 112, py + 102, `GPU cuda:${local}`, { size: 16, anchor: 'middle', mono: true });
      body += text(px + 112, py + 140, 'data: shard ' + rank, { size: 15, anchor: 'middle', fill: MUTED });
      body += text(px + 112, py + 164, 'of the sampler', { size: 15, anchor: 'middle', fill: MUTED });
    }
  });
  body += text(20, 396, 'RANK = GROUP_RANK × LOCAL_WORLD_SIZE + LOCAL_RANK   (0..WORLD_SIZE−1, unique in the job)', { size: 17, mono: true });
  body += text(20, 422, 'LOCAL_RANK picks the GPU on this machine; RANK picks the data and who is "rank 0". Both machines have a LOCAL_RANK 0.', { size: 15, fill: MUTED });
  return svg(width, height, body, 'rank and local_rank on two machines');
}

// torch.utils.data.DistributedSampler without shuffling: indices padded to a multiple of W by
// repeating from the start (or cut, with drop_last), then rank r takes every W-th from r.
export function samplerIndices(n, world, dropLast) {
  const perRank = dropLast && n % world !== 0 ? Math.ceil((n - world) / world) : Math.ceil(n / world);
  const total = perRank * world;
  let indices = [...Array(n).keys()];
  if (!dropLast) while (indices.length < total) indices = indices.concat(indices.slice(0, total - indices.length));
  else indices = indices.slice(0, total);
  return { perRank, indices, ranks: Array.from({ length: world }, (_, r) => indices.filter((_, i) => i % world === r)) };
}

export function sampler(n = 10, world = 4) {
  const box = 52, width = 1120, height = 580;
  let body = text(20, 32, `DistributedSampler: ${n} samples, world_size ${world}, shuffle off`, { size: 22, weight: 'bold' });
  const drawRow = (y, label, cells) => {
    body += text(20, y + 33, label, { size: 16 });
    cells.forEach((c, i) => {
      const x = 250 + i * (box + 6);
      body += rect(x, y, box, box, { fill: c.pad ? 'url(#hatch)' : c.fill ?? '#ffffff', stroke: c.stroke ?? INK, width: c.stroke ? 3 : 1.5 });
      if (c.pad) body += rect(x + 14, y + 13, box - 28, box - 26, { fill: '#ffffff', stroke: 'none', width: 0, rx: 3 });
      body += text(x + box / 2, y + 33, c.label, { size: 18, anchor: 'middle', weight: 'bold', fill: c.dropped ? '#9ca3af' : INK, mono: true });
    });
  };
  const pad = samplerIndices(n, world, false);
  drawRow(60, 'dataset indices', [...Array(n).keys()].map((i) => ({ label: i })));
  drawRow(130, `padded to ${pad.indices.length}`, pad.indices.map((idx, i) => ({ label: idx, pad: i >= n, stroke: RANK_COLOURS[i % world] })));
  pad.ranks.forEach((mine, r) => {
    const y = 200 + r * 58;
    drawRow(y, `rank ${r}: [${r}::${world}]`, mine.map((idx, j) => ({ label: idx, pad: r + j * world >= n, stroke: RANK_COLOURS[r] })));
  });
  const drop = samplerIndices(n, world, true);
  const y = 200 + world * 58 + 20;
  drawRow(y, 'drop_last=True', [...Array(n).keys()].map((i) => ({ label: i, dropped: i >= drop.indices.length, fill: i >= drop.indices.length ? '#f3f4f6' : '#ffffff' })));
  body += text(250, y + 78, `padding repeats ${pad.indices.length - n} indices from the start (hatched): every rank gets ${pad.perRank}`, { size: 15, fill: MUTED });
  body += text(250, y + 100, `drop_last=True cuts the last ${n - drop.indices.length} instead (grey): every rank gets ${drop.perRank}`, { size: 15, fill: MUTED });
  return svg(width, height, body, 'DistributedSampler striding and padding');
}

// Chapter 09's model, Linear(196,128) → SyncBatchNorm → ReLU → Linear(128,10), with --bucket-mb
// 0.005: bucket 0 is fc2 (1,290 values), bucket 1 is bn's weight and bias and fc1's bias (384),
// bucket 2 is fc1's weight (25,088). The times (µs) are the step of a real trace that chapter
// 09's README shows (rank 0 of 2); the lower row is the same work without overlap.
export const CH09_TRACE = {
  main: [['fc2 + relu', 5904, 6057], ['bn (SyncBN all_reduce)', 6157, 9898], ['fc1', 9909, 12274]],
  ddp: [['bucket 0', 6081, 6675], ['bucket 1', 12496, 14437], ['bucket 2', 14486, 16154]],
};

export function ddpBuckets(trace = CH09_TRACE) {
  const width = 1160, height = 470, x0 = 190, t0 = trace.main[0][1];
  const unit = 880 / (trace.main.at(-1)[2] - t0 + trace.ddp.reduce((s, [, a, b]) => s + b - a, 0));
  const X = (t) => x0 + (t - t0) * unit;
  const fits = (label, w) => label.length * 8.2 + 8 <= w;  // 14px DejaVu Sans: about 8 px a letter
  let body = text(20, 32, "DDP's gradient buckets: all_reduce while backward goes on (chapter 09)", { size: 21, weight: 'bold' });
  const lane = (y, label, sub) => {
    body += text(20, y + 24, label, { size: 16, weight: 'bold' });
    body += text(20, y + 42, sub, { size: 13, fill: MUTED });
  };
  // A block of time; a label too long for it goes under it (a line lower if the previous label
  // there would overlap), so a short block stays readable.
  const compute = '#dbeafe', comm = '#fde68a';
  const labelEnd = new Map();  // lane y -> x where the last label under it ends
  const block = (y, a, b, label, fill) => {
    const w = (b - a) * unit, mid = (X(a) + X(b)) / 2;
    body += rect(X(a), y, w, 44, { fill, stroke: INK, width: 1.2 });
    if (fits(label, w)) body += text(mid, y + 28, label, { size: 14, anchor: 'middle' });
    else {
      const lower = (labelEnd.get(y) ?? -Infinity) + 8 > X(a);
      const ty = y + (lower ? 80 : 63);
      const ink = fill === comm ? '#92400e' : '#1e40af';  // the label takes its block's colour
      body += `<line x1='${mid}' y1='${y + 44}' x2='${mid}' y2='${y + 50}' stroke='${ink}' stroke-width='1.5'/>`;
      body += text(X(a) + (lower ? 4 : 0), ty, label, { size: 14, fill: ink, weight: 'bold' });
      labelEnd.set(y, X(a) + label.length * 8.2);
    }
  };
  body += text(x0, 64, 'overlap on (the default): one step of a real run, rank 0 of 2', { size: 16, weight: 'bold' });
  lane(78, 'main thread', 'backward');
  for (const [name, a, b] of trace.main) block(78, a, b, name, compute);
  lane(148, 'DDP thread', 'its own new_group()');
  for (const [name, a, b] of trace.ddp) block(148, a, b, name, comm);
  body += text(X(trace.ddp[0][2]) + 12, 177, "← bucket 0 starts as soon as fc2's gradients are ready", { size: 14, fill: MUTED });
  // Without overlap, each bucket is all-reduced on the main thread as soon as it is full
  // (DistributedDataParallel::launch_ready_buckets): bucket 0 right after fc2, buckets 1 and 2
  // after fc1, and backward waits for each.
  body += text(x0, 250, 'overlap off (--no-overlap): each bucket on the main thread, as soon as it is full', { size: 16, weight: 'bold' });
  lane(264, 'main thread', 'backward and buckets');
  const [[fc2, f0, f1], ...rest] = trace.main;
  const [[b0, b0s, b0e], ...laterBuckets] = trace.ddp;
  let t = f0;
  for (const [name, a, b] of [[fc2, f0, f1], [b0, b0s, b0e], ...rest, ...laterBuckets]) {
    block(264, t, t + b - a, name, trace.ddp.some(([n]) => n === name) ? comm : compute);
    t += b - a;
  }
  const end1 = X(trace.ddp.at(-1)[2]), end2 = X(t);
  body += `<line x1='${end1}' y1='70' x2='${end1}' y2='222' stroke='#059669' stroke-width='2' stroke-dasharray='6 4'/>`;
  body += `<line x1='${end2}' y1='256' x2='${end2}' y2='336' stroke='#dc2626' stroke-width='2' stroke-dasharray='6 4'/>`;
  body += text(end1 + 6, 220, 'done', { size: 14, fill: '#059669' });
  body += text(end2 - 6, 346, 'done later', { size: 14, anchor: 'end', fill: '#dc2626' });
  body += text(20, 400, 'Buckets fill from the last layer back, because backward produces its gradients first.', { size: 15 });
  body += text(20, 424, "Every rank starts bucket 0, 1, 2 in that order, so the collectives match. Bucket 1 holds fc1's bias,", { size: 15 });
  body += text(20, 448, 'so it waits for the end of backward: a bigger model has many buckets and hides most of its communication.', { size: 15 });
  return svg(width, height, body, 'DDP gradient buckets overlapping backward');
}

// Chapter 12's model, the MLP 196-512-512-512-10: one unit per Linear layer (its weight and bias),
// in forward order. Ψ = 631,306 values.
export const CH12_UNITS = [196 * 512 + 512, 512 * 512 + 512, 512 * 512 + 512, 512 * 10 + 10];

// What one rank holds between two steps, in bytes, by the rules of ShardedDataParallel's
// expected_memory (common/src/parallel/sharded.cpp): with c_u = ⌈n_u/W⌉, stages 1 and 2 keep the whole
// parameters (4Ψ), stage 1 the whole gradients too, and every stage keeps each unit's shard and
// its gradient (4Σc_u each: a copy beside the whole parameters, since dist::Tensor has no views).
// Stage 0 is DDP: everything whole. optimizer_state is dist::Adam's state_bytes() over what it
// steps: 8 bytes per value (exp_avg and exp_avg_sq), of the whole model at stage 0, of the shards
// (padding included) at stages 1 to 3.
export function shardedMemory(stage, unitNumels, world) {
  const psi = unitNumels.reduce((s, n) => s + n, 0);
  const chunks = unitNumels.reduce((s, n) => s + Math.ceil(n / world), 0);
  if (stage === 0) return { parameters: 4 * psi, gradients: 4 * psi, shards: 0, shard_gradients: 0, optimizer_state: 8 * psi };
  return {
    parameters: stage === 3 ? 0 : 4 * psi,
    gradients: stage === 1 ? 4 * psi : 0,
    shards: 4 * chunks,
    shard_gradients: 4 * chunks,
    optimizer_state: 8 * chunks,
  };
}

// Payload bytes one rank sends per step, by the rule of expected_bytes_sent (sharded.cpp): every
// unit reduce-scattered once and gathered once (stage 3: twice, for its forward and its
// backward), 4c_u(W − 1) bytes each time. Stage 0 is DDP's ring all_reduce of the gradients,
// 2Ψ(W − 1)/W values (when every bucket takes the ring), the same traffic as stages 1 and 2.
export function shardedBytesSent(stage, unitNumels, world) {
  if (stage === 0) return (8 * unitNumels.reduce((s, n) => s + n, 0) * (world - 1)) / world;
  const chunks = unitNumels.reduce((s, n) => s + Math.ceil(n / world), 0);
  return (stage === 3 ? 3 : 2) * 4 * chunks * (world - 1);
}

const mib = (bytes) => (bytes / 2 ** 20).toFixed(2);

export function shardingStages(units = CH12_UNITS, world = 4) {
  const psi = units.reduce((s, n) => s + n, 0);
  const width = 1250, top = 92, rowH = 122, x0 = 150, boxW = 152, gap = 12, full = 144;
  const height = top + 4 * rowH + 56;
  const grey = '#cbd5e1';
  const stages = [
    { name: 'stage 0 · DDP', says: 'every rank keeps everything', moves: 'all_reduce = reduce_scatter + all_gather' },
    { name: 'stage 1 · optimizer state sharded (ZeRO-1)', says: 'each rank steps its shard only', moves: 'reduce_scatter (finish_gradient_sync), all_gather (after_step)' },
    { name: 'stage 2 · gradients too (ZeRO-2)', says: 'a unit\'s gradient is reduce-scattered as its backward ends, then freed', moves: 'reduce_scatter per unit in backward, all_gather (after_step)' },
    { name: 'stage 3 · parameters too (FSDP, FULL_SHARD)', says: 'a unit is whole only while it computes', moves: 'all_gather twice (forward, backward) + reduce_scatter' },
  ];
  // The largest unit: the one drawn gathered at stage 3.
  const big = units.indexOf(Math.max(...units));
  let body = text(16, 30, `What each rank keeps, and sends per step: ${units.length} units, Ψ = ${psi.toLocaleString('en-US')} values, Adam, W = ${world}`, { size: 20, weight: 'bold' });
  body += text(16, 54, 'A unit (a layer\'s weight and bias) is cut in W chunks of c = ⌈n/W⌉ values; rank r owns chunk r of every unit: its shard.', { size: 14, fill: MUTED });
  for (let r = 0; r < world; ++r) {
    body += text(x0 + r * (boxW + gap) + boxW / 2, top - 10, `rank ${r}`, { size: 15, anchor: 'middle', weight: 'bold', fill: RANK_COLOURS[r] });
  }
  body += text(x0 + world * (boxW + gap) + 12, top - 10, 'per rank', { size: 15, weight: 'bold' });
  // One bar: `bytesPerValue` scales it (Adam's state is twice as long as the parameters);
  // whole: the same everywhere (grey) or freed (dashed), and rank r's chunk of each unit on top.
  const bar = (x, y, bytesPerValue, r, { whole, shard, gathered = -1 }) => {
    const w = (full * bytesPerValue) / 8, h = 18;
    let out = whole
      ? rect(x, y, w, h, { fill: grey, stroke: '#94a3b8', width: 1, rx: 2 })
      : `<rect x='${x}' y='${y}' width='${w}' height='${h}' rx='2' fill='#ffffff' stroke='#94a3b8' stroke-width='1' stroke-dasharray='3 3'/>`;
    let at = 0;
    units.forEach((n, u) => {
      const ux = x + (at / psi) * w, uw = (n / psi) * w;
      if (u === gathered) out += rect(ux, y, uw, h, { fill: 'url(#hatch)', stroke: INK, width: 1, rx: 0 });
      if (shard) {
        const c = Math.ceil(n / world);
        const a = Math.min(r * c, n), b = Math.min((r + 1) * c, n);  // the padding is drawn nowhere
        out += rect(ux + (a / n) * uw, y, ((b - a) / n) * uw, h, { fill: RANK_COLOURS[r], stroke: 'none', width: 0, rx: 0 });
      }
      if (u > 0) out += `<line x1='${ux}' y1='${y - 2}' x2='${ux}' y2='${y + h + 2}' stroke='${INK}' stroke-width='1'/>`;
      at += n;
    });
    return out;
  };
  stages.forEach((stage, s) => {
    const y = top + s * rowH;
    const m = shardedMemory(s, units, world);
    const held = m.parameters + m.gradients + m.shards + m.shard_gradients + m.optimizer_state;
    body += `<line x1='16' y1='${y}' x2='${width - 16}' y2='${y}' stroke='#e5e7eb' stroke-width='1'/>`;
    body += text(16, y + 22, stage.name, { size: 16, weight: 'bold' });
    body += text(16 + stage.name.length * 9.6 + 14, y + 22, stage.says, { size: 14, fill: MUTED });
    const rows = [['parameters', 4], ['gradients', 4], ['Adam m, v', 8]];
    rows.forEach(([label, bpv], k) => {
      const by = y + 34 + k * 27;
      body += text(x0 - 10, by + 14, label, { size: 13, anchor: 'end', fill: MUTED });
      for (let r = 0; r < world; ++r) {
        const bx = x0 + r * (boxW + gap) + 4;
        const kind = k === 0 ? { whole: s < 3, shard: s > 0, gathered: s === 3 ? big : -1 }
          : k === 1 ? { whole: s < 2, shard: s > 0 }
            : { whole: s === 0, shard: s > 0 };
        body += bar(bx, by, bpv, r, kind);
      }
    });
    const tx = x0 + world * (boxW + gap) + 12;
    body += text(tx, y + 48, `holds ${mib(held)} MiB`, { size: 16, weight: 'bold' });
    const parts = s === 0
      ? `params ${mib(m.parameters)} · grads ${mib(m.gradients)} · Adam ${mib(m.optimizer_state)}`
      : `params ${s < 3 ? `${mib(m.parameters)} + ` : ''}${mib(m.shards)} · grads ${s === 1 ? `${mib(m.gradients)} + ` : ''}${mib(m.shard_gradients)} · Adam ${mib(m.optimizer_state)}`;
    body += text(tx, y + 68, parts, { size: 13, fill: MUTED });
    body += text(tx, y + 94, `sends ${mib(shardedBytesSent(s, units, world))} MiB per step`, { size: 16, weight: 'bold' });
    body += text(tx, y + 113, stage.moves, { size: 13, fill: MUTED });
    if (s === 3) body += text(tx + 150, y + 48, `+ ${mib(4 * units[big])} MiB while unit ${big} is whole`, { size: 13, fill: MUTED });
  });
  const fy = top + 4 * rowH + 22;
  body += text(16, fy, `grey: whole, the same on every rank · colour: this rank's chunk of each unit · dashed: freed · hatched: unit ${big} gathered (stage 3, from before_forward/backward to after)`, { size: 13, fill: MUTED });
  body += text(16, fy + 22, 'MiB at rest between steps: ShardedDataParallel::expected_memory (the shards are copies at stages 1, 2), Adam 8 bytes a value; sends: expected_bytes_sent', { size: 13, fill: MUTED });
  return svg(width, height, body, `what each sharding stage keeps and sends, W = ${world}`);
}

// Stage 3's step as common/src/parallel/sharded.cpp runs it, call by call: the main thread's calls (the
// loop of dist/sharded.h) and the collectives they put, in that order, on the communication
// group's one thread (FIFO). before_forward(u) waits for unit u's gather (starting it if no
// prefetch did) and, with prefetch, starts unit u + 1's; after_forward(u) frees the unit;
// before_backward(u) gathers u again and prefetches u − 1; after_backward(u) starts u's
// reduce_scatter and frees the unit; finish_gradient_sync() waits for every reduce_scatter.
// Durations are a model, not a measurement: a unit's forward takes n_u, its backward 2n_u, a
// collective the c_u(W − 1) values each rank sends, Adam's step Σc_u / 4 (arbitrary units).
export function stage3Schedule(units, world, { prefetch = true } = {}) {
  const chunk = units.map((n) => Math.ceil(n / world));
  const main = [], comm = [], calls = [];
  const gather = new Map();  // u -> its gather on the communication thread, while in flight
  const whole = units.map(() => false);
  let t = 0, commFree = 0;
  const enqueue = (name, u) => {
    const a = Math.max(t, commFree), b = a + chunk[u] * (world - 1);
    const op = { name, unit: u, a, b };
    comm.push(op);
    commFree = b;
    return op;
  };
  const startGather = (u) => {
    if (!whole[u] && !gather.has(u)) gather.set(u, enqueue(`AG${u}`, u));
  };
  const waitFor = (end, what) => {
    if (end > t) main.push({ name: `wait ${what}`, kind: 'wait', a: t, b: end });
    t = Math.max(t, end);
  };
  const finishGather = (u) => {
    if (whole[u]) return;
    startGather(u);
    waitFor(gather.get(u).b, `AG${u}`);
    gather.delete(u);
    whole[u] = true;
  };
  const compute = (name, length) => {
    main.push({ name, kind: 'compute', a: t, b: t + length });
    t += length;
  };
  for (let u = 0; u < units.length; ++u) {
    calls.push(`before_forward(${u})`);
    finishGather(u);
    if (prefetch && u + 1 < units.length) startGather(u + 1);
    compute(`F${u}`, units[u]);
    calls.push(`after_forward(${u})`);
    whole[u] = false;
  }
  for (let u = units.length - 1; u >= 0; --u) {
    calls.push(`before_backward(${u})`);
    finishGather(u);
    if (prefetch && u > 0) startGather(u - 1);
    compute(`B${u}`, 2 * units[u]);
    calls.push(`after_backward(${u})`);
    enqueue(`RS${u}`, u);
    whole[u] = false;
  }
  calls.push('finish_gradient_sync()');
  waitFor(Math.max(...comm.filter((op) => op.name.startsWith('RS')).map((op) => op.b)), 'RS');
  calls.push('optimizer.step()');
  compute('step', chunk.reduce((s, c) => s + c, 0) / 4);
  calls.push('after_step()');
  return { main, comm, calls, order: comm.map((op) => op.name), end: t };
}

// Drawn with 4 equal units, so that every block is readable: the order is the same for any sizes
// (chapter 12's last unit is 2% of the model, a sliver at this scale).
export function shardingTimeline(units = [1000, 1000, 1000, 1000], world = 4) {
  const on = stage3Schedule(units, world, { prefetch: true });
  const off = stage3Schedule(units, world, { prefetch: false });
  const width = 1250, x0 = 210, span = width - x0 - 30;
  const height = 470;
  const scale = span / Math.max(on.end, off.end);
  const X = (t) => x0 + t * scale;
  const computeFill = '#dbeafe', commFill = '#fde68a';
  let body = text(16, 30, `Stage 3, one step of ${units.length} equal units: the gathers and reduce_scatters on the communication thread (W = ${world})`, { size: 20, weight: 'bold' });
  body += text(16, 54, 'The order is sharded.cpp\'s; the lengths are a model (forward n, backward 2n, a collective the n(W − 1)/W values it sends), not a measurement.', { size: 14, fill: MUTED });
  const lane = (y, label, sub) => {
    body += text(16, y + 22, label, { size: 15, weight: 'bold' });
    body += text(16, y + 40, sub, { size: 12, fill: MUTED });
  };
  const block = (y, { name, kind, a, b }, fill) => {
    if (kind === 'wait') {
      body += `<rect x='${X(a)}' y='${y + 14}' width='${(b - a) * scale}' height='16' fill='url(#hatch)' stroke='#9ca3af' stroke-width='1'/>`;
      return;
    }
    body += rect(X(a), y, (b - a) * scale, 44, { fill, stroke: INK, width: 1.2, rx: 3 });
    if ((b - a) * scale >= name.length * 9 + 4) body += text((X(a) + X(b)) / 2, y + 28, name, { size: 14, anchor: 'middle', mono: true });
  };
  const panel = (y, title, run) => {
    body += text(x0, y, title, { size: 16, weight: 'bold' });
    lane(y + 10, 'main thread', 'forward, backward, step');
    for (const e of run.main) block(y + 10, e, computeFill);
    lane(y + 70, 'comm thread', 'its own new_group(), FIFO');
    for (const op of run.comm) block(y + 70, op, commFill);
    body += `<line x1='${X(run.end)}' y1='${y + 4}' x2='${X(run.end)}' y2='${y + 122}' stroke='#059669' stroke-width='2' stroke-dasharray='6 4'/>`;
    body += text(X(run.end) - 6, y + 136, 'step done', { size: 13, anchor: 'end', fill: '#059669' });
    body += text(x0, y + 152, `comm order: ${run.order.join(' ')}`, { size: 13, mono: true, fill: MUTED });
  };
  panel(86, 'prefetch on (the default): unit u + 1 is gathered while u computes', on);
  panel(262, 'prefetch off (--no-prefetch): each unit is gathered when it is needed', off);
  body += text(16, height - 34, 'F/B: a unit\'s forward/backward · AGu: all_gather of unit u · RSu: reduce_scatter of its gradient · hatched: the main thread waits', { size: 13, fill: MUTED });
  body += text(16, height - 12, `Backward gathers every unit again (3 passes of Ψ(W − 1)/W values). before_backward(u) enqueues AG(u − 1) before after_backward(u) enqueues RS(u).`, { size: 13, fill: MUTED });
  return svg(width, height, body, `stage 3 timeline, prefetch on and off, W = ${world}`);
}

export const DIAGRAMS = {
  'ring_all_reduce.svg': () => ringAllReduce(3),
  'collectives.svg': () => collectivesDiagram(3),
  'rank_local_rank.svg': rankLocalRank,
  'sampler.svg': () => sampler(10, 4),
  'ddp_buckets.svg': ddpBuckets,
  'sharding_stages.svg': () => shardingStages(CH12_UNITS, 4),
  'sharding_timeline.svg': () => shardingTimeline([1000, 1000, 1000, 1000], 4),
};
