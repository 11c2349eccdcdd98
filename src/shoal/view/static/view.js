// The page of shoal's live view: it receives a run's frames and loads as float32 arrays over a
// WebSocket (or fetches a finished run's) and draws them itself on canvases (Vertanen §6: send
// floats, let the client draw). No build step and no dependencies: plain DOM and canvas.
//
// Stable element ids (tests and users' scripts rely on them):
//   frame-canvas  the physics frame            frame-step   the step of the frame shown (text)
//   heatmap       load per node and step       loads-steps  load rows received (text)
//   error         the last error (one line)    status       what the viewer is doing (one line)
//   scenario      scenario select              param-<key>  one input per parameter (TOML text)
//   start, stop   start / stop a run           layer, colour-by, contours, scale, rescale
//   runs, open, live, scrub, play, frame-pick, export-gif, export-mp4   playback
//   probe         a followed particle's path / a probed point's value over time
//   step-time, lif, tiles, migrated            the rest of the load panel
//   traces        an app's time series (a seismic app's seismograms), when its frames have some

const TOKEN = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);

// ----- messages (layout: shoal/view/protocol.py) ----------------------------------------------------
const TYPED = {f4: Float32Array, i4: Int32Array, u1: Uint8Array};

/** A message's header and its arrays ({data: typed view, shape}), without copying the bytes. */
export function decode(buffer) {
  const length = new DataView(buffer).getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, length)));
  const arrays = {};
  for (const spec of header.arrays) {
    const count = spec.shape.reduce((a, b) => a * b, 1);
    arrays[spec.name] = {data: new TYPED[spec.dtype](buffer, spec.offset, count), shape: spec.shape};
  }
  return {header, arrays};
}

// ----- requests: every one carries the token -------------------------------------------------------
async function api(path, options = {}) {
  const response = await fetch(path, {...options, headers: {"X-Shoal-Token": TOKEN, ...(options.headers || {})}});
  if (!response.ok) throw new Error((await response.text()).trim() || `${response.status} ${response.statusText}`);
  return response;
}
const postJSON = (path, body) => api(path, {method: "POST", headers: {"Content-Type": "application/json"},
                                           body: JSON.stringify(body)});
function showError(message) { $("error").textContent = message || ""; }
async function guarded(action) {
  try { await action(); } catch (err) { showError(err.message); }
}
function download(blob, name) {
  const a = Object.assign(document.createElement("a"), {href: URL.createObjectURL(blob), download: name});
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

// ----- colours ---------------------------------------------------------------------------------------
// Viridis sampled at nine points, interpolated to 256 (perceptually ordered, readable in grey).
const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 73, 137], [49, 104, 142], [38, 130, 142],
                 [31, 158, 137], [53, 183, 121], [110, 206, 88], [253, 231, 37]];
// Red-blue (blue below zero, white at zero, red above) for signed fields: a wavefield, a surface.
const RDBU = [[5, 48, 97], [33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240], [247, 247, 247],
              [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43], [103, 0, 31]];
const sampled = (anchors) => Array.from({length: 256}, (_, k) => {
  const t = k / 255 * (anchors.length - 1), i = Math.min(Math.floor(t), anchors.length - 2), f = t - i;
  return anchors[i].map((c, m) => Math.round(c + f * (anchors[i + 1][m] - c)));
});
const LUT = sampled(VIRIDIS), DIVERGING = sampled(RDBU);
const css = (lut) => lut.map(([r, g, b]) => `rgb(${r},${g},${b})`);
const LUT_CSS = css(LUT), DIVERGING_CSS = css(DIVERGING);
const NODE_COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
                      "#ff9da7", "#9c755f", "#bab0ac"];
const lutIndex = (v, [lo, hi]) => Math.max(0, Math.min(255, Math.round((v - lo) / ((hi - lo) || 1) * 255)));
const fmt = (v) => (v === null || v === undefined || !isFinite(v)) ? "–"
  : (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-2 && v !== 0)) ? v.toExponential(2) : String(+v.toPrecision(3));

