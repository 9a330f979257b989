/** Plain-text tables for human output. Pure. */

/** Left-aligned first column, right-aligned numbers, two spaces between columns. */
export function table(header: readonly string[], rows: ReadonlyArray<ReadonlyArray<string | number>>): string {
    const cells = [header, ...rows.map((r) => r.map(String))];
    const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
    return cells
        .map((r) =>
            r
                .map((c, i) => (i === 0 || typeof rows[0]?.[i] === "string" ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
                .join("  ")
                .trimEnd(),
        )
        .join("\n");
}
