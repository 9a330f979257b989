/** A small dependency-free SVG line chart: best-effort, eventual and the true count of one key over time. */

export interface Series {
    readonly name: string;
    readonly color: string;
    readonly points: ReadonlyArray<readonly [number, number]>;
}

export function lineChartSvg(title: string, series: readonly Series[], width = 900, height = 420): string {
    const pad = { left: 60, right: 160, top: 40, bottom: 50 };
    const all = series.flatMap((s) => s.points);
    const xs = all.map(([x]) => x);
    const ys = all.map(([, y]) => y);
    const x0 = Math.min(...xs, 0);
    const x1 = Math.max(...xs, x0 + 1);
    const y0 = Math.min(0, ...ys);
    const y1 = Math.max(1, ...ys);
    const sx = (x: number) => pad.left + ((x - x0) / (x1 - x0)) * (width - pad.left - pad.right);
    const sy = (y: number) => height - pad.bottom - ((y - y0) / (y1 - y0)) * (height - pad.top - pad.bottom);
    const esc = (s: string) => s.replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);
    const ticks = (lo: number, hi: number, n: number) => Array.from({ length: n + 1 }, (_, i) => lo + ((hi - lo) * i) / n);
    const lines = series
        .map((s) => {
            const d = s.points.map(([x, y], i) => `${i === 0 ? "M" : "L"}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(" ");
            return `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.6"/>`;
        })
        .join("\n");
    const legend = series
        .map(
            (s, i) =>
                `<rect x="${width - pad.right + 15}" y="${pad.top + i * 22}" width="14" height="4" fill="${s.color}"/><text x="${width - pad.right + 35}" y="${pad.top + i * 22 + 6}" font-size="13">${esc(s.name)}</text>`,
        )
        .join("\n");
    const xTicks = ticks(x0, x1, 6)
        .map(
            (t) =>
                `<text x="${sx(t).toFixed(1)}" y="${height - pad.bottom + 18}" font-size="11" text-anchor="middle">${(t / 1000).toFixed(1)}s</text>`,
        )
        .join("");
    const yTicks = ticks(y0, y1, 5)
        .map(
            (t) =>
                `<text x="${pad.left - 8}" y="${sy(t).toFixed(1)}" font-size="11" text-anchor="end">${Math.round(t)}</text><line x1="${pad.left}" x2="${width - pad.right}" y1="${sy(t).toFixed(1)}" y2="${sy(t).toFixed(1)}" stroke="#eee"/>`,
        )
        .join("");
    return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="${pad.left}" y="24" font-size="15">${esc(title)}</text>
${yTicks}
<line x1="${pad.left}" x2="${width - pad.right}" y1="${height - pad.bottom}" y2="${height - pad.bottom}" stroke="#333"/>
<line x1="${pad.left}" x2="${pad.left}" y1="${pad.top}" y2="${height - pad.bottom}" stroke="#333"/>
${xTicks}
${lines}
${legend}
</svg>
`;
}