/** [min, max] of the finite values where mask (optional) is true; null when there are none. */
function finiteRange(values, mask) {
  let lo = Infinity, hi = -Infinity;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if ((mask && !mask(i)) || !Number.isFinite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return lo <= hi ? [lo, hi] : null;
}

// A signed field (a wavefield, a surface) is coloured symmetrically about 0 up to a high percentile
// of its magnitude, not its largest value, which a few cells at a source would set (as the report
// does: shoal/report/drawing.py, ROBUST_PERCENTILE).
export const ROBUST_PERCENTILE = 99.5;

/** The bound m of the colour scale [-m, m] of a signed field: the ROBUST_PERCENTILE-th percentile of
 *  |values| (finite ones; linear between neighbours, as NumPy's default); the largest magnitude when
 *  that is 0; 1 for a field at rest. */
export function robustBound(values) {
  const a = Float64Array.from(Array.prototype.filter.call(values, Number.isFinite), Math.abs).sort();
  if (!a.length) return 1;
  const at = ROBUST_PERCENTILE / 100 * (a.length - 1), lo = Math.floor(at), hi = Math.min(lo + 1, a.length - 1);
  const top = a[lo] + (a[hi] - a[lo]) * (at - lo);
  return (top > 0 ? top : a[a.length - 1]) || 1;
}

// ----- state ----------------------------------------------------------------------------------------
// A source is what the panels draw: the live run, or a finished run opened for playback.
const newSource = () => ({hello: null, frame: null, rows: [], stepTime: [], lif: [], first: 0,
                          placements: [], ended: null, recent: [], ranges: {}});
let live = newSource();
let playback = null;            // {name, frames: [steps], k, ...newSource()}
let mode = "live";
let follow = null;              // {id, steps: [], x: [], y: []}
let probe = null;               // {grid, i, j, steps: [], values: []}
let drawn = null;               // how the frame canvas maps to the frame: for clicks
const RECENT = 30;              // live frames kept so a click can show a trail / probe of the past
const source = () => mode === "live" ? live : playback;

/** Fold a frame's value ranges into its source's ranges of the run (colour scale "run so far"); a
 *  signed grid's is the largest of its frames' robust bounds, symmetric. */
function foldRanges(src, msg) {
  const {header: h, arrays: a} = msg;
  const fluid = a.kind ? (i) => a.kind.data[i] === 0 : null;
  const keys = h.colourings.map((c) => [`point:${c.name}`, fluid]).concat(h.grids.map((g) => [`grid:${g.name}`, null]));
  const signed = new Set(h.grids.filter((g) => g.signed).map((g) => `grid:${g.name}`));
  for (const [key, mask] of keys) {
    let r = a[key] && finiteRange(a[key].data, mask);
    if (!r) continue;
    if (signed.has(key)) { const m = robustBound(a[key].data); r = [-m, m]; }
    const old = src.ranges[key];
    src.ranges[key] = old ? [Math.min(old[0], r[0]), Math.max(old[1], r[1])] : r;
  }
}

function colourRange(key, values, mask, signed = false) {
  const src = source();
  if ($("scale").value === "run" && src.ranges[key]) return src.ranges[key];
  if (signed) { const m = robustBound(values); return [-m, m]; }
  return finiteRange(values, mask) || [0, 1];
}

// ----- the physics frame -----------------------------------------------------------------------------
/** A map from a world box to the canvas, y up, with equal scales when `equal`. */
function transform(canvas, [x0, x1, y0, y1], equal) {
  const pad = 8, w = canvas.width - 2 * pad, h = canvas.height - 2 * pad;
  let sx = w / ((x1 - x0) || 1), sy = h / ((y1 - y0) || 1);
  if (equal) sx = sy = Math.min(sx, sy);
  const ox = pad + (w - sx * (x1 - x0)) / 2, oy = pad + (h - sy * (y1 - y0)) / 2;
  return {box: [x0, x1, y0, y1], px: (x, y) => [ox + (x - x0) * sx, oy + (y1 - y) * sy],
          world: (px, py) => [x0 + (px - ox) / sx, y1 - (py - oy) / sy], sx, sy};
}

function updateSelect(select, names) {
  const keep = select.value;
  if ([...select.options].map((o) => o.value).join("\n") !== names.join("\n")) {
    select.replaceChildren(...names.map((n) => new Option(n, n)));
  }
  if (names.includes(keep)) select.value = keep;
}

function drawFrame() {
  const canvas = $("frame-canvas"), ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const src = source(), msg = src && src.frame;
  drawn = null;
  if (!msg) { $("frame-step").textContent = "–"; return; }
  const h = msg.header;
  $("frame-step").textContent = String(h.step);
  $("frame-time").textContent = `t = ${fmt(h.time)} s` + (h.points ? ` · ${h.kept} of ${h.points} particles` : "");
  updateSelect($("layer"), (msg.arrays.x ? ["particles"] : []).concat(h.grids.map((g) => g.name)));
  updateSelect($("colour-by"), h.colourings.map((c) => c.name));
  $("colour-by").disabled = $("layer").value !== "particles";
  if ($("layer").value === "particles") drawParticles(canvas, ctx, src, msg);
  else if ($("layer").value) drawGrid(canvas, ctx, src, msg, $("layer").value);
}

function drawParticles(canvas, ctx, src, msg) {
  const {header: h, arrays: a} = msg, x = a.x.data, n = a.x.shape[0], kind = a.kind && a.kind.data;
  const name = $("colour-by").value, values = a[`point:${name}`] && a[`point:${name}`].data;
  const fluid = kind ? (i) => kind[i] === 0 : null;
  // A box that only grows keeps the picture still while particles move (the run's extent when known).
  const extent = src.hello && src.hello.run.extent;
  if (!extent) {
    const b = src.box || [Infinity, -Infinity, Infinity, -Infinity];
    for (let i = 0; i < n; i++) {
      b[0] = Math.min(b[0], x[2 * i]); b[1] = Math.max(b[1], x[2 * i]);
      b[2] = Math.min(b[2], x[2 * i + 1]); b[3] = Math.max(b[3], x[2 * i + 1]);
    }
    src.box = b;
  }
  const tr = transform(canvas, extent || src.box, true);
  // A mesh's edges (a cloth's triangles) under its vertices, when every vertex came.
  const tri = a["extra:triangles"];
  if (tri && h.kept === h.points) {
    const t = tri.data;
    ctx.strokeStyle = "rgba(70, 70, 70, 0.45)"; ctx.lineWidth = 0.6; ctx.beginPath();
    for (let k = 0; k + 2 < t.length; k += 3) {
      const [ax, ay] = tr.px(x[2 * t[k]], x[2 * t[k] + 1]), [bx, by] = tr.px(x[2 * t[k + 1]], x[2 * t[k + 1] + 1]);
      const [cx, cy] = tr.px(x[2 * t[k + 2]], x[2 * t[k + 2] + 1]);
      ctx.moveTo(ax, ay); ctx.lineTo(bx, by); ctx.lineTo(cx, cy); ctx.closePath();
    }
    ctx.stroke();
  }
  const range = values ? colourRange(`point:${name}`, values, fluid) : [0, 1];
  const [bx0, bx1] = [tr.px(tr.box[0], 0)[0], tr.px(tr.box[1], 0)[0]];
  const size = Math.max(1, Math.min(5, Math.round(0.9 * (bx1 - bx0) / Math.sqrt(Math.max(n, 1)))));
  // One fillStyle per colour: points grouped by their colour index (256 = boundary grey).
  const buckets = Array.from({length: 257}, () => []);
  for (let i = 0; i < n; i++) buckets[fluid && !fluid(i) ? 256 : values ? lutIndex(values[i], range) : 128].push(i);
  buckets.forEach((idx, b) => {
    ctx.fillStyle = b === 256 ? "#9a9a9a" : LUT_CSS[b];
    for (const i of idx) {
      const [px, py] = tr.px(x[2 * i], x[2 * i + 1]);
      ctx.fillRect(px - size / 2, py - size / 2, size, size);
    }
  });
  if (follow) drawTrail(ctx, tr, a);
  colourBar(range, values ? `${name} (${h.colourings.find((c) => c.name === name).unit})` : "");
  drawn = {kind: "particles", tr, msg};
}

function drawTrail(ctx, tr, a) {
  ctx.strokeStyle = "#e4002b"; ctx.lineWidth = 1.5;
  ctx.beginPath();
  follow.x.forEach((xv, k) => { const [px, py] = tr.px(xv, follow.y[k]); k ? ctx.lineTo(px, py) : ctx.moveTo(px, py); });
  ctx.stroke();
  const i = a.id.data.indexOf(follow.id);
  if (i >= 0) {
    const [px, py] = tr.px(a.x.data[2 * i], a.x.data[2 * i + 1]);
    ctx.beginPath(); ctx.arc(px, py, 6, 0, 2 * Math.PI); ctx.stroke();
  }
}

/** The world box a grid covers: the run's extent for an x-y field when known, else its cells. */
function gridBox(src, g, nx, ny) {
  const extent = src.hello && src.hello.run.extent;
  return extent && g.axis !== "y" ? extent : [0, nx, 0, ny];
}

function drawGrid(canvas, ctx, src, msg, name) {
  const g = msg.header.grids.find((q) => q.name === name), arr = msg.arrays[`grid:${name}`];
  const [nx, ny] = arr.shape, data = arr.data;
  let range = colourRange(`grid:${name}`, data, null, g.signed);
  if (g.signed) { const m = Math.max(Math.abs(range[0]), Math.abs(range[1])) || 1; range = [-m, m]; }  // white at 0
  const lut = g.signed ? DIVERGING : LUT;
  // The field as an image, [i_x, j_y] with j up (down for a depth axis: the app's layout says);
  // NaN (dry or outside) stays transparent.
  const row = (j) => g.down ? j : ny - 1 - j;
  const image = new ImageData(nx, ny);
  for (let i = 0; i < nx; i++) {
    for (let j = 0; j < ny; j++) {
      const v = data[i * ny + j];
      if (!Number.isFinite(v)) continue;
      const [r, gr, b] = lut[lutIndex(v, range)], o = (row(j) * nx + i) * 4;
      image.data[o] = r; image.data[o + 1] = gr; image.data[o + 2] = b; image.data[o + 3] = 255;
    }
  }
  const off = Object.assign(document.createElement("canvas"), {width: nx, height: ny});
  off.getContext("2d").putImageData(image, 0, 0);
  const box = gridBox(src, g, nx, ny), tr = transform(canvas, box, true);
  const [px0, py0] = tr.px(box[0], box[3]), [px1, py1] = tr.px(box[1], box[2]);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, px0, py0, px1 - px0, py1 - py0);
  if ($("contours").checked) {
    // Cell centres in pixels: cell (i, j) spans [i, i+1] x [j, j+1] of the grid's box.
    const cx = (i) => px0 + (i + 0.5) * (px1 - px0) / nx, cy = (j) => py0 + (row(j) + 0.5) * (py1 - py0) / ny;
    ctx.strokeStyle = g.signed ? "rgba(40,40,40,0.5)" : "rgba(255,255,255,0.7)"; ctx.lineWidth = 1;
    ctx.beginPath();
    for (let k = 1; k <= 6; k++) {
      for (const [a, b, c, d] of contour(data, nx, ny, range[0] + k / 7 * (range[1] - range[0]))) {
        ctx.moveTo(cx(a), cy(b)); ctx.lineTo(cx(c), cy(d));
      }
    }
    ctx.stroke();
  }
  // A depth section (the app's layout says "down") of a layered medium: its interfaces, dotted.
  const tops = msg.arrays["extra:interfaces"], meta = msg.header.meta;
  if (g.down && tops && meta.spacing && meta.stride) {
    ctx.strokeStyle = "rgba(30,30,30,0.8)"; ctx.lineWidth = 1; ctx.setLineDash([2, 3]);
    ctx.beginPath();
    for (const depth of tops.data) {
      const y = py0 + (depth / (meta.spacing * meta.stride * g.stride) + 0.5) * (py1 - py0) / ny;
      ctx.moveTo(px0, y); ctx.lineTo(px1, y);
    }
    ctx.stroke(); ctx.setLineDash([]);
  }
  if (probe && probe.grid === name) {
    ctx.strokeStyle = "#e4002b"; ctx.lineWidth = 2;
    const [qx, qy] = [px0 + (probe.i + 0.5) * (px1 - px0) / nx, py0 + (row(probe.j) + 0.5) * (py1 - py0) / ny];
    ctx.beginPath(); ctx.arc(qx, qy, 6, 0, 2 * Math.PI); ctx.stroke();
  }
  colourBar(range, name, g.signed ? DIVERGING_CSS : LUT_CSS, g.signed);
  drawn = {kind: "grid", tr, msg, grid: g, nx, ny, box};
}

