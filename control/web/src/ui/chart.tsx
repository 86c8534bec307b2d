/**
 * A time series chart: uPlot over the API's series points (`t` in ISO, one value per series),
 * sized to its box and redrawn when the points or the theme change.
 */
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export interface ChartSeries {
  label: string;
  /** A CSS colour. */
  stroke: string;
  values: (number | null)[];
}

export interface ChartProps {
  title: string;
  /** Unix seconds, one per point. */
  times: number[];
  series: ChartSeries[];
  format?: (value: number) => string;
  /** A fixed value range (a percentage's 0 to 100); otherwise the data's. */
  range?: [number, number];
  height?: number;
}

export function Chart({ title, times, series, format, range, height = 180 }: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const axisColour = getComputedStyle(document.documentElement).getPropertyValue("--muted")
      .trim() || "#888";
    const values = (_: uPlot, ticks: number[]) =>
      ticks.map((tick) => (format ? format(tick) : String(tick)));
    const plot = new uPlot(
      {
        width: element.clientWidth || 600,
        height,
        series: [
          {},
          ...series.map((s) => ({
            label: s.label,
            stroke: s.stroke,
            width: 1.5,
            points: { show: false },
          })),
        ],
        axes: [
          { stroke: axisColour, grid: { stroke: "rgba(128,128,128,0.15)" } },
          { stroke: axisColour, grid: { stroke: "rgba(128,128,128,0.15)" }, values, size: 70 },
        ],
        scales: { x: { time: true }, ...(range ? { y: { range } } : {}) },
        legend: { show: true },
      },
      [times, ...series.map((s) => s.values)] as uPlot.AlignedData,
      element,
    );
    const resize = new ResizeObserver(() => {
      plot.setSize({ width: element.clientWidth || 600, height });
    });
    resize.observe(element);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [times, series, height, range?.[0], range?.[1], document.documentElement.dataset.theme]);
  return (
    <figure class="chart" data-chart={title}>
      <figcaption>{title}</figcaption>
      <div ref={box} />
    </figure>
  );
}
