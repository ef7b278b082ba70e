// The --html page: one self-contained file (works offline, opened from disk). The report's JSON is
// embedded as data, uPlot (data/vendor/uplot, MIT) draws the timeline: drag to zoom, double-click
// to reset, hover shows the event (allocation, size, stack) under the cursor. Tables come from the
// same JSON, so this file only lays out what the analyses computed.
#include <algorithm>

#include <fmt/format.h>

#include "core/embedded.h"
#include "core/units.h"
#include "report/snapshot_render.h"

namespace oomdoc {

namespace {

// Text inside <script>/<style> must not close the element early. For the vendored uPlot code and
// CSS, which hold no "<!--" or "<script" (that would need escape_json_for_script's care).
std::string escape_for_script(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') {
      out += "<\\/";
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// JSON inside <script type="application/json">: a string from the snapshot (a frame's filename)
// holding "</script>" would end the element, and "<!--<script>" would make the parser swallow the rest
// of the page. Writing every <, > and & as a \u escape leaves no markup at all; JSON.parse reads the
// same text back. These characters only occur inside JSON strings, where such escapes are valid.
// U+2028/U+2029 are escaped too, for any reader that takes the JSON as JavaScript source.
std::string escape_json_for_script(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  constexpr std::string_view kLineSeparator = "\xE2\x80\xA8", kParagraphSeparator = "\xE2\x80\xA9";  // UTF-8
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (json.substr(i, 3) == kLineSeparator) {
      out += "\\u2028";
      i += 2;
    } else if (json.substr(i, 3) == kParagraphSeparator) {
      out += "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string escape_html(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Every "<name>_bytes" number gets a "<name>_bytes_text" sibling written by format_bytes, so the
// page shows the terminal's figures to the last digit (a JavaScript formatter rounds ties and the
// 1023.995 carry differently: 1152 B is "1.12 KiB" here, "1.13 KiB" with toFixed).
void add_byte_texts(Json& j) {
  if (j.is_array()) {
    for (Json& item : j) add_byte_texts(item);
    return;
  }
  if (!j.is_object()) return;
  Json out = Json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    add_byte_texts(it.value());
    out[it.key()] = std::move(it.value());
    if (it.key().ends_with("_bytes") && out[it.key()].is_number_integer()) {
      const Json& n = out[it.key()];
      out[it.key() + "_text"] = n.is_number_unsigned() ? format_bytes(n.get<uint64_t>())
                                                       : format_signed_bytes(n.get<int64_t>());
    }
  }
  j = std::move(out);
}

// The timeline's live and reserved figures as text, per device and point (the numbers themselves
// are in the report's devices[].timeline).
Json timeline_texts(const SnapshotReport& r) {
  Json devices = Json::array();
  for (const DeviceReport& d : r.devices) {
    Json live_text = Json::array(), reserved_text = Json::array();
    for (const TimelinePoint& p : d.timeline.points) {
      live_text.push_back(format_signed_bytes(p.live_bytes));
      reserved_text.push_back(format_signed_bytes(p.reserved_bytes));
    }
    devices.push_back({{"live_text", live_text}, {"reserved_text", reserved_text}});
  }
  return devices;
}

// The first rows of each device's segment table as objects with their texts; the page lists no
// more, so the embedded report drops its segment columns (a file can hold 100,000 segments).
constexpr size_t kHtmlSegmentRows = 100;
Json segment_rows(const SnapshotReport& r) {
  Json devices = Json::array();
  for (const DeviceReport& d : r.devices) {
    Json rows = Json::array();
    const auto& segments = d.fragmentation.segments;
    for (size_t i = 0; i < std::min(kHtmlSegmentRows, segments.size()); ++i) {
      const SegmentUse& s = segments[i];
      rows.push_back({{"address", fmt::format("{:#x}", s.address)}, {"size_bytes", s.size_bytes},
                      {"pool", segment_pool_text(s)},
                      {"stream", s.stream}, {"allocated_bytes", s.allocated_bytes}, {"free_bytes", s.free_bytes},
                      {"largest_free_block_bytes", s.largest_free_block_bytes}, {"blocks", s.blocks},
                      {"free_blocks", s.free_blocks}, {"unusable_free_bytes", s.unusable_free_bytes}});
    }
    add_byte_texts(rows);
    devices.push_back(std::move(rows));
  }
  return devices;
}

// The table's heading and summary line per device, worded as the terminal words them.
Json segment_texts(const SnapshotReport& r) {
  Json devices = Json::array();
  for (const DeviceReport& d : r.devices) {
    devices.push_back({{"heading", fragmentation_heading_text(d.fragmentation)},
                       {"summary", fragmentation_summary_text(d.fragmentation)}});
  }
  return devices;
}

constexpr std::string_view kPage = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>oomdoc snapshot: {title}</title>
<style>{uplot_css}</style>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }}
h1 {{ font-size: 20px; }} h2 {{ font-size: 17px; margin-top: 28px; }} h3 {{ font-size: 15px; }}
.verdict {{ font-size: 16px; font-weight: 600; padding: 10px 14px; background: #fff4e5; border-left: 4px solid #f0883e; }}
table {{ border-collapse: collapse; margin: 8px 0; }}
td, th {{ border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.hover {{ font-family: ui-monospace, monospace; min-height: 3em; white-space: pre-wrap; background: #f6f8fa; padding: 6px; }}
.warning {{ color: #b35900; font-weight: 600; }}
.muted {{ color: #666; }} .frames {{ font-family: ui-monospace, monospace; font-size: 12px; }}
td {{ white-space: pre-line; }}
</style></head>
<body data-plots-drawn="0" data-console-errors="0">
<script>
// Counted for the headless test: any error or console.error on this page is a failure.
(function() {{
  var n = 0, mark = function() {{ document.body.dataset.consoleErrors = String(++n); }};
  window.addEventListener('error', mark);
  var orig = console.error; console.error = function() {{ mark(); orig.apply(console, arguments); }};
}})();
</script>
<h1>oomdoc snapshot</h1>
<div class="verdict" id="verdict"></div>
<div id="warnings"></div>
<p class="muted" id="source"></p>
<div id="devices"></div>
<h2>Allocator settings</h2><div id="settings"></div>
<p class="muted">Made by oomdoc {version}. Charts: uPlot (MIT licence, inlined below).</p>
<script type="application/json" id="report">{report_json}</script>
<script type="application/json" id="timeline-texts">{timeline_texts}</script>
<script type="application/json" id="segment-rows">{segment_rows}</script>
<script type="application/json" id="segment-texts">{segment_texts}</script>
<script>
/* uPlot {uplot_version} | MIT License | Copyright (c) 2022 Leon Sorokin | https://github.com/leeoniya/uPlot
{uplot_license}
*/
{uplot_js}
</script>
<script>
(function() {{
  var report = JSON.parse(document.getElementById('report').textContent);
  var timelineTexts = JSON.parse(document.getElementById('timeline-texts').textContent);
  var segmentRows = JSON.parse(document.getElementById('segment-rows').textContent);
  var segmentTexts = JSON.parse(document.getElementById('segment-texts').textContent);
  function el(tag, attrs, text) {{
    var e = document.createElement(tag);
    for (var k in (attrs || {{}})) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }}
  // Axis ticks only: every figure in the tables and the hover is the "_text" that oomdoc's own
  // format_bytes wrote (see add_byte_texts), the same as the terminal report.
  function bytes(n) {{
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0, v = Math.abs(n);
    while (v >= 1024 && i < u.length - 1) {{ v /= 1024; i++; }}
    return (n < 0 ? '-' : '') + (i === 0 ? v.toFixed(0) : v.toFixed(2)) + ' ' + u[i];
  }}
  function bt(o, key) {{
    var text = o[key + '_text'];
    return text === undefined ? 'unknown' : text;
  }}
  function table(headers, rows, numeric) {{
    var t = el('table'), tr = el('tr');
    headers.forEach(function(h) {{ tr.appendChild(el('th', {{}}, h)); }});
    t.appendChild(tr);
    rows.forEach(function(r) {{
      var row = el('tr');
      r.forEach(function(c, i) {{ row.appendChild(el('td', numeric && numeric[i] ? {{'class': 'num'}} : {{}}, c)); }});
      t.appendChild(row);
    }});
    return t;
  }}
  function stackTable(groups) {{
    return table(['live', 'allocations', 'stack (first user frames)', 'frames'], groups.map(function(g) {{
      return [bt(g, 'live_bytes'), String(g.allocations), g.stack, g.frames.join('\n')];
    }}), [true, true, false, false]);
  }}
  document.getElementById('verdict').textContent = report.verdict;
  report.warnings.forEach(function(w) {{
    document.getElementById('warnings').appendChild(el('p', {{'class': 'warning'}}, 'warning: ' + w));
  }});
  document.getElementById('source').textContent = report.file + ': ' + report.format + ', ' + report.layout +
      '; ' + report.distinct_stacks + (report.distinct_stacks === 1 ? ' distinct stack' : ' distinct stacks');
  var root = document.getElementById('devices'), drawn = 0;
  report.devices.forEach(function(d, di) {{
    var sec = el('section', {{'id': 'device-' + d.device}});
    sec.appendChild(el('h2', {{}}, 'cuda:' + d.device));
    sec.appendChild(table(['segments', 'reserved', 'allocated', 'active', 'requested', 'inactive (cached)',
                           'largest free block', 'releasable', 'stranded', 'trace events', 'baseline', 'trace peak'],
      [[String(d.segments), bt(d, 'reserved_bytes'), bt(d, 'allocated_bytes'), bt(d, 'active_bytes'),
        bt(d, 'requested_bytes'), bt(d, 'inactive_bytes'), bt(d, 'largest_free_block_bytes'),
        bt(d, 'releasable_bytes'), bt(d, 'stranded_bytes'), String(d.trace_events), bt(d, 'baseline_bytes'),
        '+' + bt(d, 'peak_live_bytes')]], [true, true, true, true, true, true, true, true, true, true, true, true]));
    if (d.trace_truncated) sec.appendChild(el('p', {{'class': 'muted'}}, 'Trace truncated: ' + d.truncation_reason));
    var tl = d.timeline, tt = timelineTexts[di];
    if (tl && tl.event_index.length > 1) {{
      sec.appendChild(el('h3', {{}}, 'Timeline (drag to zoom, double-click to reset)'));
      var plot = el('div', {{'class': 'plot', 'id': 'plot-' + d.device}});
      var hover = el('div', {{'class': 'hover', 'id': 'hover-' + d.device}}, 'Hover over the plot to see the event.');
      sec.appendChild(plot); sec.appendChild(hover);
      root.appendChild(sec);
      // Ticks at whole binary sizes (1, 2, 4 ... 512 KiB, MiB, GiB), as the labels are binary.
      var binaryIncrs = [];
      for (var p = 0; p < 6; p++) for (var m = 1; m < 1024; m *= 2) binaryIncrs.push(m * Math.pow(1024, p));
      // Seconds from the first event when every entry carries time_us, else the event index.
      var bySeconds = tl.x_axis === 'seconds';
      var opts = {{
        width: Math.min(1100, window.innerWidth - 60), height: 320,
        scales: {{ x: {{ time: false }} }},
        axes: [{{ label: bySeconds ? 'seconds from the first trace event (time_us)' : 'trace event index (the trace has no time_us)' }},
               {{ label: 'bytes', size: 80, incrs: binaryIncrs, values: function(u, vals) {{ return vals.map(bytes); }} }}],
        series: [{{ label: bySeconds ? 'seconds' : 'event' }},
                 {{ label: 'live (requested)', stroke: '#1f77b4', fill: 'rgba(31,119,180,0.15)', value: function(u, v, si, i) {{ return i === null || i === undefined ? '--' : tt.live_text[i]; }} }},
                 {{ label: 'reserved', stroke: '#d62728', value: function(u, v, si, i) {{ return i === null || i === undefined ? '--' : tt.reserved_text[i]; }} }}],
        hooks: {{
          draw: [function() {{ document.body.dataset.plotsDrawn = String(++drawn); }}],
          setCursor: [function(u) {{
            var i = u.cursor.idx;
            if (i === null || i === undefined) return;
            var t = tl.time_us[i];
            hover.textContent = 'event ' + tl.event_index[i] +
              (tl.seconds[i] !== null ? ' at ' + tl.seconds[i].toFixed(6) + ' s' : '') + (t !== null ? ' (time_us ' + t + ')' : '') +
              ': ' + tl.action[i] + ' ' + tl.size_bytes[i] + ' bytes\nlive ' + tt.live_text[i] + ', reserved ' + tt.reserved_text[i] +
              '\n' + (tl.stack[i] || '');
          }}]
        }}
      }};
      new uPlot(opts, [bySeconds ? tl.seconds : tl.event_index, tl.live_bytes, tl.reserved_bytes], plot);
    }} else {{
      root.appendChild(sec);
    }}
    if (d.ooms.length) {{
      d.ooms.forEach(function(o) {{
        sec.appendChild(el('h3', {{}}, 'OOM at event ' + o.event_index + ': ' + o.verdict));
        sec.appendChild(el('p', {{}}, o.explanation));
        sec.appendChild(table(['requested', 'device free', 'live', 'reserved', 'largest free block'],
          [[bt(o, 'requested_bytes'), bt(o, 'device_free_bytes'), bt(o, 'live_bytes'), bt(o, 'reserved_bytes'),
            bt(o, 'largest_free_block_bytes')]], [true, true, true, true, true]));
        sec.appendChild(el('div', {{'class': 'frames'}}, 'Failing allocation: ' + o.stack.join(' | ')));
        sec.appendChild(stackTable(o.top_stacks));
        sec.appendChild(el('p', {{}}, 'Fixes: ' + o.fixes.map(function(f) {{ return f.title; }}).join('; ')));
      }});
    }}
    var fr = d.fragmentation, shown = segmentRows[di], texts = segmentTexts[di];
    if (fr.segment_count) {{
      sec.appendChild(el('h3', {{'class': 'segments'}}, texts.heading.charAt(0).toUpperCase() + texts.heading.slice(1)));
      sec.appendChild(el('p', {{}}, fr.explanation));
      sec.appendChild(el('p', {{}}, texts.summary + '.'));
      var segTable = table(['address', 'size', 'pool', 'stream', 'allocated', 'free', 'largest free block', 'blocks',
                            'free blocks', fr.at === 'oom' ? 'free in pieces < request' : 'stranded free'],
        shown.map(function(g) {{
          return [g.address, bt(g, 'size_bytes'), g.pool, String(g.stream), bt(g, 'allocated_bytes'),
                  bt(g, 'free_bytes'), bt(g, 'largest_free_block_bytes'), String(g.blocks), String(g.free_blocks),
                  bt(g, 'unusable_free_bytes')];
        }}), [false, true, false, true, true, true, true, true, true, true]);
      segTable.setAttribute('id', 'segments-' + d.device);
      sec.appendChild(segTable);
      if (fr.segment_count > shown.length) {{
        sec.appendChild(el('p', {{'class': 'muted'}}, (fr.segment_count - shown.length) +
            ' more segments (all of them in --json).'));
      }}
    }}
    sec.appendChild(el('h3', {{}}, d.top_stacks_when === 'peak' ? 'Top stacks at the trace peak' : 'Top stacks live at dump time'));
    sec.appendChild(stackTable(d.top_stacks));
    if (d.leaks.length) {{
      sec.appendChild(el('h3', {{}}, 'Possible leaks (' + d.iterations_from + ')'));
      sec.appendChild(table(['live', 'allocations', 'iterations', 'stack'], d.leaks.map(function(l) {{
        return [bt(l, 'live_bytes'), String(l.allocations), String(l.iterations), l.stack];
      }}), [true, true, true, false]));
    }}
  }});
  var settings = document.getElementById('settings');
  if (report.allocator_settings.length) {{
    settings.appendChild(table(['key', 'value', 'meaning'], report.allocator_settings.map(function(s) {{
      return [s.key, s.value, s.meaning]; }})));
  }} else {{
    settings.appendChild(el('p', {{'class': 'muted'}}, 'No allocator settings in this snapshot.'));
  }}
}})();
</script>
</body></html>
)HTML";

}  // namespace

std::string render_snapshot_html(const SnapshotReport& r) {
  Json report = snapshot_report_json(r);
  for (Json& device : report["devices"]) device["fragmentation"].erase("segments");  // see segment_rows
  add_byte_texts(report);
  auto dump = [](const Json& j) {
    return escape_json_for_script(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  };
  std::string_view js = embedded("vendor/uplot/uPlot.iife.min.js").value_or("");
  std::string_view css = embedded("vendor/uplot/uPlot.min.css").value_or("");
  std::string_view license = embedded("vendor/uplot/LICENSE").value_or("");
  return fmt::format(fmt::runtime(kPage), fmt::arg("title", escape_html(r.file)), fmt::arg("uplot_css", escape_for_script(css)),
                     fmt::arg("version", OOMDOC_VERSION), fmt::arg("report_json", dump(report)),
                     fmt::arg("timeline_texts", dump(timeline_texts(r))), fmt::arg("segment_rows", dump(segment_rows(r))),
                     fmt::arg("segment_texts", dump(segment_texts(r))),
                     fmt::arg("uplot_version", "1.6.32"), fmt::arg("uplot_license", escape_for_script(license)),
                     fmt::arg("uplot_js", escape_for_script(js)));
}

}  // namespace oomdoc