/** Marching squares: segments [i0, j0, i1, j1] (fractional cell indices) where the field crosses `level`. */
function contour(data, nx, ny, level) {
  const segments = [];
  for (let i = 0; i < nx - 1; i++) {
    for (let j = 0; j < ny - 1; j++) {
      // Corners counter-clockwise from (i, j); the crossings along the four edges in that order.
      const corners = [[i, j], [i + 1, j], [i + 1, j + 1], [i, j + 1]];
      const v = corners.map(([p, q]) => data[p * ny + q]);
      if (v.some((w) => !Number.isFinite(w))) continue;
      const points = [];
      for (let e = 0; e < 4; e++) {
        const a = v[e], b = v[(e + 1) % 4];
        if ((a < level) === (b < level)) continue;
        const t = (level - a) / (b - a), [p0, q0] = corners[e], [p1, q1] = corners[(e + 1) % 4];
        points.push([p0 + t * (p1 - p0), q0 + t * (q1 - q0)]);
      }
      // Two crossings: one segment; four (a saddle): pair neighbouring edges.
      for (let s = 0; s + 1 < points.length; s += 2) segments.push([...points[s], ...points[s + 1]]);
    }
  }
  return segments;
}

function colourBar([lo, hi], label, colours = LUT_CSS, robust = false) {
  const canvas = $("colourbar"), ctx = canvas.getContext("2d");
  colours.forEach((c, k) => { ctx.fillStyle = c; ctx.fillRect(k * canvas.width / 256, 0, canvas.width / 256 + 1, canvas.height); });
  $("range-lo").textContent = fmt(lo);
  $("range-hi").textContent = fmt(hi);
  const what = robust ? `±${ROBUST_PERCENTILE}th percentile of |value|` : "range";
  $("range-name").textContent = `${label} · ${$("scale").value === "run" ? `run's ${what}` : `frame's ${what}`}`;
}

