// Package promexport exports the engine's counters, the fact mirror's and
// the rule set's status as Prometheus metrics.
//
// The engine keeps plain counters (engine.Stats); a Collector reads them at
// scrape time, so the engine needs no knowledge of Prometheus and a scrape
// costs one snapshot:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(promexport.New(promexport.Sources{Engine: eng.Stats, Mirror: mirror.Stats, Reload: rl.Status}))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
package promexport
