/**
 * The sweep's charts as standalone SVG: line charts over a linear or base-2 logarithmic x axis, and
 * grouped bar charts. Pure functions of their input: the same figures always draw the same bytes.
 */

export interface Series {
    readonly name: string;
    readonly color: string;
    readonly points: ReadonlyArray<readonly [number, number]>;
    readonly dashed?: boolean;
}

export interface LineChart {
    readonly title: string;
    readonly xLabel: string;
    readonly yLabel: string;
    readonly xScale: "linear" | "log2";
    readonly series: readonly Series[];
    /** Horizontal reference lines, drawn dashed and labelled at the right. */
    readonly references?: ReadonlyArray<{ readonly y: number; readonly label: string }>;
}

export interface BarChart {
    readonly title: string;
    readonly yLabel: string;
    readonly groups: ReadonlyArray<{
        readonly label: string;
        readonly bars: ReadonlyArray<{ readonly name: string; readonly value: number }>;
    }>;
    readonly colors: Readonly<Record<string, string>>;
}

const WIDTH = 900;
const HEIGHT = 440;
const LEFT = 70;
const RIGHT = 640;
const TOP = 40;
const BOTTOM = 370;

export function escapeXml(text: string): string {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** A round step for about `count` ticks over [0, max]. */
export function niceStep(max: number, count = 5): number {
    if (!(max > 0)) {
        return 1;
    }
    const raw = max / count;
    const magnitude = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw)!;
    return step;
}

function fmt(n: number): string {
    return Number.isInteger(n) ? String(n) : String(Math.round(n * 1000) / 1000);
}

function header(title: string): string[] {
    return [
        `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif">`,
        `<rect width="100%" height="100%" fill="white"/>`,
        `<text x="${LEFT}" y="24" font-size="15">${escapeXml(title)}</text>`,
    ];
}

function yAxis(out: string[], yMax: number, yLabel: string): (v: number) => number {
    const step = niceStep(yMax);
    const top = Math.ceil(yMax / step) * step || step;
    const y = (v: number) => BOTTOM - (v / top) * (BOTTOM - TOP);
    for (let v = 0; v <= top + step / 2; v += step) {
        out.push(
            `<line x1="${LEFT}" x2="${RIGHT}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#eee"/>` +
                `<text x="${LEFT - 6}" y="${(y(v) + 4).toFixed(1)}" font-size="11" text-anchor="end">${fmt(v)}</text>`,
        );
    }
    out.push(`<line x1="${LEFT}" x2="${LEFT}" y1="${TOP}" y2="${BOTTOM}" stroke="#333"/>`);
    out.push(`<line x1="${LEFT}" x2="${RIGHT}" y1="${BOTTOM}" y2="${BOTTOM}" stroke="#333"/>`);
    out.push(
        `<text x="16" y="${(TOP + BOTTOM) / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 16 ${(TOP + BOTTOM) / 2})">${escapeXml(yLabel)}</text>`,
    );
    return y;
}

function legend(out: string[], entries: ReadonlyArray<{ name: string; color: string; dashed?: boolean }>): void {
    entries.forEach((e, i) => {
        const y = TOP + i * 22;
        out.push(
            `<line x1="${RIGHT + 20}" x2="${RIGHT + 44}" y1="${y}" y2="${y}" stroke="${e.color}" stroke-width="3"${e.dashed ? ' stroke-dasharray="6 4"' : ""}/>` +
                `<text x="${RIGHT + 50}" y="${y + 4}" font-size="12">${escapeXml(e.name)}</text>`,
        );
    });
}

export function lineChartSvg(chart: LineChart): string {
    const out = header(chart.title);
    const all = chart.series.flatMap((s) => s.points);
    const refs = chart.references ?? [];
    const yMax = Math.max(0, ...all.map(([, v]) => v), ...refs.map((r) => r.y)) * 1.05;
    const y = yAxis(out, yMax, chart.yLabel);
    const tx = (v: number) => (chart.xScale === "log2" ? Math.log2(v) : v);
    const xs = all.map(([v]) => tx(v));
    const xMin = chart.xScale === "log2" ? Math.min(...xs) : Math.min(0, ...xs);
    const widest = Math.max(...xs);
    const xMax = widest > xMin ? widest : xMin + 1;
    const x = (v: number) => LEFT + ((tx(v) - xMin) / (xMax - xMin)) * (RIGHT - LEFT);
    const ticks = [...new Set(all.map(([v]) => v))].sort((a, b) => a - b);
    for (const t of ticks) {
        out.push(`<text x="${x(t).toFixed(1)}" y="${BOTTOM + 16}" font-size="11" text-anchor="middle">${fmt(t)}</text>`);
    }
    out.push(`<text x="${(LEFT + RIGHT) / 2}" y="${BOTTOM + 36}" font-size="12" text-anchor="middle">${escapeXml(chart.xLabel)}</text>`);
    for (const r of refs) {
        out.push(
            `<line x1="${LEFT}" x2="${RIGHT}" y1="${y(r.y).toFixed(1)}" y2="${y(r.y).toFixed(1)}" stroke="#999" stroke-dasharray="3 3"/>` +
                `<text x="${RIGHT - 4}" y="${(y(r.y) - 4).toFixed(1)}" font-size="11" text-anchor="end" fill="#666">${escapeXml(r.label)}</text>`,
        );
    }
    for (const s of chart.series) {
        const points = [...s.points].sort((a, b) => a[0] - b[0]);
        if (points.length === 0) {
            continue;
        }
        const d = points.map(([px, py], i) => `${i === 0 ? "M" : "L"}${x(px).toFixed(1)},${y(py).toFixed(1)}`).join(" ");
        out.push(
            `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ""}/>` +
                points.map(([px, py]) => `<circle cx="${x(px).toFixed(1)}" cy="${y(py).toFixed(1)}" r="3" fill="${s.color}"/>`).join(""),
        );
    }
    legend(out, chart.series);
    out.push("</svg>");
    return `${out.join("\n")}\n`;
}

export function barChartSvg(chart: BarChart): string {
    const out = header(chart.title);
    const values = chart.groups.flatMap((g) => g.bars.map((b) => b.value));
    const y = yAxis(out, Math.max(0, ...values) * 1.1, chart.yLabel);
    const groupWidth = (RIGHT - LEFT) / Math.max(1, chart.groups.length);
    chart.groups.forEach((g, gi) => {
        const barWidth = (groupWidth * 0.8) / Math.max(1, g.bars.length);
        g.bars.forEach((b, bi) => {
            const x0 = LEFT + gi * groupWidth + groupWidth * 0.1 + bi * barWidth;
            out.push(
                `<rect x="${x0.toFixed(1)}" y="${y(b.value).toFixed(1)}" width="${(barWidth - 2).toFixed(1)}" height="${(BOTTOM - y(b.value)).toFixed(1)}" fill="${chart.colors[b.name] ?? "#888"}"/>` +
                    `<text x="${(x0 + barWidth / 2).toFixed(1)}" y="${(y(b.value) - 4).toFixed(1)}" font-size="11" text-anchor="middle">${fmt(b.value)}</text>`,
            );
        });
        out.push(
            `<text x="${(LEFT + gi * groupWidth + groupWidth / 2).toFixed(1)}" y="${BOTTOM + 16}" font-size="12" text-anchor="middle">${escapeXml(g.label)}</text>`,
        );
    });
    legend(
        out,
        Object.entries(chart.colors).map(([name, color]) => ({ name, color })),
    );
    out.push("</svg>");
    return `${out.join("\n")}\n`;
}