// ----- small plots ---------------------------------------------------------------------------------
function linePlot(canvas, xs, ys, colour, marker) {
  const ctx = canvas.getContext("2d"), w = canvas.width, h = canvas.height;
  ctx.clearRect(0, 0, w, h);
  const ry = finiteRange(ys), rx = finiteRange(xs);
  if (!ry || !rx) return;
  const pad = 14, X = (x) => 40 + (x - rx[0]) / ((rx[1] - rx[0]) || 1) * (w - 48);
  const Y = (y) => h - pad - (y - ry[0]) / ((ry[1] - ry[0]) || 1) * (h - 2 * pad);
  ctx.fillStyle = "#555"; ctx.font = "10px sans-serif";
  ctx.fillText(fmt(ry[1]), 2, pad); ctx.fillText(fmt(ry[0]), 2, h - pad);
  ctx.fillText(String(rx[0]), 40, h - 2); ctx.fillText(String(rx[1]), w - 40, h - 2);
  ctx.strokeStyle = colour; ctx.lineWidth = 1.5;
  ctx.beginPath();
  xs.forEach((x, k) => { if (Number.isFinite(ys[k])) k ? ctx.lineTo(X(x), Y(ys[k])) : ctx.moveTo(X(x), Y(ys[k])); });
  ctx.stroke();
  if (marker !== undefined) { ctx.strokeStyle = "#e4002b"; ctx.beginPath(); ctx.moveTo(X(marker), 0); ctx.lineTo(X(marker), h); ctx.stroke(); }
}

function drawProbe() {
  const canvas = $("probe");
  if (probe) {
    $("probe-title").textContent = `${probe.grid} at cell (${probe.i * probe.stride}, ${probe.j * probe.stride}) over steps`;
    linePlot(canvas, probe.steps, probe.values, "#31688e");
  } else if (follow) {
    $("probe-title").textContent = `particle ${follow.id}: its path is drawn in red (${follow.steps.length} frames)`;
    canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
  } else {
    canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
  }
}

