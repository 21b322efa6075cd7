import type { Chart } from './model.ts';
import { chartSvg, xml } from './svg.ts';

/** What the page says about where its figures come from. */
export interface PageInfo {
  /** When the tour ran. */
  date: Date;
  /** `floodgate 0.1.0, Node v20.20.2, linux x64`. */
  environment: string;
}

const STYLE = `
body { font: 15px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; padding: 0 1rem; color: #1d232a; background: #fff; }
h1 { font-size: 1.5rem; margin-bottom: 0; }
h2 { font-size: 1.15rem; margin-top: 2.5rem; }
figure { margin: 1rem 0; overflow-x: auto; }
figcaption { color: #56606b; font-size: 0.9rem; }
svg { font: 12px system-ui, sans-serif; max-width: 100%; height: auto; }
svg text { fill: #1d232a; }
.ok { fill: #1a7f37; }
.refused { fill: #cf222e; }
.queued { fill: #c4cbd3; }
.axis { stroke: #8c959f; stroke-width: 1; }
.mark { stroke: #0969da; stroke-width: 1.5; stroke-dasharray: 4 3; }
svg text.mark-label { fill: #0969da; }
svg text.refused-mark, svg text.refused-text { fill: #cf222e; }
svg text.ok-text { fill: #1a7f37; }
.meta { color: #56606b; }
@media (prefers-color-scheme: dark) {
  body { color: #e6edf3; background: #0d1117; }
  svg text { fill: #e6edf3; }
  .queued { fill: #484f58; }
  figcaption, .meta { color: #9198a1; }
}`;

const CAPTIONS: Record<Chart['kind'], string> = {
  events:
    'Each dot is one request, at the time its answer came back on the tour clock; dots in the same instant are stacked.',
  level:
    "One bar per request: the tokens the bucket had left after it, as the response's RateLimit field reported; × marks a refusal.",
  gantt:
    "Grey: the time a request waited in the limiter's queue; coloured: its handler's work; the dashed line: its deadline, counted from arrival.",
};

/**
 * A self-contained HTML page of the tour's charts: inline SVG and an inline stylesheet, no script, nothing
 * loaded from elsewhere, so it opens from disk, from a mail attachment, or behind a strict CSP.
 */
export function renderPage(charts: ReadonlyArray<{ chapter: string; chart: Chart }>, info: PageInfo): string {
  const sections: string[] = [];
  let chapter: string | undefined;
  for (const { chapter: title, chart } of charts) {
    if (title !== chapter) {
      chapter = title;
      sections.push(`<h2>${xml(title)}</h2>`);
    }
    sections.push(
      `<figure>\n<figcaption><strong>${xml(chart.title)}</strong></figcaption>\n${chartSvg(chart)}\n<figcaption>${xml(CAPTIONS[chart.kind])}</figcaption>\n</figure>`,
    );
  }
  if (sections.length === 0) {
    sections.push('<p>The chapters run draw no charts: chapters 3, 4 and 9 do.</p>');
  }
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>floodgate tour: what was measured</title>
<style>${STYLE}
</style>
</head>
<body>
<h1>floodgate tour: what was measured</h1>
<p class="meta">${xml(info.date.toISOString())} · ${xml(info.environment)} · real HTTP requests to local servers; the tour moves its clock forward instead of waiting.</p>
${sections.join('\n')}
</body>
</html>
`;
}
