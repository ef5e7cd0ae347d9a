// Command benchtable prints the output of `go test -bench` (files named on
// the command line, else stdin) as one aligned table: package, benchmark,
// metric, value, and, beside a figure that has one, its ratio against a
// baseline measured in the same run. make bench runs it over _output/bench*.txt.
//
// A ratio comes from, in this order:
//
//   - a metric x-BASE-M on the same line: the ratio of metric M (the unit
//     that is M or starts with "M-"), e.g. x-bare-p50 beside p50-ms;
//   - a metric x-BASE on the same line: the ratio of the line's headline,
//     writes/s, else req/s, else ns/op;
//   - a sibling sub-benchmark named plain, bare or baseline (F/plain beside
//     F/cached): each shared metric's value over the sibling's, as x-plain,
//     x-bare or x-baseline;
//   - BenchmarkFloorS beside Benchmark<P>S (same suffix S): ns/op over the
//     floor's, as x-floor.
//
// An x- metric that belongs to no figure of its line is a row of its own.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// line is one benchmark result.
type line struct {
	pkg, name string
	n         int
	metrics   []metric
}

type metric struct {
	unit, text string // text: the value as go test printed it
	value      float64
	ratio      string // "0.93 x-plain", or empty
}

// procsSuffix is the -GOMAXPROCS go test appends to every name.
var procsSuffix = regexp.MustCompile(`-\d+$`)

// parse reads go test -bench output.
func parse(r io.Reader, lines []line) ([]line, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	pkg := ""
	for sc.Scan() {
		text := sc.Text()
		if p, ok := strings.CutPrefix(text, "pkg: "); ok {
			pkg = strings.TrimPrefix(strings.TrimSpace(p), "github.com/clerum/hcc/")
			continue
		}
		fields := strings.Fields(text)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") || len(fields)%2 != 0 {
			continue
		}
		n, err := strconv.Atoi(fields[1])
		if err != nil {
			continue // a log line that starts with a benchmark's name
		}
		l := line{pkg: pkg, name: procsSuffix.ReplaceAllString(fields[0], ""), n: n}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: value %q of %s", l.name, fields[i], fields[i+1])
			}
			l.metrics = append(l.metrics, metric{unit: fields[i+1], text: fields[i], value: v})
		}
		lines = append(lines, l)
	}
	return lines, sc.Err()
}

// pairSameLine moves each x- metric of l beside the figure it belongs to;
// one that belongs to none stays a row of its own.
func pairSameLine(l *line) {
	var kept []metric
	for _, m := range l.metrics {
		if !strings.HasPrefix(m.unit, "x-") {
			kept = append(kept, m)
		}
	}
	for _, m := range l.metrics {
		rest, ok := strings.CutPrefix(m.unit, "x-")
		if !ok {
			continue
		}
		base, figure, _ := strings.Cut(rest, "-")
		target := -1
		for i, k := range kept {
			if figure != "" {
				if target < 0 && (k.unit == figure || strings.HasPrefix(k.unit, figure+"-")) {
					target = i
				}
				continue
			}
			if r := headlineRank(k.unit); r >= 0 && (target < 0 || r < headlineRank(kept[target].unit)) {
				target = i
			}
		}
		if target >= 0 && kept[target].ratio == "" {
			kept[target].ratio = formatRatio(m.value, "x-"+base)
			continue
		}
		kept = append(kept, metric{unit: m.unit, ratio: formatRatio(m.value, m.unit)})
	}
	l.metrics = kept
}

func headlineRank(unit string) int {
	return slices.Index([]string{"writes/s", "req/s", "ns/op"}, unit)
}

// siblingBaselines are the names of the sub-benchmarks the others of their
// family are measured against.
var siblingBaselines = []string{"plain", "bare", "baseline"}

// pairSiblings gives the figures of F/X a ratio over F/plain, F/bare or
// F/baseline, and of Benchmark<P>S over BenchmarkFloorS.
func pairSiblings(lines []line) {
	find := func(pkg, name string) *line {
		for i := range lines {
			if lines[i].pkg == pkg && lines[i].name == name {
				return &lines[i]
			}
		}
		return nil
	}
	for i := range lines {
		l := &lines[i]
		family, leaf, sub := cutLast(l.name, "/")
		if sub && !slices.Contains(siblingBaselines, leaf) {
			for _, baseline := range siblingBaselines {
				if base := find(l.pkg, family+"/"+baseline); base != nil {
					ratioOver(l, base, "", "x-"+baseline)
				}
			}
		}
		if !strings.HasPrefix(l.name, "BenchmarkFloor") {
			for j := range lines {
				floor := &lines[j]
				suffix, ok := strings.CutPrefix(floor.name, "BenchmarkFloor")
				if ok && suffix != "" && floor.pkg == l.pkg && strings.HasSuffix(l.name, suffix) && l.name != "Benchmark"+suffix {
					ratioOver(l, floor, "ns/op", "x-floor")
				}
			}
		}
	}
}

