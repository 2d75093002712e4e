/** Reading a running service's Prometheus metrics, as tests and benchmarks count its workers' passes. */

/** Where a service's metrics are, and the token that reads them. */
export interface MetricsEndpoint {
  readonly apiUrl: string;
  readonly metricsToken: string;
}

/** One series of the service's /metrics, e.g. `billing_worker_passes_total{worker="x",outcome="success"}`; 0 when absent. */
export const metricValue = async (service: MetricsEndpoint, series: string): Promise<number> => {
  const response = await fetch(`${service.apiUrl}/metrics`, {
    headers: { authorization: `Bearer ${service.metricsToken}` },
  });
  if (response.status !== 200) throw new Error(`GET /metrics answered ${response.status}`);
  const line = (await response.text()).split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.split(" ")[1]);
};

/** The service's count of successful passes of a worker (`billing_worker_passes_total`). */
export const workerPasses = (service: MetricsEndpoint, worker: string): Promise<number> =>
  metricValue(service, `billing_worker_passes_total{worker="${worker}",outcome="success"}`);
