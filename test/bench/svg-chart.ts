/**
 * A dependency-free SVG line chart for benchmark figures: people would
 * rather look than read. Log scales where the data spans decades.
 */
export interface Series {
  readonly name: string;
  readonly points: readonly (readonly [number, number])[];
  /** Default: the next of a fixed palette. */
  readonly color?: string;
  /** A dashed line (e.g. p99 beside a solid p50 of the same color). */
  readonly dashed?: boolean;
}

export interface ChartOptions {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly Series[];
  readonly logX?: boolean;
  readonly logY?: boolean;
}

const W = 720;
const H = 400;
const M = { left: 70, right: 230, top: 40, bottom: 55 };
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];

export function lineChartSvg(o: ChartOptions): string {
  const xs = o.series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = o.series.flatMap((s) => s.points.map((p) => p[1]));
  const fx = scale(Math.min(...xs), Math.max(...xs), M.left, W - M.right, o.logX === true);
  const fy = scale(o.logY === true ? Math.min(...ys) : 0, Math.max(...ys) * 1.1, H - M.bottom, M.top, o.logY === true);
  const ticks = (lo: number, hi: number, log: boolean): number[] =>
    log ? decades(lo, hi) : Array.from({ length: 6 }, (_, i) => lo + ((hi - lo) * i) / 5);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2 - M.right / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(o.title)}</text>`,
    `<line x1="${M.left}" y1="${H - M.bottom}" x2="${W - M.right}" y2="${H - M.bottom}" stroke="#333"/>`,
    `<line x1="${M.left}" y1="${M.top}" x2="${M.left}" y2="${H - M.bottom}" stroke="#333"/>`,
    `<text x="${(M.left + W - M.right) / 2}" y="${H - 15}" text-anchor="middle">${esc(o.xLabel)}</text>`,
    `<text transform="translate(18 ${(M.top + H - M.bottom) / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`,
  ];
  for (const t of ticks(Math.min(...xs), Math.max(...xs), o.logX === true)) {
    parts.push(`<text x="${fx(t).toFixed(1)}" y="${H - M.bottom + 18}" text-anchor="middle">${fmt(t)}</text>`);
  }
  for (const t of ticks(o.logY === true ? Math.min(...ys) : 0, Math.max(...ys) * 1.1, o.logY === true)) {
    const y = fy(t).toFixed(1);
    parts.push(`<line x1="${M.left}" y1="${y}" x2="${W - M.right}" y2="${y}" stroke="#eee"/>`);
    parts.push(`<text x="${M.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${fmt(t)}</text>`);
  }
  o.series.forEach((s, i) => {
    const color = s.color ?? COLORS[i % COLORS.length]!;
    const dash = s.dashed === true ? ' stroke-dasharray="6 4"' : '';
    const path = s.points.map((p, j) => `${j === 0 ? 'M' : 'L'}${fx(p[0]).toFixed(1)},${fy(p[1]).toFixed(1)}`).join(' ');
    parts.push(`<path d="${path}" fill="none" stroke="${color}" stroke-width="2"${dash}/>`);
    for (const p of s.points) parts.push(`<circle cx="${fx(p[0]).toFixed(1)}" cy="${fy(p[1]).toFixed(1)}" r="3.5" fill="${color}"><title>${esc(s.name)}: ${fmt(p[1])}</title></circle>`);
    const ly = M.top + 10 + i * 20;
    parts.push(`<line x1="${W - M.right + 12}" y1="${ly}" x2="${W - M.right + 32}" y2="${ly}" stroke="${color}" stroke-width="2"${dash}/>`);
    parts.push(`<text x="${W - M.right + 38}" y="${ly}" dominant-baseline="middle">${esc(s.name)}</text>`);
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

function scale(lo: number, hi: number, a: number, b: number, log: boolean): (v: number) => number {
  const t = (v: number): number => (log ? Math.log10(Math.max(v, 1e-9)) : v);
  const [l, h] = [t(lo), t(hi)];
  return (v) => a + ((t(v) - l) / (h - l || 1)) * (b - a);
}

function decades(lo: number, hi: number): number[] {
  const out: number[] = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e += 1) out.push(10 ** e);
  const inside = out.filter((v) => v >= lo * 0.999 && v <= hi * 1.001);
  // Always label both ends, so a range inside one decade still reads.
  return [...new Set([lo, ...inside, hi])].sort((a, b) => a - b);
}

function fmt(v: number): string {
  if (v >= 1_000_000) return `${v / 1_000_000}M`;
  if (v >= 1_000) return `${Math.round(v / 100) / 10}k`;
  if (v >= 10) return String(Math.round(v));
  // Below 1, two significant digits: an in-memory store's 0.04 ms must not read 0.
  return v >= 1 || v <= 0 ? String(Math.round(v * 10) / 10) : String(Number(v.toPrecision(2)));
}

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** One cell of a verdict grid: its text and how it reads. */
export interface GridCell {
  readonly text: string;
  readonly tone: 'good' | 'bad' | 'neutral';
}

export interface GridOptions {
  readonly title: string;
  readonly columns: readonly string[];
  readonly rows: readonly { readonly name: string; readonly cells: readonly GridCell[] }[];
  /** A line under the grid (what the colors mean). */
  readonly legend?: string;
}

const TONE = { good: '#d9f2d9', bad: '#f8d0d0', neutral: '#eeeeee' } as const;

/** A table as an SVG: a row per store, a column per case, each cell colored by its tone. */
export function verdictGridSvg(o: GridOptions): string {
  const nameW = 330;
  const cellW = 190;
  const rowH = 34;
  const top = 70;
  const width = nameW + cellW * o.columns.length + 20;
  const height = top + rowH * o.rows.length + 50;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">${esc(o.title)}</text>`,
  ];
  o.columns.forEach((c, j) => parts.push(`<text x="${nameW + cellW * j + cellW / 2}" y="${top - 12}" text-anchor="middle" font-weight="bold">${esc(c)}</text>`));
  o.rows.forEach((row, i) => {
    const y = top + rowH * i;
    parts.push(`<text x="10" y="${y + rowH / 2}" dominant-baseline="middle">${esc(row.name)}</text>`);
    row.cells.forEach((cell, j) => {
      const x = nameW + cellW * j;
      parts.push(`<rect x="${x + 2}" y="${y + 2}" width="${cellW - 4}" height="${rowH - 4}" rx="4" fill="${TONE[cell.tone]}" stroke="#bbb"/>`);
      const short = cell.text.length > 30 ? `${cell.text.slice(0, 29)}…` : cell.text;
      parts.push(`<text x="${x + cellW / 2}" y="${y + rowH / 2}" text-anchor="middle" dominant-baseline="middle"><title>${esc(cell.text)}</title>${esc(short)}</text>`);
    });
  });
  if (o.legend !== undefined) parts.push(`<text x="10" y="${height - 18}" font-size="11" fill="#444">${esc(o.legend)}</text>`);
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
