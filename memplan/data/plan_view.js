// memplan's plan view: canvas 2D, no dependency, no network.
// The page embeds the data (memplan.viz_html); the buffers are typed arrays
// decoded once from base64. Every frame draws the buffers of each shown plan
// batched by colour (one path and one fill per colour), culled to the view;
// rectangles thinner than a pixel are left to the rasteriser's coverage (drawn
// at their true fractional size), outlines only when they are wide enough.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("memplan-data").textContent);
  const N = D.n, H = Math.max(D.horizon, 1);

  const TYPES = {u1: Uint8Array, i4: Int32Array, u4: Uint32Array, f8: Float64Array};
  function decode(column) {  // [dtype, base64] -> a typed array
    if (!column) return null;
    const bin = atob(column[1]), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new TYPES[column[0]](bytes.buffer);
  }
  const starts = decode(D.starts), ends = decode(D.ends);
  const sizes = decode(D.sizes), kind = decode(D.kind);
  const producer = decode(D.producer);
  const readPtr = decode(D.readers_ptr), readers = decode(D.readers);
  const live = decode(D.live);
  const plans = D.plans.map(p => ({
    ...p, offsets: decode(p.offsets), used: decode(p.sizes) || sizes,
    usage: decode(p.usage), shown: decode(p.shown),
  }));
  const ids = D.ids, steps = D.steps;  // steps: [name, op] per step, or null

  // ------------------------------------------------------------ formats
  const UNITS = [[2 ** 30, "GiB"], [2 ** 20, "MiB"], [2 ** 10, "KiB"]];
  function human(v) {
    for (const [s, u] of UNITS) if (Math.abs(v) >= s) return +(v / s).toPrecision(4) + " " + u;
    return v + " B";
  }
  function exact(v) { return v >= 1024 ? `${human(v)} (${v.toLocaleString("en")} B)` : `${v} B`; }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
  }
  function opName(t) {
    if (t < 0) return "none";
    if (!steps) return `step ${t}`;
    const [name, op] = steps[t];
    return `${esc(name || "?")} (${esc(op || "?")}) at step ${t}`;
  }

  // ------------------------------------------------------------ colours
  const KIND_COLOURS = {activation: "#4e79a7", input: "#59a14f", output: "#e15759",
                        scratch: "#f28e2b", weight: "#b07aa1"};
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
                   "#b07aa1", "#ff9da7", "#9c755f", "#8cd17d", "#86bcb6", "#d4a6c8"];
  const SHADES = [0, 0.16, -0.12, 0.3];  // neighbours of one colour stay apart without edges
  function shade(hex, f) {
    const n = parseInt(hex.slice(1), 16);
    const ch = [n >> 16, (n >> 8) & 255, n & 255].map(c =>
      Math.round(f >= 0 ? c + (255 - c) * f : c * (1 + f)));
    return ch;
  }
  // colour classes: by kind, or by the producer's operator type (the 11 most
  // bytes-heavy types, the rest grey); each class in four shades
  function classes(mode) {
    const cls = new Uint16Array(N);
    let names, colours;
    if (mode === "operator" && steps && producer) {
      const weight = new Map();
      for (let i = 0; i < N; i++) {
        const op = producer[i] >= 0 ? steps[producer[i]][1] || "?" : "(no operator)";
        weight.set(op, (weight.get(op) || 0) + sizes[i] * (ends[i] - starts[i]));
      }
      names = [...weight.keys()].sort((a, b) => weight.get(b) - weight.get(a));
      if (names.length > 12) names = names.slice(0, 11).concat(["other"]);
      const index = new Map(names.map((n, k) => [n, k]));
      for (let i = 0; i < N; i++) {
        const op = producer[i] >= 0 ? steps[producer[i]][1] || "?" : "(no operator)";
        cls[i] = index.has(op) ? index.get(op) : names.length - 1;
      }
      colours = names.map((n, k) => n === "other" ? "#9a9a9a" : PALETTE[k]);
    } else {
      names = D.kinds;
      for (let i = 0; i < N; i++) cls[i] = kind[i];
      colours = names.map(k => KIND_COLOURS[k] || "#888");
    }
    // each buffer one of four shades of its class (a hash of its index)
    const key = new Uint16Array(N);
    for (let i = 0; i < N; i++) key[i] = cls[i] * 4 + ((Math.imul(i, 2654435761) >>> 0) >>> 30);
    const rgba = new Uint32Array(colours.length * 4);  // the pixel words, little-endian ABGR
    colours.forEach((c, k) => SHADES.forEach((f, j) => {
      const [r, g, b] = shade(c, f);
      rgba[4 * k + j] = (255 << 24 | b << 16 | g << 8 | r) >>> 0;
    }));
    return {names, colours, key, rgba, id: ++paletteCount};
  }
  let paletteCount = 0;
  let palette = classes("kind");

  // ------------------------------------------------------------ the view
  const top0 = Math.max(1, ...plans.map(p => p.arena_size), D.lower_bound) * 1.04;
  const home = {t0: 0, t1: H, a0: 0, a1: top0};
  const view = {...home};
  const MARGIN = {left: 70, right: 12, top: 20, bottom: 22};  // the label above the plot
  let shownPlans = plans.length > 1 ? [0, 1] : [0];
  let matches = [], matchAt = -1, hover = null;

  const root = document.getElementById("memplan-view");
  const panels = [];  // {canvas, plan (index) | null (live bytes), label}
  function makePanel(planIndex, height) {
    const div = document.createElement("div");
    div.className = "panel";
    const canvas = document.createElement("canvas");
    const label = document.createElement("div");
    label.className = "label";
    div.append(canvas, label);
    root.append(div);
    const panel = {canvas, plan: planIndex, label, height, ctx: canvas.getContext("2d")};
    panels.push(panel);
    attach(panel);
    return panel;
  }
  function layoutPanels() {
    const room = Math.max(360, window.innerHeight - root.getBoundingClientRect().top - 40);
    const nLayouts = shownPlans.length;
    const liveH = Math.round(room * (nLayouts > 1 ? 0.24 : 0.3));
    const each = Math.round((room - liveH) / nLayouts);
    panels.forEach((p, k) => { p.height = p.plan === null ? liveH : each; });
    for (const p of panels) {
      const ratio = window.devicePixelRatio || 1, w = p.canvas.parentElement.clientWidth - 24;
      p.canvas.style.height = p.height + "px";
      p.canvas.width = Math.max(100, Math.round(w * ratio));
      p.canvas.height = Math.round(p.height * ratio);
      p.w = w; p.ratio = ratio;
    }
  }

  function xOf(p, t) { return MARGIN.left + (t - view.t0) * (p.w - MARGIN.left - MARGIN.right) / (view.t1 - view.t0); }
  function tOf(p, x) { return view.t0 + (x - MARGIN.left) * (view.t1 - view.t0) / (p.w - MARGIN.left - MARGIN.right); }
  function yOf(p, a, a0, a1) { return p.height - MARGIN.bottom - (a - a0) * (p.height - MARGIN.top - MARGIN.bottom) / (a1 - a0); }
  function aOf(p, y, a0, a1) { return a0 + (p.height - MARGIN.bottom - y) * (a1 - a0) / (p.height - MARGIN.top - MARGIN.bottom); }

  function ticks(lo, hi, count) {
    const span = hi - lo, raw = span / count, mag = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 5, 10].map(m => m * mag).find(s => span / s <= count) || raw;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi; v += step) out.push(v);
    return out;
  }
  function byteTicks(lo, hi) {
    const [scale, unit] = UNITS.find(([s]) => hi >= 4 * s) || [1, "B"];
    return ticks(lo / scale, hi / scale, 6).map(v => [v * scale, `${+v.toPrecision(6)} ${unit}`]);
  }
  function axes(p, ctx, a0, a1) {
    ctx.fillStyle = "#444"; ctx.strokeStyle = "#ddd"; ctx.lineWidth = 1;
    ctx.font = "11px system-ui, sans-serif"; ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (const [v, text] of byteTicks(a0, a1)) {
      const y = Math.round(yOf(p, v, a0, a1)) + 0.5;
      ctx.beginPath(); ctx.moveTo(MARGIN.left, y); ctx.lineTo(p.w - MARGIN.right, y); ctx.stroke();
      ctx.fillText(text, MARGIN.left - 4, y);
    }
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    for (const t of ticks(view.t0, view.t1, 10)) {
      if (t !== Math.round(t)) continue;
      ctx.fillText(String(t), xOf(p, t), p.height - MARGIN.bottom + 4);
    }
    ctx.strokeStyle = "#888";
    ctx.strokeRect(MARGIN.left + 0.5, MARGIN.top + 0.5, p.w - MARGIN.left - MARGIN.right - 1,
                   p.height - MARGIN.top - MARGIN.bottom - 1);
  }
  // a horizontal line with its label; labels line up from the right (`right`:
  // where the previous one began) so that lines close together stay readable
  function hline(p, ctx, value, colour, dash, text, right) {
    const y = yOf(p, value, view.a0, view.a1);
    if (y < MARGIN.top || y > p.height - MARGIN.bottom) return right;
    ctx.strokeStyle = colour; ctx.setLineDash(dash); ctx.lineWidth = 1.5;
    ctx.beginPath(); ctx.moveTo(MARGIN.left, y); ctx.lineTo(p.w - MARGIN.right, y); ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = colour; ctx.textAlign = "right"; ctx.textBaseline = y < MARGIN.top + 14 ? "top" : "bottom";
    right = right || p.w - MARGIN.right - 4;
    const width = ctx.measureText(text).width, ty = ctx.textBaseline === "top" ? y + 2 : y - 13;
    ctx.fillStyle = "rgba(255,255,255,.8)"; ctx.fillRect(right - width - 2, ty, width + 4, 12);
    ctx.fillStyle = colour;
    ctx.fillText(text, right, ctx.textBaseline === "top" ? y + 2 : y - 1);
    return right - ctx.measureText(text).width - 14;
  }
  // the peak step as a pale band over its width (at least 3 px), not a line that would
  // hide a one-step spike of the live bytes
  function peakLine(p, ctx) {
    let x0 = xOf(p, D.peak_step), x1 = xOf(p, D.peak_step + 1);
    if (x1 < MARGIN.left || x0 > p.w - MARGIN.right) return;
    if (x1 - x0 < 3) { const mid = (x0 + x1) / 2; x0 = mid - 1.5; x1 = mid + 1.5; }
    ctx.fillStyle = "rgba(200,0,0,.16)";
    ctx.fillRect(x0, MARGIN.top, x1 - x0, p.height - MARGIN.top - MARGIN.bottom);
  }
  function drawLayout(p) {
    const ctx = p.ctx, plan = plans[p.plan];
    ctx.setTransform(p.ratio, 0, 0, p.ratio, 0, 0);
    ctx.clearRect(0, 0, p.w, p.height);
    const x0 = MARGIN.left, x1 = p.w - MARGIN.right, yTop = MARGIN.top, yBot = p.height - MARGIN.bottom;
    const sx = (x1 - x0) / (view.t1 - view.t0), sy = (yBot - yTop) / (view.a1 - view.a0);
    // the gap: between the proven bound and the arena, over the whole time axis
    const gTop = yOf(p, plan.arena_size, view.a0, view.a1), gBot = yOf(p, plan.best_bound, view.a0, view.a1);
    const wide = raster(p, plan);
    ctx.save();
    ctx.beginPath(); ctx.rect(x0, yTop, x1 - x0, yBot - yTop); ctx.clip();
    if (plan.arena_size > plan.best_bound) {
      ctx.fillStyle = "rgba(230,60,60,.12)";
      ctx.fillRect(x0, gTop, x1 - x0, gBot - gTop);
    }
    if (wide.length && wide.length < 4 * 3000) {  // edges only when they are seen
      ctx.strokeStyle = "rgba(0,0,0,.35)"; ctx.lineWidth = 0.6; ctx.beginPath();
      for (let k = 0; k < wide.length; k += 4) ctx.rect(wide[k], wide[k + 1], wide[k + 2], wide[k + 3]);
      ctx.stroke();
    }
    // search matches and the hovered buffer, outlined
    const outlined = matches.slice(0, 5000);
    ctx.lineWidth = 2; ctx.strokeStyle = "#000";
    for (const i of outlined) strokeBuffer(p, ctx, plan, i, sx, sy, 3);
    if (hover !== null) { ctx.strokeStyle = "#ff00c8"; ctx.lineWidth = 2.5; strokeBuffer(p, ctx, plan, hover.i, sx, sy, 4); }
    peakLine(p, ctx);
    ctx.restore();
    axes(p, ctx, view.a0, view.a1);
    let right = hline(p, ctx, plan.arena_size, "#c00", [], `arena ${human(plan.arena_size)}`);
    right = hline(p, ctx, D.lower_bound, "#1a8a1a", [6, 4], `lower bound ${human(D.lower_bound)}`, right);
    if (plan.best_bound > D.lower_bound)
      right = hline(p, ctx, plan.best_bound, "#8a8a00", [2, 3], `proven bound ${human(plan.best_bound)}`, right);
    if (D.capacity !== null) hline(p, ctx, D.capacity, "#000", [1, 3], `capacity ${human(D.capacity)}`, right);
    p.label.textContent = `${plan.title}: arena ${human(plan.arena_size)}, ${plan.status}, gap ${(100 * plan.gap).toFixed(2)}%`;
  }
  // the rectangles, rasterised in device pixels into one image: each row of a
  // rectangle is one TypedArray.fill, a rectangle thinner than a pixel covers
  // one pixel, so a frame costs O(buffers + pixels) (valid plans do not overlap)
  function raster(p, plan) {
    const W = p.canvas.width, Hp = p.canvas.height, r = p.ratio;
    if (!p.image || p.image.width !== W || p.image.height !== Hp) {
      p.image = p.ctx.createImageData(W, Hp);
      p.pixels = new Uint32Array(p.image.data.buffer);
    }
    const stamp = [view.t0, view.t1, view.a0, view.a1, W, Hp, p.plan, palette.id].join();
    if (p.stamp === stamp) {  // only the outlines changed (hover, search): the image stands
      p.ctx.putImageData(p.image, 0, 0);
      return p.wide;
    }
    const px = p.pixels;
    px.fill(0);
    const cx0 = Math.round(MARGIN.left * r), cx1 = Math.round((p.w - MARGIN.right) * r);
    const cy0 = Math.round(MARGIN.top * r), cy1 = Math.round((p.height - MARGIN.bottom) * r);
    const sx = (cx1 - cx0) / (view.t1 - view.t0), sy = (cy1 - cy0) / (view.a1 - view.a0);
    const {key, rgba} = palette, off = plan.offsets, used = plan.used, shown = plan.shown;
    const t0 = view.t0, t1 = view.t1, a0 = view.a0, a1 = view.a1, wide = [];
    for (let i = 0; i < N; i++) {
      if (ends[i] <= t0 || starts[i] >= t1) continue;
      const lo = off[i], hi = lo + used[i];
      if (hi <= a0 || lo >= a1 || (shown && !shown[i])) continue;
      const fx0 = cx0 + (starts[i] - t0) * sx, fx1 = cx0 + (ends[i] - t0) * sx;
      const fy0 = cy1 - (hi - a0) * sy, fy1 = cy1 - (lo - a0) * sy;
      let ix0 = Math.floor(fx0), ix1 = Math.max(ix0 + 1, Math.round(fx1));
      let iy0 = Math.floor(fy0), iy1 = Math.max(iy0 + 1, Math.round(fy1));
      if (ix0 < cx0) ix0 = cx0; if (ix1 > cx1) ix1 = cx1;
      if (iy0 < cy0) iy0 = cy0; if (iy1 > cy1) iy1 = cy1;
      const colour = rgba[key[i]];
      for (let y = iy0; y < iy1; y++) px.fill(colour, y * W + ix0, y * W + ix1);
      if (fx1 - fx0 > 6 * r && fy1 - fy0 > 6 * r) wide.push(fx0 / r, fy0 / r, (fx1 - fx0) / r, (fy1 - fy0) / r);
    }
    p.ctx.putImageData(p.image, 0, 0);
    p.stamp = stamp; p.wide = wide;
    return wide;
  }
  function strokeBuffer(p, ctx, plan, i, sx, sy, min) {
    if (plan.shown && !plan.shown[i]) return;
    const x = MARGIN.left + (starts[i] - view.t0) * sx, w = Math.max((ends[i] - starts[i]) * sx, min);
    const y = p.height - MARGIN.bottom - (plan.offsets[i] + plan.used[i] - view.a0) * sy;
    const h = Math.max(plan.used[i] * sy, min);
    ctx.strokeRect(x, y, w, h);
  }

  // live bytes per step, and each plan's highest used address: per pixel column
  // the steps under it are reduced to their maximum (level of detail)
  function curve(p, ctx, values, a0, a1, fill, colour, dash) {
    const x0 = MARGIN.left, x1 = p.w - MARGIN.right;
    const first = Math.max(0, Math.floor(view.t0)), last = Math.min(values.length, Math.ceil(view.t1));
    const pts = [];
    const perPixel = (view.t1 - view.t0) / (x1 - x0);
    if (perPixel > 1) {
      let col = -1, best = 0;
      for (let t = first; t < last; t++) {
        const c = Math.floor(xOf(p, t));
        if (c !== col) { if (col >= 0) pts.push([col, best], [col + 1, best]); col = c; best = values[t]; }
        else if (values[t] > best) best = values[t];
      }
      if (col >= 0) pts.push([col, best], [col + 1, best]);
    } else {
      for (let t = first; t < last; t++) pts.push([xOf(p, t), values[t]], [xOf(p, t + 1), values[t]]);
    }
    if (!pts.length) return;
    ctx.beginPath();
    pts.forEach(([x, v], k) => { const y = yOf(p, v, a0, a1); k ? ctx.lineTo(x, y) : ctx.moveTo(x, y); });
    if (fill) {
      ctx.lineTo(pts[pts.length - 1][0], yOf(p, 0, a0, a1)); ctx.lineTo(pts[0][0], yOf(p, 0, a0, a1));
      ctx.fillStyle = fill; ctx.fill();
    } else {
      ctx.strokeStyle = colour; ctx.setLineDash(dash || []); ctx.lineWidth = 1.5; ctx.stroke(); ctx.setLineDash([]);
    }
  }
  const PLAN_LINES = ["#e8710a", "#7b3fb5"];
  function drawLive(p) {
    const ctx = p.ctx;
    ctx.setTransform(p.ratio, 0, 0, p.ratio, 0, 0);
    ctx.clearRect(0, 0, p.w, p.height);
    const a1 = top0;
    ctx.save();
    ctx.beginPath(); ctx.rect(MARGIN.left, MARGIN.top, p.w - MARGIN.left - MARGIN.right, p.height - MARGIN.top - MARGIN.bottom); ctx.clip();
    peakLine(p, ctx);
    curve(p, ctx, live, 0, a1, "rgba(78,121,167,.45)");
    shownPlans.forEach((k, j) => curve(p, ctx, plans[k].usage, 0, a1, null, PLAN_LINES[j], j ? [5, 3] : []));
    ctx.restore();
    axes(p, ctx, 0, a1);
    const saved = {...view};
    view.a0 = 0; view.a1 = a1;  // the lines below are drawn on this panel's own address scale
    hline(p, ctx, D.lower_bound, "#1a8a1a", [6, 4], `lower bound ${human(D.lower_bound)} (peak at step ${D.peak_step})`);
    Object.assign(view, saved);
    p.label.innerHTML = `live bytes (blue), highest address used: ` + shownPlans.map((k, j) =>
      `<span style="color:${PLAN_LINES[j]}">${esc(plans[k].title)}</span>`).join(", ");
  }

  let pending = false;
  function draw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; paint(); });
  }
  function paint() {
    const began = performance.now();
    for (const p of panels) (p.plan === null ? drawLive : drawLayout)(p);
    api.frameMs = performance.now() - began;
    if (api.firstPaint === null) api.firstPaint = performance.now();
    rangeText.textContent = `steps ${Math.floor(view.t0)}–${Math.ceil(view.t1)}, ` +
      `addresses ${human(Math.max(0, Math.round(view.a0)))}–${human(Math.round(view.a1))}`;
  }

  // ------------------------------------------------------------ interaction
  function clampView() {
    const span = Math.max(view.t1 - view.t0, 0.5), aspan = Math.max(view.a1 - view.a0, 1);
    view.t1 = view.t0 + span; view.a1 = view.a0 + aspan;
  }
  function zoom(p, x, y, factor, axes) {
    if (axes.includes("t")) {
      const t = tOf(p, x);
      view.t0 = t - (t - view.t0) * factor; view.t1 = t + (view.t1 - t) * factor;
    }
    if (axes.includes("a") && p.plan !== null) {
      const a = aOf(p, y, view.a0, view.a1);
      view.a0 = a - (a - view.a0) * factor; view.a1 = a + (view.a1 - a) * factor;
    }
    clampView(); draw();
  }
  function local(p, e) { const r = p.canvas.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; }
  function attach(p) {
    const c = p.canvas;
    let drag = null;
    c.addEventListener("wheel", e => {
      e.preventDefault();
      const [x, y] = local(p, e);
      zoom(p, x, y, Math.exp(e.deltaY * 0.0015), e.shiftKey ? "t" : e.altKey ? "a" : "ta");
    }, {passive: false});
    c.addEventListener("pointerdown", e => { drag = {x: e.clientX, y: e.clientY, v: {...view}}; c.setPointerCapture(e.pointerId); });
    c.addEventListener("pointerup", () => { drag = null; });
    c.addEventListener("pointermove", e => {
      if (drag) {
        const dt = (e.clientX - drag.x) * (drag.v.t1 - drag.v.t0) / (p.w - MARGIN.left - MARGIN.right);
        view.t0 = drag.v.t0 - dt; view.t1 = drag.v.t1 - dt;
        if (p.plan !== null) {
          const da = (e.clientY - drag.y) * (drag.v.a1 - drag.v.a0) / (p.height - MARGIN.top - MARGIN.bottom);
          view.a0 = drag.v.a0 + da; view.a1 = drag.v.a1 + da;
        }
        draw(); return;
      }
      const [x, y] = local(p, e);
      showTip(p, x, y, e.clientX, e.clientY);
    });
    c.addEventListener("pointerleave", () => { tip.style.display = "none"; if (hover) { hover = null; draw(); } });
    c.addEventListener("dblclick", () => reset());
  }
  function reset() { Object.assign(view, home); draw(); }

  function bufferAt(plan, t, a) {
    const off = plan.offsets, used = plan.used, shown = plan.shown;
    let found = -1;
    for (let i = 0; i < N; i++) {
      if (starts[i] <= t && t < ends[i] && off[i] <= a && a < off[i] + used[i] && !(shown && !shown[i])) {
        if (found < 0 || used[i] < used[found]) found = i;  // an alias inside its source: the inner one
      }
    }
    return found;
  }
  const tip = document.getElementById("tip");
  function describe(i, plan) {
    const rows = [["size", exact(sizes[i])], ["lifetime", `[${starts[i]}, ${ends[i]}) (${ends[i] - starts[i]} steps)`]];
    for (const k of shownPlans) rows.push([`offset (${esc(plans[k].title)})`, exact(plans[k].offsets[i])]);
    if (plan.used !== sizes && plan.used[i] !== sizes[i]) rows.push(["granted", exact(plan.used[i])]);
    rows.push(["kind", D.kinds[kind[i]]]);
    if (producer) {
      rows.push(["producer", opName(producer[i])]);
      const list = [];
      for (let r = readPtr[i]; r < readPtr[i + 1] && list.length < 8; r++) list.push(opName(readers[r]));
      const more = readPtr[i + 1] - readPtr[i] - list.length;
      rows.push(["readers", (list.join("<br>") || "none") + (more > 0 ? `<br>… ${more} more` : "")]);
    }
    return `<b>${esc(ids[i])}</b><table>` + rows.map(([k, v]) => `<tr><td>${k}</td><td>${v}</td></tr>`).join("") + "</table>";
  }
  function showTip(p, x, y, cx, cy) {
    const t = tOf(p, x);
    let html = null, i = -1;
    if (p.plan !== null) {
      const plan = plans[p.plan];
      i = bufferAt(plan, t, aOf(p, y, view.a0, view.a1));
      if (i >= 0) html = describe(i, plan);
    } else if (t >= 0 && t < H) {
      const s = Math.floor(t);
      html = `<b>step ${s}</b>${steps ? " " + opName(s) : ""}<br>live ${exact(live[s])}` +
        shownPlans.map(k => `<br>${esc(plans[k].title)}: up to ${exact(plans[k].usage[s])}`).join("");
    }
    const changed = (hover ? hover.i : -1) !== i;
    hover = i >= 0 ? {i} : null;
    if (changed) draw();
    if (!html) { tip.style.display = "none"; return; }
    tip.innerHTML = html; tip.style.display = "block";
    const r = tip.getBoundingClientRect();
    tip.style.left = Math.min(cx + 14, window.innerWidth - r.width - 4) + "px";
    tip.style.top = Math.min(cy + 14, window.innerHeight - r.height - 4) + "px";
  }

  // ------------------------------------------------------------ search
  function search(text, next) {
    text = text.trim().toLowerCase();
    if (!next) {
      matches = [];
      if (text) for (let i = 0; i < N; i++) if (ids[i].toLowerCase().includes(text)) matches.push(i);
      const same = matches.findIndex(i => ids[i].toLowerCase() === text);  // an exact name first
      if (same > 0) matches.unshift(...matches.splice(same, 1));
      matchAt = -1;
    }
    found.textContent = text ? `${matches.length} match${matches.length === 1 ? "" : "es"}` : "";
    if (matches.length) {
      matchAt = (matchAt + 1) % matches.length;
      const i = matches[matchAt], plan = plans[shownPlans[0]];
      const pad = Math.max(4, (ends[i] - starts[i]) * 2), apad = Math.max(plan.used[i] * 4, top0 / 400);
      view.t0 = Math.max(0, starts[i] - pad); view.t1 = ends[i] + pad;
      view.a0 = Math.max(0, plan.offsets[i] - apad); view.a1 = plan.offsets[i] + plan.used[i] + apad;
      found.textContent += `, showing ${ids[i]} (${matchAt + 1})`;
    }
    draw();
  }

  // ------------------------------------------------------------ page
  const header = document.getElementById("controls");
  header.innerHTML = `<input type="search" id="find" placeholder="find a tensor (Enter: next)">` +
    `<span class="found"></span>` +
    `<label>colour <select id="colour"><option value="kind">by kind</option>` +
    (steps ? `<option value="operator">by producer operator</option>` : "") + `</select></label>` +
    (plans.length > 2 ? plans.map((_, s) => `<label>plan ${s ? "B" : "A"} <select class="pick" data-slot="${s}">` +
      plans.map((q, k) => `<option value="${k}"${k === s ? " selected" : ""}>${esc(q.title)}</option>`).join("") +
      `</select></label>`).slice(0, 2).join("") : "") +
    `<button id="reset">reset view</button><span class="range"></span>` +
    `<span class="hint">wheel: zoom (shift: time only, alt: address only) · drag: pan · double-click: reset</span>`;
  const found = header.querySelector(".found"), rangeText = header.querySelector(".range");
  const legend = document.getElementById("legend");
  function showLegend() {
    legend.innerHTML = palette.names.map((n, k) => `<span><i style="background:${palette.colours[k]}"></i>${esc(n)}</span>`).join("") +
      `<span><i style="background:rgba(230,60,60,.25)"></i>gap (proven bound to arena)</span>` +
      `<span><i style="background:rgba(200,0,0,.3);width:5px"></i>peak step ${D.peak_step}</span>`;
  }
  const input = header.querySelector("#find");
  let last = "";
  input.addEventListener("keydown", e => { if (e.key === "Enter") { search(input.value, input.value === last); last = input.value; } });
  input.addEventListener("search", () => { if (!input.value) { matches = []; last = ""; found.textContent = ""; draw(); } });
  header.querySelector("#colour").addEventListener("change", e => { palette = classes(e.target.value); showLegend(); draw(); });
  header.querySelector("#reset").addEventListener("click", reset);
  for (const select of header.querySelectorAll(".pick"))
    select.addEventListener("change", e => { shownPlans[+e.target.dataset.slot] = +e.target.value; rebuild(); });

  function rebuild() {
    root.innerHTML = ""; panels.length = 0;
    for (const k of shownPlans) makePanel(k, 0);
    makePanel(null, 0);
    layoutPanels(); draw();
  }
  const chosen = /plan=([^&]+)/.exec(location.hash);  // page.html#plan=TITLE: that plan first
  if (chosen) {
    const k = plans.findIndex(q => q.title === decodeURIComponent(chosen[1]));
    if (k >= 0) shownPlans = plans.length > 1 ? [k, k ? 0 : 1] : [k];
  }
  header.querySelectorAll(".pick").forEach(s => { s.value = String(shownPlans[+s.dataset.slot]); });
  window.addEventListener("resize", () => { layoutPanels(); draw(); });

  // what a test or a script can read and drive
  const api = {
    firstPaint: null, frameMs: null, view, plans, ids,
    search: (text) => search(text, false),
    zoom: (factor) => { const p = panels[0]; zoom(p, p.w / 2, p.height / 2, factor, "ta"); },
    // the client coordinates of the middle of buffer i in the panel of shown plan `slot`
    pointOf(i, slot = 0) {
      const p = panels[slot], plan = plans[p.plan], r = p.canvas.getBoundingClientRect();
      const x = xOf(p, (starts[i] + ends[i]) / 2), y = yOf(p, plan.offsets[i] + plan.used[i] / 2, view.a0, view.a1);
      return [r.left + x, r.top + y];
    },
    reset,
  };
  window.memplanView = api;
  showLegend();
  rebuild();
})();