/** An app's time series (stations x times [x components]: the last component, the vertical one
 *  of a seismogram) as wiggles, one row per station, against the frame's 1D array of as many times,
 *  all on one amplitude scale so stations compare. */
function drawTraces() {
  const msg = source() && source().frame, canvas = $("traces"), ctx = canvas.getContext("2d");
  const name = msg && msg.header.traces && msg.header.traces[0], a = name && msg.arrays[`extra:${name}`];
  canvas.hidden = $("traces-title").hidden = !a;
  if (!a) return;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const [n, t] = a.shape, c = a.shape.length > 2 ? a.shape[2] : 1;
  const times = Object.entries(msg.arrays).find(([k, v]) => k.startsWith("extra:") && v.shape.length === 1 && v.shape[0] === t);
  const x = (k) => times ? times[1].data[k] : k, [x0, x1] = [x(0), x(Math.max(t - 1, 1))];
  let top = 0;
  for (let i = 0; i < a.data.length; i += c) top = Math.max(top, Math.abs(a.data[i + c - 1]) || 0);
  const pad = 6, rowH = (canvas.height - 2 * pad) / Math.max(n, 1), w = canvas.width - 2 * pad;
  ctx.strokeStyle = "#333"; ctx.lineWidth = 1;
  for (let s = 0; s < n; s++) {
    const mid = pad + (s + 0.5) * rowH;
    ctx.beginPath();
    for (let k = 0; k < t; k++) {
      const v = a.data[(s * t + k) * c + c - 1] / (top || 1);
      const px = pad + (x(k) - x0) / ((x1 - x0) || 1) * w, py = mid - 0.45 * rowH * v;
      k ? ctx.lineTo(px, py) : ctx.moveTo(px, py);
    }
    ctx.stroke();
  }
  $("traces-title").textContent = `${name}: ${n} stations, last component, up to t = ${fmt(x(t - 1))} s ` +
    `(one scale, ±${fmt(top)})`;
}

// ----- the load panel --------------------------------------------------------------------------------
function addLoads(src, msg) {
  const {header: h, arrays: a} = msg, [k, nodes] = a.load.shape;
  if (!src.rows.length) src.first = h.first;
  for (let r = 0; r < k; r++) {
    src.rows.push(a.load.data.slice(r * nodes, (r + 1) * nodes));
    src.stepTime.push(a.step_time.data[r]);
    src.lif.push(a.lif.data[r]);
  }
}

function drawLoads() {
  const src = source();
  $("loads-steps").textContent = String(src ? src.rows.length : 0);
  const canvas = $("heatmap"), ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  if (!src || !src.rows.length) return;
  const run = src.hello && src.hello.run, nodes = src.rows[0].length;
  // Columns for the whole run from the start, so the map fills from left to right as it grows.
  const total = Math.max(src.rows.length, run ? run.steps - run.first_step : 0);
  const cols = Math.min(total, 1024), cells = new Float32Array(cols * nodes).fill(NaN);
  src.rows.forEach((row, r) => {
    const c = Math.floor(r * cols / total);
    row.forEach((v, n) => { const o = n * cols + c; cells[o] = Number.isNaN(cells[o]) ? v : Math.max(cells[o], v); });
  });
  const range = [0, finiteRange(cells)[1]], image = new ImageData(cols, nodes);
  cells.forEach((v, o) => {
    if (Number.isNaN(v)) return;
    const [r, g, b] = LUT[lutIndex(v, range)];
    image.data.set([r, g, b, 255], o * 4);
  });
  const off = Object.assign(document.createElement("canvas"), {width: cols, height: nodes});
  off.getContext("2d").putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, canvas.width, canvas.height);
  if (nodes <= 16) {
    ctx.fillStyle = "#fff"; ctx.font = "10px sans-serif";
    for (let n = 0; n < nodes; n++) ctx.fillText(`node ${n}`, 3, (n + 0.5) * canvas.height / nodes + 4);
  }
  const steps = src.rows.map((_, r) => src.first + r);
  const marker = mode === "playback" && src.frame ? src.frame.header.step : undefined;
  if (marker !== undefined) {
    ctx.fillStyle = "#e4002b";
    ctx.fillRect((marker - src.first) / total * canvas.width, 0, 1.5, canvas.height);
  }
  linePlot($("step-time"), steps, src.stepTime, "#4e79a7", marker);
  linePlot($("lif"), steps, src.lif, "#e15759", marker);
}

