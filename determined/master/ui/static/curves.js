// Learning curves shared by the experiment and trial pages: training and validation of one quantity on one chart,
// TensorBoard's smoothing (a debiased exponential moving average; off by default, so that sparse validation points
// are drawn where they are), a log y axis, and x by batches, epochs or time.
"use strict";

const curves = (() => {
  const { el } = det;
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf"];
  const GROUP_STYLE = { training: { dash: "solid", mode: "lines" }, validation: { dash: "dot", mode: "lines+markers" } };

  // The quantity a metric measures: `validation_loss`, `val_loss` and `loss` are all `loss`.
  function quantity(name) {
    return String(name).replace(/^(validation|val|training|train)_/, "");
  }

  // [{key, names: {group: metric name}}] for the metric names of each group, sorted by key.
  function quantities(metricNames) {
    const byKey = {};
    for (const [group, names] of Object.entries(metricNames || {})) {
      for (const name of names || []) {
        const key = quantity(name);
        byKey[key] = byKey[key] || { key, names: {} };
        if (!byKey[key].names[group] || name === key) byKey[key].names[group] = name;
      }
    }
    return Object.values(byKey).sort((a, b) => a.key.localeCompare(b.key));
  }

  // TensorBoard's smoothing: an exponential moving average, debiased so the first points are not pulled to 0.
  function smooth(values, weight) {
    if (!weight) return values.slice();
    let last = 0, count = 0;
    return values.map((v) => {
      if (typeof v !== "number" || !isFinite(v)) return v;
      count += 1;
      last = last * weight + (1 - weight) * v;
      // 12 significant digits: a constant series stays constant instead of showing rounding noise
      return Number((last / (1 - Math.pow(weight, count))).toPrecision(12));
    });
  }

  // The x of a point: batches, epochs (batches x global_batch_size / records_per_epoch), or seconds since start.
  function xOf(point, axis, ctx) {
    if (axis === "epochs") return (point.steps_completed * ctx.batchSize) / ctx.recordsPerEpoch;
    if (axis === "time") {
      const t = new Date(point.end_time) - new Date(ctx.start || point.end_time);
      return Math.max(0, t / 1000);
    }
    return point.steps_completed;
  }

  const AXIS_TITLES = { batches: "batches", epochs: "epochs", time: "seconds since the trial started" };

  // Plotly traces for `series`: [{id, label, color (or {group: color}), ctx, groups: {group: [points]}, thick}]
  // of one quantity.
  function traces(series, q, view) {
    const out = [];
    for (const s of series) {
      for (const group of view.groups) {
        const name = q.names[group];
        if (!name) continue;
        const points = (s.groups[group] || []).filter((p) => typeof (p.metrics || {})[name] === "number");
        if (!points.length) continue;
        const x = points.map((p) => xOf(p, view.axis, s.ctx));
        const raw = points.map((p) => p.metrics[name]);
        const style = GROUP_STYLE[group] || { dash: "dash", mode: "lines" };
        const width = s.thick ? 3.5 : 1.6;
        const color = typeof s.color === "object" ? s.color[group] : s.color;
        const label = `${s.label} ${name}`.trim();
        const smoothed = view.smoothing > 0 && points.length > 1;
        if (smoothed) { // the reported values stay visible: a faint line, and their markers (validation) in full
          out.push({ type: "scatter", mode: style.mode, x, y: raw, meta: s.id, name: `${label} (raw)`,
            legendgroup: String(s.id), showlegend: false, hoverinfo: "skip",
            line: { color: faint(color), width: 1, dash: style.dash }, marker: { color, size: s.thick ? 7 : 5 } });
        }
        // a smoothed line has no markers: a marker says "a value was reported here", and only raw values were
        out.push({ type: "scatter", mode: points.length === 1 ? "markers" : smoothed ? "lines" : style.mode, x,
          y: smooth(raw, view.smoothing), customdata: raw, meta: s.id, name: label,
          legendgroup: String(s.id), line: { color, width, dash: style.dash }, marker: { size: s.thick ? 7 : 5 },
          hovertemplate: `${label}<br>%{x}: %{customdata:.5g}<extra></extra>` });
      }
    }
    return out;
  }

  // `#rrggbb` at a quarter of its strength.
  function faint(color) {
    const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(String(color || ""));
    return m ? `rgba(${parseInt(m[1], 16)},${parseInt(m[2], 16)},${parseInt(m[3], 16)},0.3)` : color;
  }

  // 1, 2 or 5 times a power of ten, at least `step`.
  function niceStep(step) {
    const power = Math.pow(10, Math.floor(Math.log10(step)));
    return [1, 2, 5, 10].map((m) => m * power).find((s) => s >= step - 1e-9);
  }

  // An x axis of whole numbers (batches): ticks at whole steps, and one point (or several at the same x) in the
  // middle of a range of its own rather than at 999.5 and 1,000.5.
  function countAxis(xs) {
    const values = xs.filter((v) => typeof v === "number" && isFinite(v));
    if (!values.length) return { tickformat: "d" };
    const low = Math.min(...values), high = Math.max(...values);
    if (high - low < 1) return { range: [low - 1, high + 1], tickmode: "array", tickvals: [...new Set([low, high])], tickformat: "d" };
    return { tickmode: "linear", tick0: 0, dtick: Math.max(1, niceStep((high - low) / 6)), tickformat: "d" };
  }

  // The layout of a chart of one quantity; `traces` (curves.traces) set the ticks of a batches axis.
  function layout(q, view, height, traces) {
    const xs = view.axis === "batches" ? (traces || []).flatMap((t) => Array.from(t.x || [])) : [];
    return {
      height: height || 380, uirevision: `${q ? q.key : ""}|${view.axis}|${view.log}`,
      xaxis: Object.assign({ title: { text: AXIS_TITLES[view.axis] } }, view.axis === "batches" ? countAxis(xs) : {}),
      yaxis: { title: { text: q ? q.key : "" }, type: view.log ? "log" : "linear" },
    };
  }

  // The controls of a chart; `view` is {metric, groups, smoothing, log, axis} and changes in place.
  function controls(container, view, options, onChange) {
    if (!container._built) {
      container._built = true;
      const slider = el("input", { type: "range", min: "0", max: "0.99", step: "0.01", class: "smoothing",
        value: String(view.smoothing) });
      const sliderValue = el("span", { class: "smoothing-value" }, view.smoothing.toFixed(2));
      slider.addEventListener("input", () => {
        view.smoothing = Number(slider.value);
        sliderValue.textContent = view.smoothing.toFixed(2);
        onChange();
      });
      const log = el("input", { type: "checkbox", class: "log-y" });
      log.addEventListener("change", () => { view.log = log.checked; onChange(); });
      const axis = el("select", { class: "x-axis" });
      axis.addEventListener("change", () => { view.axis = axis.value; onChange(); });
      const metric = el("select", { class: "metric-picker" });
      metric.addEventListener("change", () => { view.metric = metric.value; onChange(); });
      const groups = el("span", { class: "groups" });
      det.fill(container,
        options.metricPicker === false ? null : el("label", {}, "Metric ", metric),
        groups, el("label", {}, "Smoothing ", slider, sliderValue), el("label", {}, log, " log y"),
        el("label", {}, "x ", axis));
      Object.assign(container, { _metric: metric, _groups: groups, _axis: axis });
    }
    const keys = (options.quantities || []).map((q) => q.key);
    if (container._metric.dataset.keys !== keys.join("|")) {
      container._metric.dataset.keys = keys.join("|");
      det.fill(container._metric, keys.map((k) => el("option", { value: k }, k)));
      if (!keys.includes(view.metric)) view.metric = keys.includes(options.preferred) ? options.preferred : keys[0] || "";
    }
    container._metric.value = view.metric;
    const groupNames = options.groups || [];
    if (container._groups.dataset.names !== groupNames.join("|")) {
      container._groups.dataset.names = groupNames.join("|");
      det.fill(container._groups, groupNames.map((g) => {
        const box = el("input", { type: "checkbox", class: "group", value: g, checked: view.groups.includes(g) });
        box.addEventListener("change", () => {
          view.groups = groupNames.filter((name) => container._groups.querySelector(`input[value="${name}"]`).checked);
          onChange();
        });
        return el("label", {}, box, " " + g);
      }));
    }
    const axes = ["batches", ...(options.epochs ? ["epochs"] : []), "time"];
    if (container._axis.dataset.axes !== axes.join("|")) {
      container._axis.dataset.axes = axes.join("|");
      det.fill(container._axis, axes.map((a) => el("option", { value: a }, a)));
      if (!axes.includes(view.axis)) view.axis = "batches";
    }
    container._axis.value = view.axis;
  }

  function newView(preferred) {
    return { metric: preferred || "", groups: ["training", "validation"], smoothing: 0, log: false, axis: "batches" };
  }

  return { PALETTE, quantity, quantities, smooth, traces, layout, controls, newView, xOf, countAxis };
})();
