/** The benchmark's report for people: the approaches' table, and what DynamoDB Local cannot show. */
import { DESCRIPTIONS, type ApproachesReport, type Row } from "./approaches";
import { APPROACHES } from "./options";

const fixed = (n: number | null | undefined) => (n === null || n === undefined ? "-" : n.toFixed(2));

const perRecord = (p: Row["consumerWcuPerRecord"]) => (p === null ? "-" : `${fixed(p.delivered)}/${fixed(p.counted)}`);

function cells(r: Row): string[] {
    const w = r.wcuPerOp;
    return [
        r.scenario,
        r.mode === null ? r.approach : `${r.approach} ${r.mode}`,
        `${r.ratioToRawPut.toFixed(2)} (${r.rawPutPerSec})`,
        fixed(r.ratioWithConsumer),
        `${w.api.toFixed(2)}+${w.consumer.toFixed(2)}+${fixed(w.settler)}=${w.total.toFixed(2)}`,
        `${fixed(w.create)}/${fixed(w.delete)}`,
        perRecord(r.consumerWcuPerRecord),
        perRecord(r.consumerWcuPerRecordWithConsumer),
        String(r.apiErrors),
        `${r.accuracy.exactKeys}/${r.accuracy.keys}`,
        `+${r.accuracy.overcount}/-${r.accuracy.undercount}`,
        r.bestEffort === null ? "-" : `+${r.bestEffort.over}/-${r.bestEffort.under}`,
        r.tombstonesLeft === null ? "-" : String(r.tombstonesLeft),
        r.consumerLagMs === null ? "-" : `${r.consumerLagMs.p50}/${r.consumerLagMs.p99}`,
        fixed(r.consumerRecordsPerSec),
    ];
}

const HEADER = [
    "scenario",
    "approach",
    "ops/s ÷ raw put (raw/s)",
    "with consumer",
    "WCU/op api+consumer+settler",
    "API WCU per create/delete",
    "consumer WCU/record delivered/counted",
    "with consumer",
    "API errors",
    "exact keys",
    "count over/under",
    "best-effort over/under",
    "tombstones left",
    "lag p50/p99 ms",
    "records/s",
];

/** The approaches' rows as a table, with the stream noise and what each approach is. */
export function approachesLines(report: ApproachesReport, options: { ops: number; concurrency: number; faults: number }): string[] {
    const lines = report.rows.map(cells);
    const widths = HEADER.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
    const fmt = (row: string[]) => row.map((c, i) => c.padEnd(widths[i]!)).join("  ");
    const out = [
        `${options.ops} operations per run (30% deletes), concurrency ${options.concurrency}, ` +
            `${(options.faults * 100).toFixed(1)}% injected faults per DynamoDB attempt`,
        "",
    ];
    const noise = report.streamNoise;
    if (noise?.separate && noise.sameTable) {
        const per = (s: { delivered: number; counted: number }) => (s.delivered / Math.max(1, s.counted)).toFixed(2);
        out.push(
            `stream records the consumer is given per record that moves a count (hot key, hybrid): counters table ${per(noise.separate)} ` +
                `(${noise.separate.delivered} given, ${noise.separate.counted} counted); same table ${per(noise.sameTable)} ` +
                `(${noise.sameTable.delivered} given, ${noise.sameTable.counted} counted)`,
            "",
        );
    }
    out.push(fmt(HEADER), widths.map((w) => "-".repeat(w)).join("  "), ...lines.map(fmt), "");
    out.push(...APPROACHES.map((a) => `${a}: ${DESCRIPTIONS[a]}`));
    out.push(
        "An operation is one create or one delete. The consumer's write units are the consumer's and the redrive's, per",
        'operation and per stream record the mapping delivered ("delivered") or that moved a count ("counted"), with the',
        'consumer paused while the API ran (its backlog then drained in full batches) and beside it ("with consumer"). The',
        "settler's are one run of the deployed settler once no put attempt of the run's lives can land: it removes the",
        "tombstones the deletes left (a delete of a life younger than a put's reach leaves its tombstone to the settler).",
    );
    return out;
}

/** What DynamoDB Local cannot show, and how the benchmark models it. */
export function engineNotes(parity: boolean): string[] {
    return [
        "What DynamoDB Local cannot show, and how it is modelled:",
        "- It never raises a conflict, a throttle or a 5xx; the injected faults (TransactionConflict, throttling, 500 before",
        "  and 500 after commit, at the same rate for every approach) stand in for the ones no load makes.",
        ...(parity
            ? [
                  "- It has no per-partition limit and no transaction conflicts: the parity layer throttles each partition key as",
                  "  DynamoDB would, and cancels a transaction that meets another on an item (approach 4's errors on a hot key).",
              ]
            : [
                  "- It has no per-partition limit and no transaction conflicts, and --no-parity left it so: the rows show relative cost only.",
              ]),
        "- It reports a transaction's capacity as a flat figure; WCU here bill 2 per transactional item per KB (DynamoDB's price).",
        "- Lag is bounded by how fast DynamoDB Local serves its stream, which is far slower than DynamoDB's.",
        '- The consumer shares the engine\'s two cores with the API here; on AWS it does not. "with consumer" shows',
        "  the API ratio with the consumer running beside it; lag is measured in that run.",
    ];
}