function drawTiles() {
  const src = source(), canvas = $("tiles"), ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const hello = src && src.hello;
  if (!hello || !src.placements.length) { $("migrated").textContent = ""; return; }
  // The placement the frame shown runs under (the latest one when live).
  const at = mode === "playback" && src.frame ? src.frame.header.step : Infinity;
  let p = 0;
  while (p + 1 < src.placements.length && src.placements[p + 1].step <= at) p++;
  const now = src.placements[p], before = p > 0 ? src.placements[p - 1] : null;
  $("migrated").textContent = `step ${now.step}: ${now.migrated} tiles migrated` + (now.reason ? ` (${now.reason})` : "")
    + (now.cores ? ` · cores per node ${now.cores.join(", ")}` : "");
  if (!hello.lo || !hello.lo.length) return;   // a run without a trace: the line above only
  const grid = hello.run.grid, tr = transform(canvas, [0, grid[0], 0, grid[1]], true);
  for (let t = 0; t < now.owner.length; t++) {
    const [x0, y1] = tr.px(hello.lo[2 * t], hello.hi[2 * t + 1]), [x1, y0] = tr.px(hello.hi[2 * t], hello.lo[2 * t + 1]);
    ctx.fillStyle = NODE_COLOURS[now.owner[t] % NODE_COLOURS.length];
    ctx.fillRect(x0, y1, x1 - x0, y0 - y1);
    const moved = before && before.owner[t] !== now.owner[t];
    ctx.strokeStyle = moved ? "#000" : "rgba(255,255,255,0.6)"; ctx.lineWidth = moved ? 2.5 : 0.5;
    ctx.strokeRect(x0 + 1, y1 + 1, x1 - x0 - 2, y0 - y1 - 2);
  }
}

// ----- drawing, at most once per animation frame -------------------------------------------------------
let pending = false;
function redraw() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    drawFrame(); drawTraces(); drawLoads(); drawTiles(); drawProbe(); showStatus();
    $("rescale").disabled = !(mode === "playback" || live.ended);
  });
}

// ----- the live feed -------------------------------------------------------------------------------
let viewer = {running: false, run: null, dropped: 0, runs: []};
let openedInitial = false;
function helloOf(msg) {
  const a = msg.arrays;
  return {...msg.header, lo: a.tile_lo && a.tile_lo.data, hi: a.tile_hi && a.tile_hi.data};
}

function onMessage(msg) {
  const h = msg.header;
  switch (h.type) {
    case "status":
      if (viewer.runs.join() !== (h.runs || []).join()) guarded(refreshRuns);
      viewer = {...viewer, ...h};
      if (h.error) showError(h.error);
      // A viewer opened on a run folder plays it back at once.
      if (h.playback && !openedInitial) { openedInitial = true; guarded(() => openRun(h.playback)); }
      break;
    case "hello":   // a run (re)starts: the viewer then sends all its loads and placements again
      live = newSource();
      live.hello = helloOf(msg);
      live.settings = h.settings;
      showRunParams(h.run.scenario, h.settings);
      if (mode === "live") { follow = probe = null; }
      break;
    case "frame":
      live.frame = msg;
      live.recent.push(msg);
      if (live.recent.length > RECENT) live.recent.shift();
      foldRanges(live, msg);
      if (mode === "live") extendPicks(msg);
      break;
    case "loads": addLoads(live, msg); break;
    case "placement":
      live.placements.push({...h, owner: msg.arrays.owner.data, cores: msg.arrays.cores && [...msg.arrays.cores.data]});
      break;
    case "end":
      live.ended = h;
      if (h.status === "failed") showError(h.message);
      guarded(refreshRuns);
      break;
  }
  redraw();
}

function showStatus() {
  let text;
  if (mode === "playback") {
    text = `playback of ${playback.name}: frame ${playback.k + 1} of ${playback.frames.length}` + (playing ? " (playing)" : "");
  } else if (live.ended) {
    text = `run ${live.ended.status} at step ${live.ended.step} · frames sent ${live.ended.sent}, dropped by the run ${live.ended.dropped}`;
  } else if (viewer.running && viewer.run) {
    const f = live.frame && live.frame.header;
    text = `running ${viewer.run.scenario}: step ${f ? f.step : "–"} of ${viewer.run.steps}` +
      (f ? ` · frames dropped by the run ${f.dropped}, by this page's link ${viewer.dropped}` : "");
  } else {
    text = "no run going: start one, or open a finished run below";
  }
  $("status").textContent = text;
}

