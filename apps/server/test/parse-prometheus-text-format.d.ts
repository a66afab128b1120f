// The independent Prometheus text-format parser the metrics test checks /metrics with.
declare module 'parse-prometheus-text-format' {
  export default function parsePrometheusTextFormat(text: string): unknown[];
}
