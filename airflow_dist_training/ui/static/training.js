// The Training view: fetches api/run every 2 s while the run is live and draws plain SVG: a
// mapped run's members side by side (one chart per metric, a curve per member), then a card per
// job (progress, ETA, its hosts' curves) and per group (checkpoints, gate, registry).
// No library and no network beyond this server (the page runs inside the Airflow UI's iframe).
"use strict";
(function () {
  const params = new URLSearchParams(window.location.search);
  const dagId = params.get("dag_id");
  const runId = params.get("run_id");
  const taskId = params.get("task_id");
  const root = document.getElementById("root");
  const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"];

  function esc(v) {
    return String(v === null || v === undefined ? "" : v).replace(/[&<>"']/g, (c) => (
      { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }
  function fmt(v, digits) {
    if (v === null || v === undefined || v === "") return "-";
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(digits === undefined ? 4 : digits);
    return esc(v);
  }
  function dur(s) {
    if (s === null || s === undefined) return "-";
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = Math.round(s % 60);
    return (h ? h + "h " : "") + (h || m ? m + "m " : "") + sec + "s";
  }
  function badge(v) { return `<span class="badge ${esc(v)}">${esc(v || "-")}</span>`; }

  // Axis ticks at round numbers (1, 2 or 5 times a power of ten); whole numbers only on an
  // integer axis (epochs, steps), so an 8-epoch run reads 0, 2, 4, 6 and not 1.8, 3.5, 5.3.
  function ticks(lo, hi, integer) {
    let step = Math.pow(10, Math.floor(Math.log10((hi - lo) / 4)));
    for (const m of [1, 2, 5, 10]) { if ((hi - lo) / (step * m) <= 5) { step *= m; break; } }
    if (integer) step = Math.max(1, Math.round(step));
    const out = [];
    for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
    return { values: out, digits: integer ? 0 : Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9))) };
  }

  // One line chart of one metric: a polyline per line ({label, points, color, winner}): a job's
  // hosts, or a mapped run's members. data-points / data-epochs (and each polyline's data-host or
  // data-member and data-points) are read by tests.
  function chart(name, lines, axis, kind) {
    const W = 420, H = 220, L = 52, R = 12, T = 24, B = 34;
    const points = lines.flatMap((l) => l.points);
    const xs = points.map((p) => p.x), ys = points.map((p) => p.value);
    let x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
    const integerX = axis === "epoch" || axis === "step";
    if (x1 === x0) { x1 = x0 + 1; }
    if (y1 === y0) { const d = Math.abs(y0) * 0.05 || 0.5; y0 -= d; y1 += d; }
    const pad = (y1 - y0) * 0.08; y0 -= pad; y1 += pad;
    const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
    const sy = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
    let svg = `<svg class="chart ${kind}-chart" data-metric="${esc(name)}" data-points="${points.length}" ` +
      `data-epochs="${esc([...new Set(xs)].length)}" width="${W}" height="${H}" ` +
      `viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(name)}">`;
    svg += `<text x="${L}" y="16" font-size="13" font-weight="600">${esc(name)}</text>`;
    const yt = ticks(y0, y1, false);
    yt.values.forEach((yv) => {
      const y = sy(yv);
      svg += `<line x1="${L}" x2="${W - R}" y1="${y}" y2="${y}" stroke="#f3f4f6"/>`;
      svg += `<text class="y-tick" x="${L - 6}" y="${y + 4}" font-size="10" text-anchor="end" fill="#6b7280">${yv.toFixed(yt.digits)}</text>`;
    });
    const xt = ticks(x0, x1, true);
    xt.values.forEach((xv) => {
      svg += `<text class="x-tick" x="${sx(xv)}" y="${H - 18}" font-size="10" text-anchor="middle" fill="#6b7280">${xv.toFixed(integerX ? 0 : xt.digits)}</text>`;
    });
    svg += `<text x="${(L + W - R) / 2}" y="${H - 4}" font-size="11" text-anchor="middle" fill="#6b7280">${esc(axis)}</text>`;
    lines.forEach((line, i) => {
      const attr = kind === "member" ? `data-member="${esc(line.label)}" data-winner="${line.winner ? "true" : "false"}"` : `data-host="${esc(line.label)}"`;
      const pts = line.points;
      svg += `<polyline ${attr} data-points="${pts.length}" fill="none" stroke="${line.color}" stroke-width="${line.winner ? 3.5 : 2}" points="${pts.map((p) => `${sx(p.x).toFixed(1)},${sy(p.value).toFixed(1)}`).join(" ")}"/>`;
      pts.forEach((p) => { svg += `<circle class="pt" cx="${sx(p.x).toFixed(1)}" cy="${sy(p.value).toFixed(1)}" r="2.5" fill="${line.color}"><title>${esc(line.label)} ${axis} ${p.x}: ${p.value}</title></circle>`; });
      svg += `<text x="${W - R}" y="${16 + i * 12}" font-size="10" text-anchor="end" fill="${line.color}"${line.winner ? ' font-weight="700"' : ""}>${line.winner ? "&#9733; " : ""}${esc(line.label)}${line.winner ? " (winner)" : ""}</text>`;
    });
    return svg + "</svg>";
  }

  // A metric with one value per line (a run's summary, a 1-minute job on CloudWatch) is a number.
  function singleValue(name, lines) {
    const values = lines.filter((l) => l.points.length).map((l) =>
      `${fmt(l.points[0].value)}${lines.length > 1 ? ` <span class="muted">${l.winner ? "&#9733; " : ""}${esc(l.label)}</span>` : ""}`);
    return `<div class="metric-value" data-metric="${esc(name)}"><b>${esc(name)}</b><span class="value">${values.join(", ")}</span></div>`;
  }

  function metricBlock(name, lines, axis, kind) {
    return lines.every((l) => l.points.length <= 1) ? singleValue(name, lines) : chart(name, lines, axis, kind);
  }

  const byLoss = (a, b) => (b.includes("loss") - a.includes("loss")) || a.localeCompare(b);
  const plural = (n, word, many) => `${n} ${n === 1 ? word : many || word + "s"}`;

  // "epoch 3 of 8 (38%)" with a bar, and the ETA while the job runs (data-* for tests)
  function progressCells(pr, status) {
    if (!pr) return "";
    const done = pr.done === null || pr.done === undefined ? "-" : pr.done;
    const of = pr.total ? ` of ${pr.total}` : "";
    const pct = pr.fraction === null || pr.fraction === undefined ? null : Math.round(100 * pr.fraction);
    const eta = pr.eta_seconds !== null && pr.eta_seconds !== undefined ? dur(pr.eta_seconds)
      : (["Completed", "Failed", "Stopped"].includes(status) ? "done" : "-");
    return `<div class="kv progress" data-unit="${esc(pr.unit)}" data-done="${esc(pr.done)}" data-total="${esc(pr.total)}">` +
      `<b>Progress</b>${esc(pr.unit)} ${esc(done)}${esc(of)}${pct === null ? "" : ` (${pct}%)`}` +
      (pct === null ? "" : `<div class="bar progress-bar"><div style="width:${Math.min(100, pct)}%"></div></div>`) + "</div>" +
      `<div class="kv eta" data-eta="${esc(pr.eta_seconds)}"><b>ETA</b>${eta}${pr.rate_per_hour ? ` <span class="muted">(${fmt(pr.rate_per_hour, 1)} ${esc(pr.unit)}s/h)</span>` : ""}</div>`;
  }

  // A mapped run's members (a sweep's trials), or a tuning job's training jobs, side by side: their
  // progress, then one chart per metric with a curve per member, the winner marked.
  function membersCard(f) {
    const color = {};
    f.members.forEach((m, i) => { color[m.member] = COLORS[i % COLORS.length]; });
    const rows = f.members.map((m) => {
      const pr = m.progress || {};
      const eta = pr.eta_seconds !== null && pr.eta_seconds !== undefined ? dur(pr.eta_seconds) : "-";
      const objective = f.objective && m.final_metrics ? m.final_metrics[f.objective] : undefined;
      return `<tr data-member="${esc(m.member)}" data-winner="${m.winner ? "true" : "false"}"><td><span style="color:${color[m.member]}">&#9632;</span> ` +
        `${m.winner ? `<b>&#9733; ${esc(m.member)}</b> (winner)` : esc(m.member)}</td><td>${badge(m.status)}</td>` +
        `<td>${pr.unit ? `${esc(pr.unit)} ${esc(pr.done === null || pr.done === undefined ? "-" : pr.done)}${pr.total ? " of " + esc(pr.total) : ""}` : "-"}</td>` +
        `<td class="member-eta">${eta}</td>${f.objective ? `<td>${fmt(objective)}</td>` : ""}<td class="muted">${esc(m.job_name)}</td></tr>`;
    }).join("");
    const names = Object.keys(f.metrics || {}).sort(byLoss);
    const blocks = names.map((n) => metricBlock(n, f.metrics[n].map((c) =>
      ({ label: c.member, points: c.points, color: color[c.member], winner: c.winner })), f.axis, "member")).join("");
    return `<div class="card members" data-group="${esc(f.group)}" data-winner="${esc(f.winner || "")}">
      <h2>${f.tuning_job ? `Training jobs of tuning job ${esc(f.tuning_job)}` : "Members side by side"} <span class="muted">${esc(f.group)}: ${plural(f.members.length, "member")}${f.curves_note ? `; ${esc(f.curves_note)}` : ""}</span></h2>
      ${f.winner ? `<p id="members-winner">Winner: <b>&#9733; ${esc(f.winner)}</b>${f.objective ? ` <span class="muted">by ${esc(f.objective)}</span>` : ""}</p>` : ""}
      <table><tr><th>Member</th><th>Status</th><th>Progress</th><th>ETA</th>${f.objective ? `<th>${esc(f.objective)}</th>` : ""}<th>Job</th></tr>${rows}</table>
      <div class="charts">${blocks || '<p class="muted">No metric points yet.</p>'}</div>
    </div>`;
  }

  function jobCard(job) {
    const series = job.metrics && job.metrics.series ? job.metrics.series : {};
    const names = Object.keys(series).sort(byLoss);
    const charts = names.filter((n) => series[n].length).map((n) => {
      const hosts = [...new Set(series[n].map((p) => p.host))];
      return metricBlock(n, hosts.map((host, i) => ({ label: host, points: series[n].filter((p) => p.host === host), color: COLORS[i % COLORS.length] })), job.metrics.axis, "metric");
    }).join("");
    const bound = job.cost_bound_usd, so = job.cost_so_far_usd;
    const pct = bound ? Math.min(100, (100 * (so || 0)) / bound) : 0;
    const timeline = (job.timeline || []).map((t) =>
      `<tr><td>${badge(t.status)}</td><td>${esc(t.start)}</td><td>${esc(t.end || "")}</td><td>${esc(t.message)}</td></tr>`).join("");
    return `<div class="card job" data-job="${esc(job.job_name)}" data-status="${esc(job.status)}">
      <h2>${esc(job.job_name)} ${badge(job.status)} <span class="muted">${esc(job.task_id)}</span>${job.member ? ` <span class="member">member ${job.winner ? "<b>&#9733; " + esc(job.member) + "</b> (winner)" : esc(job.member)}</span>` : ""}</h2>
      <div class="grid">
        <div class="kv"><b>Backend</b>${esc(job.backend)}</div>
        <div class="kv"><b>Secondary status</b>${esc(job.secondary_status)}</div>
        <div class="kv"><b>Hosts</b>${esc((job.hosts || []).join(", "))}${job.processes_per_host ? ` (${plural(job.processes_per_host, "process", "processes")} each)` : ""}</div>
        <div class="kv"><b>Instance</b>${esc(job.instance_type)} &times; ${fmt(job.instance_count)}</div>
        <div class="kv"><b>Elapsed</b>${dur(job.elapsed_seconds)}</div>
        ${progressCells(job.progress, job.status)}
        <div class="kv"><b>Cost so far / bound</b>$${fmt(so, 2)} / $${fmt(bound, 2)}<div class="bar"><div style="width:${pct}%"></div></div></div>
      </div>
      ${job.error ? `<p class="Failed">${esc(job.error)}</p>` : ""}
      ${link(job.mlflow_run_url) ? `<p id="mlflow-run"><a href="${esc(job.mlflow_run_url)}" target="_blank" rel="noopener">MLflow run</a></p>` : ""}
      <h2>Metrics <span class="muted">(${esc((job.metric_definitions || []).join(", ") || "no metric definitions")})</span></h2>
      <div class="charts">${charts || '<p class="muted">No metric points yet.</p>'}</div>
      <h2>Secondary status history</h2>
      <table><tr><th>Status</th><th>Start</th><th>End</th><th>Message</th></tr>${timeline}</table>
    </div>`;
  }

  // only web links: an s3:// audit file is shown, not linked
  const link = (uri) => typeof uri === "string" && /^https?:\/\//.test(uri);

  function sectionCard(s) {
    let html = `<div class="card section" data-group="${esc(s.group)}">`;
    const ck = s.checkpoints || {};
    const rows = (ck.items || []).map((c) =>
      `<tr><td>${esc(c.step)}</td><td>${c.complete ? "complete" : "incomplete"}</td><td>${c.retained ? "retained" : "deleted"}</td>` +
      `<td>${c.promoted ? "<b>promoted</b>" : ""}</td><td>${esc((c.reasons || []).join(", "))}</td></tr>`).join("");
    html += `<h2>Checkpoints <span class="muted">${esc(ck.root || "")}</span></h2>`;
    html += rows ? `<table><tr><th>Step</th><th>State</th><th>Retention</th><th></th><th>Why</th></tr>${rows}</table>` : '<p class="muted">No checkpoint report yet.</p>';
    if (ck.promoted) html += `<p>Promoted: step ${esc(ck.promoted.step)} (${esc(ck.promoted.which)}${ck.promoted.metric ? " " + esc(ck.promoted.metric) : ""}) to <code>${esc(ck.promoted.target_uri || ck.promoted.uri)}</code></p>`;
    const sweep = s.sweep;
    if (sweep) {  // a sweep's pick: every member's standing, the winner first
      const ranked = (sweep.ranking || []).map((r) =>
        `<tr><td>${r.member === sweep.winner ? "<b>" + esc(r.member) + "</b> (winner)" : esc(r.member)}</td><td>${esc(r.value)}</td></tr>`).join("");
      const out = (sweep.excluded || []).map((e) => `<tr><td>${esc(e.member)}</td><td>${esc(e.status)}: ${esc(e.reason)}</td></tr>`).join("");
      html += `<h2 id="sweep-winner">Best of the sweep: ${esc(sweep.winner)} <span class="muted">${esc(sweep.metric)}</span></h2>`;
      html += `<table><tr><th>Member</th><th>${esc(sweep.metric)}</th></tr>${ranked}${out}</table>`;
    }
    const gate = s.gate;
    html += "<h2>Evaluation and quality gate</h2>";
    if (gate) {
      const verdict = gate.passed ? "PASSED" : "REJECTED";
      html += `<p id="gate-verdict" class="verdict">Quality gate: ${badge(gate.passed ? "passed" : "rejected")} <b>${verdict}</b></p>`;
      const checks = (gate.checks || []).map((c) =>
        `<tr><td>${esc(c.metric)}</td><td>${esc(c.check)}</td><td>${badge(c.status === "PASS" ? "passed" : c.status === "FAIL" ? "failed" : "skipped")}</td><td>${esc(c.reason || "")}</td></tr>`).join("");
      html += checks ? `<table class="gate-checks"><tr><th>Metric</th><th>Check</th><th>Result</th><th></th></tr>${checks}</table>` :
        `<ul>${(gate.reasons || []).map((r) => `<li>${esc(r)}</li>`).join("")}</ul>`;
      if (s.plot_svg) html += `<div class="plot">${s.plot_svg}</div>`;
      if (s.report_uri) html += `<p class="muted">Report: <code>${esc(s.report_uri)}</code></p>`;
    } else if (s.evaluation) {
      html += `<pre>${esc(JSON.stringify(s.evaluation.metrics || s.evaluation, null, 1))}</pre>`;
    } else {
      html += '<p class="muted">Not evaluated yet.</p>';
    }
    const reg = s.registration;
    html += "<h2>Registered model</h2>";
    if (reg) {
      const lineage = reg.lineage || {};
      html += `<p id="model-version">Version <b>${esc(reg.version || reg.model_package_version || reg.package_id)}</b> ` +
        `of ${esc(reg.group || reg.model_package_group || "")} ${badge(reg.approval_status)}` +
        (link(reg.audit_uri) ? ` <a id="model-version-link" href="${esc(reg.audit_uri)}" target="_blank" rel="noopener">open in the registry</a>` : "") + "</p>";
      html += `<table>${Object.entries(Object.assign({ package: reg.model_package_arn || reg.package_id, model: reg.model_data_uri }, lineage))
        .filter(([, v]) => v !== null && v !== undefined && v !== "")
        .map(([k, v]) => `<tr><td>${esc(k)}</td><td><code>${esc(typeof v === "object" ? JSON.stringify(v) : v)}</code></td></tr>`).join("")}</table>`;
    } else {
      html += `<p class="muted">${s.register_state === "skipped" ? "Not registered (gate rejected)." : "Not registered yet."}</p>`;
    }
    return html + "</div>";
  }

  function render(data) {
    document.getElementById("title").textContent = `Training: ${data.dag_id}`;
    document.getElementById("subtitle").innerHTML = `run ${esc(data.run_id)} ${badge(data.run_state)}`;
    let jobs = data.jobs || [];
    if (taskId && jobs.some((j) => j.task_id === taskId)) jobs = jobs.filter((j) => j.task_id === taskId);
    let html = (data.members || []).map(membersCard).join("");
    html += jobs.length ? jobs.map(jobCard).join("") : '<p class="muted">No training job in this run (yet).</p>';
    html += (data.sections || []).map(sectionCard).join("");
    root.innerHTML = html;
    root.dataset.updated = String(data.generated_at);
    document.getElementById("live").textContent = data.live ? "live: updating every 2 s" : "run finished";
  }

  async function listRuns() {
    const r = await fetch("api/runs", { credentials: "same-origin" });
    if (!r.ok) { root.innerHTML = `<p class="Failed">${r.status} ${esc(await r.text())}</p>`; return; }
    const runs = (await r.json()).runs;
    root.innerHTML = runs.length ? "<h2>Recent runs with training jobs</h2><ul>" + runs.map((x) =>
      `<li><a href="view?dag_id=${encodeURIComponent(x.dag_id)}&run_id=${encodeURIComponent(x.run_id)}">${esc(x.dag_id)} / ${esc(x.run_id)}</a> <span class="muted">${esc(x.task_id)} ${esc(x.at)}</span></li>`).join("") + "</ul>"
      : '<p class="muted">No run has started a training job yet.</p>';
  }

  async function tick() {
    let again = true;
    try {
      const r = await fetch(`api/run?dag_id=${encodeURIComponent(dagId)}&run_id=${encodeURIComponent(runId)}`, { credentials: "same-origin" });
      if (!r.ok) { root.innerHTML = `<p class="Failed">${r.status} ${esc(await r.text())}</p>`; again = r.status >= 500; }
      else { const data = await r.json(); render(data); again = data.live; }
    } catch (e) { again = true; }
    if (again) setTimeout(tick, 2000);
  }

  if (dagId && runId) tick(); else listRuns();
})();