// ratioOver sets, on every figure of l without a ratio (only unit, if
// set), its value over base's figure of the same unit.
func ratioOver(l, base *line, unit, name string) {
	for i := range l.metrics {
		m := &l.metrics[i]
		if m.ratio != "" || m.text == "" || (unit != "" && m.unit != unit) {
			continue
		}
		for _, bm := range base.metrics {
			if bm.unit == m.unit && bm.text != "" && bm.value != 0 {
				m.ratio = formatRatio(m.value/bm.value, name)
			}
		}
	}
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func formatRatio(v float64, name string) string {
	return strconv.FormatFloat(v, 'f', 2, 64) + " " + name
}

// notes explain the ratios and definitions of the benchmarks present.
func notes(lines []line) []string {
	has := func(pred func(line) bool) bool { return slices.ContainsFunc(lines, pred) }
	var out []string
	out = append(out, "ratio: the figure over its baseline, measured in the same run.")
	if has(func(l line) bool {
		return slices.ContainsFunc(l.metrics, func(m metric) bool { return strings.Contains(m.ratio, "x-plain") })
	}) {
		out = append(out, "x-plain: over a plain client (client-go on the same QPS/burst; test/bench: creating each object of the converged state once; pkg/api: a handler writing the same bytes).")
	}
	if has(func(l line) bool {
		return slices.ContainsFunc(l.metrics, func(m metric) bool { return strings.Contains(m.ratio, "x-bare") })
	}) {
		out = append(out, "x-bare: over a bare HTTP handler (a process of its own, a fixed 200 body of hcc-api's own response) under the same open-loop load generator; failed requests are counted apart and fail the benchmark.")
	}
	if has(func(l line) bool {
		return slices.ContainsFunc(l.metrics, func(m metric) bool { return strings.Contains(m.ratio, "x-baseline") })
	}) {
		out = append(out, "x-baseline: over another build of the same binary (HCC_BENCH_BASELINE_CONTROLLER), measured on the same fleet in the same run.")
	}
	if has(func(l line) bool {
		return slices.ContainsFunc(l.metrics, func(m metric) bool { return strings.Contains(m.ratio, "x-floor") })
	}) {
		out = append(out, "x-floor: time over the floor benchmark of the same size (the bare cost of producing the output).")
	}
	if has(func(l line) bool { return strings.HasPrefix(l.name, "BenchmarkFleetConvergence") }) {
		out = append(out, "FleetConvergence: the real hcc-controller from cold; converged = every McpServer status deployed, every Host's credential stored and "+
			"Deployment rolling out (no kubelet is played: nothing makes a Deployment available), then 10 s without a controller write. "+
			"s-converge: process start to its last write; writes/s over its first to last write, counted from the audit log; objects/s: the objects owned once converged over the same span. "+
			"revoke-ms: a Context edit to the dropped pair's allow policies gone (10 edits).")
	}
	if has(func(l line) bool { return strings.HasPrefix(l.name, "BenchmarkControllerFleetScale") }) {
		out = append(out, "ControllerFleetScale: the real hcc-controller restarted on a fleet it converged (10,000 McpServers, 1,000 Contexts, 5,000 Hosts), shipped environment. "+
			"s-restart-settled: process start to every work queue empty for 3 s; MiB-rss: VmRSS after 60 s idle; cores-idle: CPU over those 60 s; "+
			"s-resync: the Host and NetworkPolicy full resync timers' first item to every queue empty; writes counted from the audit log, events included, whatever the answer.")
	}
	if has(func(l line) bool { return strings.HasPrefix(l.name, "BenchmarkAPIScale") }) {
		out = append(out, "APIScale: the real hcc-api under 100 object updates/s through its informers; latency from each request's scheduled time, offered open-loop, "+
			"targets alternating in rounds, the first second of a route discarded; inventory-first-use: each Host's first request (its token verified); "+
			"cpu-µs/req, B/req, allocs/req: hcc-api's own process over its runs, the informers' work included; *-reference: another build in the same rounds.")
	}
	return out
}

func main() {
	var lines []line
	var err error
	if len(os.Args) < 2 {
		lines, err = parse(os.Stdin, nil)
	}
	for _, path := range os.Args[1:] {
		var f *os.File
		if f, err = os.Open(path); err != nil {
			break
		}
		lines, err = parse(f, lines)
		f.Close()
		if err != nil {
			err = fmt.Errorf("%s: %w", path, err)
			break
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	for i := range lines {
		l := &lines[i]
		// One run of minutes: ns/op is the wall time of the whole run.
		if l.n == 1 && len(l.metrics) > 1 {
			l.metrics = slices.DeleteFunc(l.metrics, func(m metric) bool { return m.unit == "ns/op" })
		}
		pairSameLine(l)
	}
	pairSiblings(lines)
	for i := range lines {
		// The figures that have a baseline first.
		slices.SortStableFunc(lines[i].metrics, func(x, y metric) int {
			return boolRank(x.ratio == "") - boolRank(y.ratio == "")
		})
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "PACKAGE\tBENCHMARK\tMETRIC\tVALUE\tRATIO")
	for _, l := range lines {
		for _, m := range l.metrics {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", l.pkg, strings.TrimPrefix(l.name, "Benchmark"), m.unit, m.text, m.ratio)
		}
	}
	_ = w.Flush()
	for _, n := range notes(lines) {
		fmt.Println(n)
	}
}
