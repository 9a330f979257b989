/**
 * A small dependency-free SVG chart: best-effort, eventual and the true count of one or more keys over
 * time, one panel per key. Lines are steps (a count holds its value until the next observation), so
 * nothing is drawn between observations that did not happen, and each series ends at its last sample.
 * Axis ticks are round numbers (1, 2 or 5 times a power of ten). A panel may mark instants (a key's
 * threshold crossings) with dashed vertical lines, each labelled.
 */

export interface Series {
    readonly name: string;
    readonly color: string;
    readonly points: ReadonlyArray<readonly [number, number]>;
}

/** An instant marked on a panel: a dashed vertical line at `x`, labelled at its top. */
export interface Mark {
    readonly x: number;
    readonly label: string;
    readonly color: string;
}

export interface Panel {
    readonly title: string;
    readonly series: readonly Series[];
    readonly marks?: readonly Mark[];
}

/** A round step for about `count` intervals over `span`: 1, 2 or 5 times a power of ten. */
export function niceStep(span: number, count: number): number {
    const raw = Math.max(span, Number.EPSILON) / Math.max(1, count);
    const power = 10 ** Math.floor(Math.log10(raw));
    const fraction = raw / power;
    return (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * power;
}

/** Round ticks covering [lo, hi]: the first at or below lo, the last at or above hi. */
export function niceTicks(lo: number, hi: number, count: number): number[] {
    const step = niceStep(hi - lo, count);
    const first = Math.floor(lo / step) * step;
    const last = Math.ceil(hi / step) * step;
    const ticks: number[] = [];
    for (let t = first; t <= last + step / 2; t += step) {
        ticks.push(Number(t.toPrecision(12)));
    }
    return ticks;
}

/** An SVG path of steps through the points: horizontal to the next x, then vertical to its y. */
export function stepPath(points: ReadonlyArray<readonly [number, number]>, sx: (x: number) => number, sy: (y: number) => number): string {
    return points
        .map(([x, y], i) => (i === 0 ? `M${sx(x).toFixed(1)},${sy(y).toFixed(1)}` : `H${sx(x).toFixed(1)} V${sy(y).toFixed(1)}`))
        .join(" ");
}

const esc = (s: string) => s.replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);

function panelSvg(panel: Panel, top: number, width: number, height: number, xDomain: readonly [number, number]): string {
    const pad = { left: 60, right: 160, top: 30, bottom: 40 };
    const ys = panel.series.flatMap((s) => s.points.map(([, y]) => y));
    const yTicks = niceTicks(Math.min(0, ...ys), Math.max(1, ...ys), 5);
    const xTicks = niceTicks(xDomain[0], xDomain[1], 6);
    const [x0, x1] = [xTicks[0]!, xTicks.at(-1)!];
    const [y0, y1] = [yTicks[0]!, yTicks.at(-1)!];
    const sx = (x: number) => pad.left + ((x - x0) / (x1 - x0 || 1)) * (width - pad.left - pad.right);
    const sy = (y: number) => top + height - pad.bottom - ((y - y0) / (y1 - y0 || 1)) * (height - pad.top - pad.bottom);
    const seconds = (t: number) => `${Number((t / 1000).toPrecision(6))}s`;
    return [
        `<text x="${pad.left}" y="${top + 20}" font-size="14">${esc(panel.title)}</text>`,
        ...yTicks.map(
            (t) =>
                `<text x="${pad.left - 8}" y="${sy(t).toFixed(1)}" font-size="11" text-anchor="end">${t}</text>` +
                `<line x1="${pad.left}" x2="${width - pad.right}" y1="${sy(t).toFixed(1)}" y2="${sy(t).toFixed(1)}" stroke="#eee"/>`,
        ),
        `<line x1="${pad.left}" x2="${width - pad.right}" y1="${sy(y0)}" y2="${sy(y0)}" stroke="#333"/>`,
        `<line x1="${pad.left}" x2="${pad.left}" y1="${sy(y1)}" y2="${sy(y0)}" stroke="#333"/>`,
        ...xTicks.map(
            (t) => `<text x="${sx(t).toFixed(1)}" y="${(sy(y0) + 16).toFixed(1)}" font-size="11" text-anchor="middle">${seconds(t)}</text>`,
        ),
        ...(panel.marks ?? []).map(
            (m) =>
                `<line x1="${sx(m.x).toFixed(1)}" x2="${sx(m.x).toFixed(1)}" y1="${sy(y1).toFixed(1)}" y2="${sy(y0).toFixed(1)}" stroke="${m.color}" stroke-dasharray="3,3"/>` +
                `<text x="${(sx(m.x) + 2).toFixed(1)}" y="${(sy(y1) + 10).toFixed(1)}" font-size="9" fill="${m.color}">${esc(m.label)}</text>`,
        ),
        ...panel.series.map((s) => `<path d="${stepPath(s.points, sx, sy)}" fill="none" stroke="${s.color}" stroke-width="1.6"/>`),
        ...panel.series.map(
            (s, i) =>
                `<rect x="${width - pad.right + 15}" y="${top + pad.top + i * 22}" width="14" height="4" fill="${s.color}"/>` +
                `<text x="${width - pad.right + 35}" y="${top + pad.top + i * 22 + 6}" font-size="13">${esc(s.name)}</text>`,
        ),
    ].join("\n");
}

/** One panel per key, stacked, sharing the time axis. */
export function chartSvg(title: string, panels: readonly Panel[], width = 900, panelHeight = 300): string {
    const xs = panels.flatMap((p) => [...p.series.flatMap((s) => s.points.map(([x]) => x)), ...(p.marks ?? []).map((m) => m.x)]);
    const xDomain = [Math.min(0, ...xs), Math.max(1, ...xs)] as const;
    const height = 36 + panels.length * panelHeight;
    return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="60" y="24" font-size="15">${esc(title)}</text>
${panels.map((p, i) => panelSvg(p, 36 + i * panelHeight, width, panelHeight, xDomain)).join("\n")}
</svg>
`;
}
