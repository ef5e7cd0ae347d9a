package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// promql parses PromQL as Prometheus does by default.
var promql = parser.NewParser(parser.Options{})

// grafanaVariables are the Grafana variables the dashboard's queries use,
// with a value that makes them PromQL.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m")

// parseDashboardQuery parses a panel's query with its Grafana variables
// replaced.
func parseDashboardQuery(expr string) (parser.Expr, error) {
	return promql.ParseExpr(grafanaVariables.Replace(expr))
}

// targetLabels are labels Prometheus adds to every scraped series (the
// ServiceMonitors' target labels) and le, a histogram bucket's bound: no
// binary declares them, so they are not checked against its descriptors.
var targetLabels = map[string]bool{
	"job": true, "instance": true, "namespace": true, "pod": true, "service": true,
	"endpoint": true, "container": true, "le": true,
}

// reference is a metric family an expression reads, the binary that
// exports it, and the label names its selectors match on.
type reference struct {
	binary, family string
	labels         map[string]bool
}

// references collects the metric families exprs read.
type references map[string]*reference

// add records every metric family expr selects, with the labels its
// selectors match on and those an aggregation over that family alone
// groups by.
func (refs references) add(expr parser.Expr) error {
	var err error
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if agg, ok := node.(*parser.AggregateExpr); ok && !agg.Without && err == nil {
			if family, ok := soleFamily(agg.Expr); ok {
				if err = refs.addLabels(family, agg.Grouping); err != nil {
					return nil
				}
			}
		}
		vs, ok := node.(*parser.VectorSelector)
		if !ok || err != nil {
			return nil
		}
		name := metricName(vs)
		if name == "" {
			err = fmt.Errorf("%s selects no metric by name", vs)
			return nil
		}
		var names []string
		for _, m := range vs.LabelMatchers {
			names = append(names, m.Name)
		}
		err = refs.addLabels(familyOf(name), names)
		return nil
	})
	return err
}

// addLabels records family, and names as labels of it, leaving out the
// metric name and target labels.
func (refs references) addLabels(family string, names []string) error {
	ref := refs[family]
	if ref == nil {
		binary, err := binaryOf(family)
		if err != nil {
			return err
		}
		ref = &reference{binary: binary, family: family, labels: map[string]bool{}}
		refs[family] = ref
	}
	for _, name := range names {
		if name != model.MetricNameLabel && !targetLabels[name] {
			ref.labels[name] = true
		}
	}
	return nil
}

// soleFamily is the one metric family expr selects, if it selects exactly
// one (under any functions and aggregations).
func soleFamily(expr parser.Expr) (string, bool) {
	families := map[string]bool{}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			families[familyOf(metricName(vs))] = true
		}
		return nil
	})
	if len(families) != 1 {
		return "", false
	}
	for family := range families {
		return family, family != ""
	}
	return "", false
}

// metricName is the name a selector matches exactly, or "".
func metricName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// familyOf is the metric family a series name belongs to: a histogram's
// _bucket, _sum and _count series are its family's. (No family HCC
// exports has a name ending so of its own; the binaries' tests would
// report one, since its cut name would not be registered.)
func familyOf(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if family, ok := strings.CutSuffix(name, suffix); ok {
			return family
		}
	}
	return name
}

// binaryOf is the binary that exports family: hcc-api's series are
// clerum_hcc_api_*, the rest (clerum_hcc_* and the work queues') are
// hcc-controller's. A family with another name is refused: it would be a
// series neither binary's test checks.
func binaryOf(family string) (string, error) {
	switch {
	case strings.HasPrefix(family, "clerum_hcc_api_"):
		return "hcc-api", nil
	case strings.HasPrefix(family, "clerum_hcc_"), strings.HasPrefix(family, "workqueue_"):
		return "hcc-controller", nil
	}
	return "", fmt.Errorf("metric %s is neither clerum_hcc_* nor workqueue_*: no HCC binary is known to export it", family)
}

// metricsFile is deploy/monitoring/metrics.txt: a line per metric family
// the alerts and the dashboard read, "BINARY FAMILY [LABEL,...]", sorted.
// The binaries' tests (cmd/hcc-controller, cmd/hcc-api) check each against
// the descriptors of the registry the binary serves, and the end-to-end
// test against a scrape of the running binaries.
func (refs references) metricsFile() []byte {
	var b strings.Builder
	b.WriteString("# Generated by hack/monitoring (docs/monitoring.md); do not edit.\n")
	b.WriteString("# The metric families the alerts and the dashboard of deploy/monitoring read:\n")
	b.WriteString("# BINARY FAMILY [LABELS its selectors match on or its aggregations group by]\n")
	for _, line := range refs.lines() {
		b.WriteString(line + "\n")
	}
	return []byte(b.String())
}

// lines are the lines of metricsFile below its header.
func (refs references) lines() []string {
	var out []string
	for _, family := range slices.Sorted(maps.Keys(refs)) {
		ref := refs[family]
		line := ref.binary + " " + family
		if len(ref.labels) > 0 {
			line += " " + strings.Join(slices.Sorted(maps.Keys(ref.labels)), ",")
		}
		out = append(out, line)
	}
	return out
}
