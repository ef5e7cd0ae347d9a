// Package metricsref checks the metric families the shipped alerts and
// dashboard read (deploy/monitoring/metrics.txt, written by hack/monitoring)
// against what a binary exports: the descriptors of the registry it serves,
// which list a vector before its first series too, and a scrape of the
// running binary (docs/monitoring.md, "Every metric exists").
package metricsref

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Reference is one line of metrics.txt: a metric family, the binary that
// exports it, and the labels the queries select or group it by.
type Reference struct {
	Binary, Family string
	Labels         []string
}

// Path is deploy/monitoring/metrics.txt in this repository.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "monitoring", "metrics.txt")
}

// Load reads the references of binary from metrics.txt, and fails t when
// there are none (a renamed binary would otherwise check nothing).
func Load(t testing.TB, binary string) []Reference {
	t.Helper()
	f, err := os.Open(Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Reference
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || len(fields) > 3 {
			t.Fatalf("metrics.txt: malformed line %q", line)
		}
		if fields[0] != binary {
			continue
		}
		ref := Reference{Binary: fields[0], Family: fields[1]}
		if len(fields) == 3 {
			ref.Labels = strings.Split(fields[2], ",")
		}
		out = append(out, ref)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("metrics.txt names no metric of %s", binary)
	}
	return out
}

// descPattern reads a descriptor's name and variable labels from its
// String(), the only way client_golang shows them:
// Desc{fqName: "NAME", help: ..., variableLabels: {A,B}}.
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*variableLabels: \{([^}]*)\}\}$`)

// Described is every metric family c describes, with its variable labels:
// what a registry would export, including vectors with no series yet.
func Described(t testing.TB, c prometheus.Collector) map[string][]string {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	out := map[string][]string{}
	for d := range ch {
		m := descPattern.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the descriptor %s", d)
		}
		var labels []string
		for _, l := range strings.Split(m[2], ",") {
			if l != "" {
				// A constrained label shows as c(name).
				labels = append(labels, strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"))
			}
		}
		out[m[1]] = labels
	}
	return out
}

// CheckDescribed fails t for every reference of binary that described
// (Described of the registry the binary serves) does not hold, or whose
// labels the family does not have.
func CheckDescribed(t testing.TB, binary string, described map[string][]string) {
	t.Helper()
	for _, ref := range Load(t, binary) {
		labels, ok := described[ref.Family]
		if !ok {
			t.Errorf("deploy/monitoring reads %s, which %s does not export", ref.Family, binary)
			continue
		}
		for _, l := range ref.Labels {
			if !slices.Contains(labels, l) {
				t.Errorf("deploy/monitoring reads %s by label %q; %s exports it with labels %v", ref.Family, l, binary, labels)
			}
		}
	}
}