function connect() {
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws?token=${encodeURIComponent(TOKEN)}`);
  ws.binaryType = "arraybuffer";
  ws.onmessage = (event) => { if (typeof event.data !== "string") onMessage(decode(event.data)); };
  ws.onclose = () => { $("status").textContent = "disconnected from the viewer: retrying"; setTimeout(connect, 1000); };
}

// ----- follow a particle, probe a grid point (Vertanen §8.3) ---------------------------------------------
/** Add the live frame to what is followed / probed. */
function extendPicks(msg) {
  const {header: h, arrays: a} = msg;
  if (follow && a.id) {
    const i = a.id.data.indexOf(follow.id);
    if (i >= 0) { follow.steps.push(h.step); follow.x.push(a.x.data[2 * i]); follow.y.push(a.x.data[2 * i + 1]); }
  }
  const g = probe && a[`grid:${probe.grid}`];
  if (g) { probe.steps.push(h.step); probe.values.push(g.data[probe.i * g.shape[1] + probe.j]); }
}

async function pick(event) {
  if (!drawn) return;
  const rect = event.target.getBoundingClientRect();
  const px = (event.clientX - rect.left) * event.target.width / rect.width;
  const py = (event.clientY - rect.top) * event.target.height / rect.height;
  const {header: h, arrays: a} = drawn.msg;
  follow = probe = null;
  if (drawn.kind === "particles") {
    let best = -1, dist = 64;   // within 8 px
    for (let i = 0; i < a.id.data.length; i++) {
      const [qx, qy] = drawn.tr.px(a.x.data[2 * i], a.x.data[2 * i + 1]), d = (qx - px) ** 2 + (qy - py) ** 2;
      if (d < dist) { dist = d; best = i; }
    }
    if (best < 0) return redraw();
    follow = {id: a.id.data[best], steps: [], x: [], y: []};
    if (mode === "playback") {
      Object.assign(follow, await (await api(`${runPath()}/follow?id=${follow.id}`)).json());
    } else {
      live.recent.forEach(extendPicks);
    }
  } else {
    const [wx, wy] = drawn.tr.world(px, py), [x0, x1, y0, y1] = drawn.box;
    const i = Math.floor((wx - x0) / (x1 - x0) * drawn.nx), up = Math.floor((wy - y0) / (y1 - y0) * drawn.ny);
    const j = drawn.grid.down ? drawn.ny - 1 - up : up;
    if (i < 0 || j < 0 || i >= drawn.nx || j >= drawn.ny) return redraw();
    probe = {grid: drawn.grid.name, i, j, stride: drawn.grid.stride || 1, steps: [], values: []};
    if (mode === "playback") {
      const q = `grid=${encodeURIComponent(probe.grid)}&i=${i}&j=${j}`;   // indices of the grid as sent
      Object.assign(probe, await (await api(`${runPath()}/probe?${q}`)).json());
    } else {
      live.recent.forEach(extendPicks);
    }
  }
  redraw();
}

// ----- run controls ----------------------------------------------------------------------------------------
let scenarios = [];
async function loadScenarios() {
  scenarios = await (await api("/api/scenarios")).json();
  $("scenario").replaceChildren(...scenarios.map((s) => new Option(`${s.name} (${s.app})`, s.name)));
  fillParams({});
  showRunParams();  // a run said hello, or a playback opened, before the scenarios came
}

/** TOML text on one line (an input holds one): "[\n  256,\n  256,\n]" becomes "[256, 256]". */
const oneLine = (text) => !text.includes("\n") ? text.trim() : text.trim().replace(/\s*\n\s*/g, " ").replace(/\[\s+/g, "[").replace(/,?\s*\]/g, "]");

/** The parameter table of the selected scenario, with `values` over its defaults marked as changed. */
function fillParams(values) {
  const s = scenarios.find((q) => q.name === $("scenario").value);
  $("scenario-description").textContent = s ? s.description : "";
  const rows = Object.entries(s ? s.params : {}).map(([key, text]) => {
    const value = oneLine(text);
    const input = Object.assign(document.createElement("input"), {id: `param-${key}`, value: oneLine(values[key] ?? value)});
    input.dataset.key = key;
    input.dataset.default = value;
    const mark = () => input.closest("tr").classList.toggle("changed", input.value.trim() !== value);
    input.addEventListener("input", mark);
    const tr = document.createElement("tr");
    tr.append(Object.assign(document.createElement("td"), {textContent: key}), document.createElement("td"));
    tr.lastChild.append(input);
    queueMicrotask(mark);
    return tr;
  });
  $("params").tBodies[0].replaceChildren(...rows);
}

/** Until the user picks a scenario or edits a value, the table shows the running run's own
 *  scenario and values (`settings`: every `--set` key as TOML text), its changes marked. */
let paramsTouched = false, runParams = null;
function showRunParams(scenario, settings) {
  if (settings) runParams = {scenario, settings};
  if (paramsTouched || !runParams || !scenarios.some((s) => s.name === runParams.scenario)) return;
  $("scenario").value = runParams.scenario;
  fillParams(runParams.settings);
}

/** The parameters whose value differs from the scenario's: what a run or a saved set overrides. */
function changedParams() {
  const out = {};
  for (const input of $("params").querySelectorAll("input")) {
    if (input.value.trim() !== input.dataset.default) out[input.dataset.key] = input.value.trim();
  }
  return out;
}

async function start() {
  const started = await (await postJSON("/api/run", {scenario: $("scenario").value, params: changedParams(), force: false})).json();
  showError("");
  $("status").textContent = `started ${started.name}`;
  leavePlayback();
}

async function saveParams() {
  const blob = await (await postJSON("/api/params/save", {scenario: $("scenario").value, params: changedParams()})).blob();
  download(blob, `${$("scenario").value}.toml`);
}

async function loadParams(file) {
  const set = await (await api("/api/params/load", {method: "POST", headers: {"Content-Type": "text/plain"},
                                                    body: await file.text()})).json();
  $("scenario").value = set.scenario;
  fillParams(set.params);
  showError("");
}

// ----- playback ----------------------------------------------------------------------------------------------
const runPath = () => `/api/runs/${encodeURIComponent(playback.name)}`;
let playing = false;

async function refreshRuns() {
  const runs = await (await api("/api/runs")).json();
  const keep = playback ? playback.name : $("runs").value;
  $("runs").replaceChildren(...runs.map((r) => new Option(`${r.name} (${r.scenario}, ${r.status}, ${r.frames} frames)`, r.name)));
  if (runs.some((r) => r.name === keep)) $("runs").value = keep;
}

async function openRun(name) {
  playing = false;
  const index = await (await api(`/api/runs/${encodeURIComponent(name)}`)).json();
  const run = index.hello;   // the tiles' bounds come as lists of [x, y] pairs here
  showRunParams(run.scenario, index.settings);
  const hello = {run, lo: Int32Array.from(run.tile_lo.flat()), hi: Int32Array.from(run.tile_hi.flat())};
  playback = {...newSource(), name, frames: index.frames, k: 0, hello, cache: new Map()};
  mode = "playback";
  if ([...$("runs").options].some((o) => o.value === name)) $("runs").value = name;  // the list shows what plays
  follow = probe = null;
  const binary = async (what) => {
    try { return decode(await (await api(`${runPath()}/${what}`)).arrayBuffer()); } catch { return null; }
  };
  const loads = await binary("loads"), placements = await binary("placements");
  if (loads) addLoads(playback, loads);
  if (placements) {
    const {steps, owner, migrated} = placements.arrays, tiles = owner.shape[1];
    for (let p = 0; p < steps.data.length; p++) {
      playback.placements.push({step: steps.data[p], migrated: migrated.data[p], owner: owner.data.subarray(p * tiles, (p + 1) * tiles)});
    }
  }
  $("playback").hidden = false;
  $("scrub").max = String(Math.max(0, index.frames.length - 1));
  $("frame-pick").replaceChildren(...index.frames.map((s, k) => new Option(String(s), String(k))));
  showError("");
  await showFrame(0);
}

async function fetchFrame(k) {
  if (!playback.cache.has(k)) {
    const msg = decode(await (await api(`${runPath()}/frame/${playback.frames[k]}`)).arrayBuffer());
    foldRanges(playback, msg);
    playback.cache.set(k, msg);
    if (playback.cache.size > RECENT) playback.cache.delete(playback.cache.keys().next().value);
  }
  return playback.cache.get(k);
}

async function showFrame(k) {
  if (!playback || !playback.frames.length) return redraw();
  playback.k = Math.max(0, Math.min(k, playback.frames.length - 1));
  playback.frame = await fetchFrame(playback.k);
  $("scrub").value = String(playback.k);
  $("frame-pick").value = String(playback.k);
  redraw();
}

async function play() {
  playing = !playing;
  $("play").textContent = playing ? "Pause" : "Play";
  if (playing && playback.k === playback.frames.length - 1) await showFrame(0);
  while (playing && mode === "playback" && playback.k < playback.frames.length - 1) {
    await showFrame(playback.k + 1);
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
  playing = false;
  $("play").textContent = "Play";
  redraw();
}

/** Colour by the whole run's range (§6.2: the range is unknown until the run ends, hence a rescale). */
async function rescale() {
  if (mode === "playback") {
    // Every frame's range, one frame in memory at a time beyond the cache.
    for (let k = 0; k < playback.frames.length; k++) {
      $("status").textContent = `rescaling: frame ${k + 1} of ${playback.frames.length}`;
      if (!playback.cache.has(k)) foldRanges(playback, decode(await (await api(`${runPath()}/frame/${playback.frames[k]}`)).arrayBuffer()));
    }
  }
  $("scale").value = "run";
  redraw();
}

async function exportAnimation(format) {
  $("status").textContent = `exporting ${format.toUpperCase()}…`;
  const blob = await (await postJSON(`${runPath()}/export`, {format, scale: $("scale").value})).blob();
  download(blob, `${playback.name}.${format}`);
  redraw();
}

function leavePlayback() {
  playing = false;
  mode = "live";
  follow = probe = null;
  $("playback").hidden = true;
  redraw();
}

// ----- wiring --------------------------------------------------------------------------------------------
$("scenario").addEventListener("change", () => { paramsTouched = true; fillParams({}); });
$("params").addEventListener("input", () => { paramsTouched = true; });
$("start").addEventListener("click", () => guarded(start));
$("stop").addEventListener("click", () => guarded(() => api("/api/stop", {method: "POST"})));
$("save-params").addEventListener("click", () => guarded(saveParams));
$("load-params").addEventListener("change", (e) => e.target.files[0] && guarded(() => loadParams(e.target.files[0])));
$("open").addEventListener("click", () => $("runs").value && guarded(() => openRun($("runs").value)));
$("live").addEventListener("click", leavePlayback);
$("scrub").addEventListener("input", (e) => guarded(() => showFrame(Number(e.target.value))));
$("frame-pick").addEventListener("change", (e) => guarded(() => showFrame(Number(e.target.value))));
$("play").addEventListener("click", () => guarded(play));
$("rescale").addEventListener("click", () => guarded(rescale));
$("export-gif").addEventListener("click", () => guarded(() => exportAnimation("gif")));
$("export-mp4").addEventListener("click", () => guarded(() => exportAnimation("mp4")));
$("frame-canvas").addEventListener("click", (e) => guarded(() => pick(e)));
for (const id of ["layer", "colour-by", "contours", "scale"]) $(id).addEventListener("change", redraw);

guarded(loadScenarios);
guarded(refreshRuns);
connect();
redraw();
