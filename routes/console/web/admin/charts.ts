// Time-series charts with uPlot (bundled into the page). uPlot draws on a canvas and sizes its
// elements through the CSSOM, which the page's Content-Security-Policy allows; its stylesheet is
// part of styles.css. Each chart follows its container's width, and says in its label what it
// shows, for screen readers.

import UPlot from 'uplot'

export interface Series { label: string, values: number[], color: string }

const charts = new Map<HTMLElement, { plot: UPlot, observer: ResizeObserver }>()
const HEIGHT = 200

const css = (name: string): string => getComputedStyle(document.documentElement).getPropertyValue(name).trim()

/** A colour of the page's palette (a CSS custom property). */
export const color = (name: string): string => css(name)

/**
 * Draws (or redraws) a chart in `target`: one line per series over the UTC bucket starts `xs`
 * (seconds), with `format` for the values on the axis and in the legend.
 */
export function chart (target: HTMLElement, xs: number[], series: Series[], format: (n: number) => string, summary: string, byDay: boolean): void {
  charts.get(target)?.plot.destroy()
  charts.get(target)?.observer.disconnect()
  target.setAttribute('aria-label', summary)
  const fg = css('--muted')
  const grid = css('--line')
  const width = Math.max(240, target.clientWidth)
  const opts: UPlot.Options = {
    width,
    height: HEIGHT,
    // the buckets are UTC hours or days: the axis says them in UTC
    tzDate: (ts) => UPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    cursor: { drag: { x: false, y: false } },
    // the legend names the series; the values are on the axes and in the text above
    legend: { show: true, live: false },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
    axes: [
      {
        stroke: fg,
        grid: { stroke: grid, width: 1 },
        ticks: { stroke: grid, width: 1 },
        values: byDay ? '{MMM} {D}' : '{HH}:{mm}'
      },
      {
        stroke: fg,
        grid: { stroke: grid, width: 1 },
        ticks: { stroke: grid, width: 1 },
        // wide enough for the longest label of the axis
        size: (_u, values) => 24 + 7 * Math.max(3, ...(values ?? []).map((v) => v.length)),
        values: (_u, ticks) => ticks.map(format)
      }
    ],
    series: [
      { label: 'UTC', value: byDay ? '{YYYY}-{MM}-{DD}' : '{YYYY}-{MM}-{DD} {HH}:00' },
      ...series.map((s) => ({
        label: s.label,
        stroke: s.color,
        width: 2,
        fill: `${s.color}22`,
        points: { show: xs.length <= 31, size: 5, fill: s.color },
        value: (_u: UPlot, v: number | null) => v === null ? '—' : format(v)
      }))
    ]
  }
  const plot = new UPlot(opts, [xs, ...series.map((s) => s.values)], target)
  const observer = new ResizeObserver(() => {
    const w = target.clientWidth
    if (w > 0 && Math.abs(w - plot.width) > 1) plot.setSize({ width: w, height: HEIGHT })
  })
  observer.observe(target)
  charts.set(target, { plot, observer })
}

/** Removes every chart (signing out). */
export function clearCharts (): void {
  for (const [target, { plot, observer }] of charts) {
    observer.disconnect()
    plot.destroy()
    target.replaceChildren()
  }
  charts.clear()
}
