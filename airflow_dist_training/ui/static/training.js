// The Training view: fetches api/run every 2 s while the run is live and draws plain SVG.
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

  // One line chart per metric; a polyline per host. data-points / data-epochs (and each polyline's
  // data-host / data-points) are read by tests.
  function chart(name, points, axis) {
    const W = 420, H = 220, L = 52, R = 12, T = 24, B = 34;
    const xs = points.map((p) => p.x), ys = points.map((p) => p.value);
    let x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
    if (x1 === x0) { x1 = x0 + 1; }
    if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
    const pad = (y1 - y0) * 0.08; y0 -= pad; y1 += pad;
    const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
    const sy = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
    const hosts = [...new Set(points.map((p) => p.host))];
    let svg = `<svg class="chart metric-chart" data-metric="${esc(name)}" data-points="${points.length}" ` +
      `data-epochs="${esc([...new Set(points.map((p) => p.x))].length)}" width="${W}" height="${H}" ` +
      `viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(name)}">`;
    svg += `<text x="${L}" y="16" font-size="13" font-weight="600">${esc(name)}</text>`;
    for (let i = 0; i <= 4; i++) {
      const yv = y0 + ((y1 - y0) * i) / 4, y = sy(yv);
      svg += `<line x1="${L}" x2="${W - R}" y1="${y}" y2="${y}" stroke="#f3f4f6"/>`;
      svg += `<text x="${L - 6}" y="${y + 4}" font-size="10" text-anchor="end" fill="#6b7280">${yv.toPrecision(3)}</text>`;
    }
    for (let i = 0; i <= 4; i++) {
      const xv = x0 + ((x1 - x0) * i) / 4;
      svg += `<text x="${sx(xv)}" y="${H - 18}" font-size="10" text-anchor="middle" fill="#6b7280">${axis === "epoch" ? Math.round(xv * 10) / 10 : Math.round(xv)}</text>`;
    }
    svg += `<text x="${(L + W - R) / 2}" y="${H - 4}" font-size="11" text-anchor="middle" fill="#6b7280">${axis === "epoch" ? "epoch" : "seconds"}</text>`;
    hosts.forEach((host, i) => {
      const pts = points.filter((p) => p.host === host);
      const color = COLORS[i % COLORS.length];
      svg += `<polyline data-host="${esc(host)}" data-points="${pts.length}" fill="none" stroke="${color}" stroke-width="2" points="${pts.map((p) => `${sx(p.x).toFixed(1)},${sy(p.value).toFixed(1)}`).join(" ")}"/>`;
      pts.forEach((p) => { svg += `<circle class="pt" cx="${sx(p.x).toFixed(1)}" cy="${sy(p.value).toFixed(1)}" r="2.5" fill="${color}"><title>${esc(host)} ${axis} ${p.x}: ${p.value}</title></circle>`; });
      svg += `<text x="${W - R}" y="${16 + i * 12}" font-size="10" text-anchor="end" fill="${color}">${esc(host)}</text>`;
    });
    return svg + "</svg>";
  }

  function jobCard(job) {
    const series = job.metrics && job.metrics.series ? job.metrics.series : {};
    const names = Object.keys(series).sort((a, b) => (b.includes("loss") - a.includes("loss")) || a.localeCompare(b));
    const charts = names.filter((n) => series[n].length).map((n) => chart(n, series[n], job.metrics.axis)).join("");
    const bound = job.cost_bound_usd, so = job.cost_so_far_usd;
    const pct = bound ? Math.min(100, (100 * (so || 0)) / bound) : 0;
    const timeline = (job.timeline || []).map((t) =>
      `<tr><td>${badge(t.status)}</td><td>${esc(t.start)}</td><td>${esc(t.end || "")}</td><td>${esc(t.message)}</td></tr>`).join("");
    return `<div class="card job" data-job="${esc(job.job_name)}" data-status="${esc(job.status)}">
      <h2>${esc(job.job_name)} ${badge(job.status)} <span class="muted">${esc(job.task_id)}</span></h2>
      <div class="grid">
        <div class="kv"><b>Backend</b>${esc(job.backend)}</div>
        <div class="kv"><b>Secondary status</b>${esc(job.secondary_status)}</div>
        <div class="kv"><b>Hosts</b>${esc((job.hosts || []).join(", "))}${job.processes_per_host ? ` (${job.processes_per_host} processes each)` : ""}</div>
        <div class="kv"><b>Instance</b>${esc(job.instance_type)} &times; ${fmt(job.instance_count)}</div>
        <div class="kv"><b>Elapsed</b>${dur(job.elapsed_seconds)}</div>
        <div class="kv"><b>Cost so far / bound</b>$${fmt(so, 2)} / $${fmt(bound, 2)}<div class="bar"><div style="width:${pct}%"></div></div></div>
      </div>
      ${job.error ? `<p class="Failed">${esc(job.error)}</p>` : ""}
      <h2>Metrics <span class="muted">(${esc((job.metric_definitions || []).join(", ") || "no metric definitions")})</span></h2>
      <div class="charts">${charts || '<p class="muted">No metric points yet.</p>'}</div>
      <h2>Secondary status history</h2>
      <table><tr><th>Status</th><th>Start</th><th>End</th><th>Message</th></tr>${timeline}</table>
    </div>`;
  }

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
        `of ${esc(reg.group || reg.model_package_group || "")} ${badge(reg.approval_status)}</p>`;
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
    let html = jobs.length ? jobs.map(jobCard).join("") : '<p class="muted">No training job in this run (yet).</p>';
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
