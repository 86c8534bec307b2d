/** The series every isolate reports for its own parts, merged for the process's /metrics. */
import { describe, expect, it } from "vitest";
import { type MetricSample, renderSamples } from "../../gateway/base/metrics.ts";

const sample = (over: Partial<MetricSample> & Pick<MetricSample, "name" | "value">) => ({
  type: "counter" as const,
  labels: "",
  ...over,
});

describe("renderSamples", () => {
  it("adds up each series over the isolates, one TYPE line per metric, in first-seen order", () => {
    const main = [
      sample({ name: "a_total", labels: 'result="ok"', value: 2 }),
      sample({ name: "a_total", labels: 'result="failed"', value: 1 }),
      sample({ name: "streak", type: "gauge", value: 3, merge: "max" }),
    ];
    const worker = [
      sample({ name: "a_total", labels: 'result="ok"', value: 5 }),
      sample({ name: "streak", type: "gauge", value: 1, merge: "max" }),
      sample({ name: "b_total", value: 7 }),
    ];
    expect(renderSamples([main, worker])).toBe(
      [
        "# TYPE a_total counter",
        'a_total{result="ok"} 7',
        'a_total{result="failed"} 1',
        "# TYPE streak gauge",
        "streak 3",
        "# TYPE b_total counter",
        "b_total 7",
        "",
      ].join("\n"),
    );
    // The inputs are left as they were.
    expect(main[0].value).toBe(2);
  });

  it("renders nothing for no series", () => {
    expect(renderSamples([])).toBe("");
    expect(renderSamples([[], []])).toBe("");
  });
});
