package wiring

import (
	"net"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lectern-api/lectern/origin/bundles"
	"github.com/lectern-api/lectern/origin/internal/private"
)

// BundleDirOf is the default directory of the export bundles of an
// origin that serves on ln (Options.BundleDir unset): var/bundles-<port>,
// one an origin, as the edge's usage log is, so that several origins
// started from one folder (the README's recipe) each lock their own
// (issue #33, point 4).
func BundleDirOf(ln net.Listener) string {
	_, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil || port == "" {
		port = "0"
	}
	return filepath.Join(private.StateDir, "bundles-"+port)
}

// openBundles opens the origin's bundle store (Options.BundleDir, else
// BundleDirOf the public listener) and registers its series with the
// origin's metrics.
func (o *Origin) openBundles(opts Options, ln net.Listener) (*bundles.Store, error) {
	dir := opts.BundleDir
	if dir == "" {
		dir = BundleDirOf(ln)
	}
	var with []bundles.Option
	switch r := opts.BundleReserve; {
	case r < 0:
		with = append(with, bundles.Reserve(0))
	case r > 0:
		with = append(with, bundles.Reserve(r))
	}
	if opts.BundleOrgShare > 0 {
		with = append(with, bundles.OrgShare(opts.BundleOrgShare))
	}
	switch n := opts.BundleBuildsPerHour; {
	case n < 0:
		with = append(with, bundles.BuildsPerHour(0))
	case n > 0:
		with = append(with, bundles.BuildsPerHour(n))
	}
	with = append(with, bundles.Clock(o.clock.Now))
	st, err := bundles.Open(dir, opts.BundleMax, with...)
	if err != nil {
		return nil, err
	}
	if err := o.metrics.Registry().Register(bundleCollector{st}); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// bundleCollector collects the bundle store's series from its Stats at
// each scrape (the store counts; nothing is counted twice).
type bundleCollector struct{ st *bundles.Store }

var (
	bundleBytes = prometheus.NewDesc("lectern_bundles_bytes",
		"The bytes of the export bundles the origin's store holds now.", nil, nil)
	bundleFiles = prometheus.NewDesc("lectern_bundles_files",
		"The export bundles the origin's store holds now.", nil, nil)
	bundleHits = prometheus.NewDesc("lectern_bundles_hits_total",
		"Downloads and inline exports answered from a stored bundle.", nil, nil)
	bundleBuilds = prometheus.NewDesc("lectern_bundles_builds_total",
		"Bundles built and stored.", nil, nil)
	bundleEvictions = prometheus.NewDesc("lectern_bundles_evictions_total",
		"Bundles removed, by reason: bound (LECTERN_BUNDLE_MAX_MB, the largest holder's first), share (an organisation past LECTERN_BUNDLE_ORG_SHARE, its own), "+
			"space (room on the volume: the reserve, or a write the volume refused), purge.",
		[]string{"reason"}, nil)
	bundleErrors = prometheus.NewDesc("lectern_bundles_errors_total",
		"Failures of the store's file work, by kind: enospc (the volume refused a write: full or over quota), "+
			"missing_dir (the directory was gone, and was made again), other; counted whether the store repaired them or not.",
		[]string{"kind"}, nil)
	bundleRefusals = prometheus.NewDesc("lectern_bundles_refusals_total",
		"Builds refused for want of room after eviction, each answered 503 with Retry-After, by what refused the last try: "+
			"reserve (LECTERN_BUNDLE_RESERVE_MB) or full (the volume).",
		[]string{"reason"}, nil)
	bundleLimited = prometheus.NewDesc("lectern_bundles_builds_limited_total",
		"Bundle builds refused 429 RATE_LIMITED because their organisation had LECTERN_BUNDLE_BUILDS_PER_HOUR built this hour.", nil, nil)
	bundleOwners = prometheus.NewDesc("lectern_bundles_owners",
		"The organisations holding bundles in the origin's store now.", nil, nil)
	bundleReserve = prometheus.NewDesc("lectern_bundles_reserve_bytes",
		"The bytes the store keeps free on its volume: no bundle is written below them.", nil, nil)
	bundleAvailable = prometheus.NewDesc("lectern_bundles_volume_available_bytes",
		"The bytes available on the bundle directory's volume (statfs at the scrape).", nil, nil)
)

func (c bundleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{bundleBytes, bundleFiles, bundleHits, bundleBuilds, bundleEvictions,
		bundleErrors, bundleRefusals, bundleLimited, bundleOwners, bundleReserve, bundleAvailable} {
		ch <- d
	}
}

func (c bundleCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.st.Stats()
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(bundleBytes, st.Bytes)
	gauge(bundleFiles, int64(st.Files))
	counter(bundleHits, st.Hits)
	counter(bundleBuilds, st.Builds)
	counter(bundleEvictions, st.Evictions, "bound")
	counter(bundleEvictions, st.ShareEvictions, "share")
	counter(bundleEvictions, st.SpaceEvictions, "space")
	counter(bundleEvictions, st.Purged, "purge")
	counter(bundleErrors, st.NoSpace, "enospc")
	counter(bundleErrors, st.MissingDir, "missing_dir")
	counter(bundleErrors, st.Other, "other")
	counter(bundleRefusals, st.RefusedReserve, "reserve")
	counter(bundleRefusals, st.RefusedFull, "full")
	counter(bundleLimited, st.Limited)
	gauge(bundleOwners, int64(st.Owners))
	gauge(bundleReserve, c.st.Reserve())
	if avail, ok := c.st.Available(); ok {
		gauge(bundleAvailable, avail)
	}
}
