package dataplane

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestParseFillsDefaultsAndIgnoresUnknownKeys(t *testing.T) {
	f, err := Parse([]byte(`
comment: not part of the format
pods:
  a: {namespace: ns, labels: {app: a}, colour: blue}
  b: {namespace: ns, ports: [{port: 53, protocol: udp}, {port: 8080}]}
flows:
  - {from: a, to: b, port: 8080, allowed: true, why: w, extra: 1}
  - {from: a, toIP: 93.184.216.34, port: 443, protocol: UDP, allowed: false}
`))
	require.NoError(t, err)
	assert.Equal(t, []Port{{53, corev1.ProtocolUDP}, {8080, corev1.ProtocolTCP}}, f.Pods["b"].Ports)
	assert.Equal(t, corev1.ProtocolTCP, f.Flows[0].Protocol)
	assert.True(t, f.Flows[0].Want())
	assert.False(t, f.Flows[1].Want())
	assert.Equal(t, "93.184.216.34", f.Flows[1].Target())
}

func TestParseRefusesBadFiles(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"a flow from an unknown pod": {`
pods: {a: {namespace: ns}}
flows: [{from: x, to: a, port: 1, allowed: true}]`, `from "x" is not a pod of the file`},
		"a flow to an unknown pod": {`
pods: {a: {namespace: ns}}
flows: [{from: a, to: x, port: 1, allowed: true}]`, `to "x" is not a pod of the file`},
		"both to and toIP": {`
pods: {a: {namespace: ns}}
flows: [{from: a, to: a, toIP: 1.2.3.4, port: 1, allowed: true}]`, "exactly one of to and toIP"},
		"neither to nor toIP": {`
pods: {a: {namespace: ns}}
flows: [{from: a, port: 1, allowed: true}]`, "exactly one of to and toIP"},
		"no port": {`
pods: {a: {namespace: ns}}
flows: [{from: a, toIP: 1.2.3.4, allowed: true}]`, "port 0 is not in 1-65535"},
		"an unknown protocol": {`
pods: {a: {namespace: ns}}
flows: [{from: a, toIP: 1.2.3.4, port: 1, protocol: SCTP, allowed: true}]`, `protocol "SCTP" is not TCP or UDP`},
		"allowed left out": {`
pods: {a: {namespace: ns}}
flows: [{from: a, toIP: 1.2.3.4, port: 1}]`, "allowed must be true or false"},
		"an IPv6 destination": {`
pods: {a: {namespace: ns}}
flows: [{from: a, toIP: "2001:db8::1", port: 1, allowed: true}]`, "is not an IPv4 address"},
		"a pod without a namespace": {`
pods: {a: {}}
flows: []`, `pod "a": namespace ""`},
		"a bad label": {`
pods: {a: {namespace: ns, labels: {"bad key!": v}}}`, `label bad key!=v`},
		"two pods asking for one address": {`
pods: {a: {namespace: ns, ip: 10.1.0.1}, b: {namespace: ns, ip: 10.1.0.1}}`, `both ask for ip 10.1.0.1`},
		"not YAML": {`[`, "not a flows file"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParseAcceptsExistingPods(t *testing.T) {
	_, err := Parse([]byte(`flows: [{from: host, to: server, port: 8080, allowed: true}]`), "host", "server")
	require.NoError(t, err)
}

func TestListenPorts(t *testing.T) {
	f, err := Parse([]byte(`
pods:
  a: {namespace: ns}
  b: {namespace: ns}
  c: {namespace: ns, ports: [{port: 9000}]}
flows:
  - {from: a, to: b, port: 80, allowed: true}
  - {from: a, to: b, port: 53, protocol: UDP, allowed: true}
  - {from: a, to: b, port: 80, allowed: true}
  - {from: a, to: c, port: 80, allowed: false}
`))
	require.NoError(t, err)
	assert.Equal(t, []Port{{53, corev1.ProtocolUDP}, {80, corev1.ProtocolTCP}}, f.ListenPorts("b"), "every port a flow sends to, once")
	assert.Equal(t, []Port{{9000, corev1.ProtocolTCP}}, f.ListenPorts("c"), "declared ports only")
	assert.Empty(t, f.ListenPorts("a"))
}

func TestJudge(t *testing.T) {
	addr := netip.MustParseAddr("10.244.0.7")
	for name, tc := range map[string]struct {
		out      probeResult
		identity string
		want     Got
	}{
		"the pod flowed to answers":          {probeResult{Outcome: OutcomeAnswered, Reply: "ns/b 10.244.0.7"}, "ns/b", GotAllowed},
		"another pod answers":                {probeResult{Outcome: OutcomeAnswered, Reply: "ns/c 10.244.0.7"}, "ns/b", GotWrongResponder},
		"the pod answers at another address": {probeResult{Outcome: OutcomeAnswered, Reply: "ns/b 10.244.0.8"}, "ns/b", GotWrongResponder},
		"a pod that says nothing":            {probeResult{Outcome: OutcomeAnswered}, "ns/b", GotWrongResponder},
		"an address that says nothing":       {probeResult{Outcome: OutcomeAnswered}, "", GotAllowed},
		"an address answering as itself":     {probeResult{Outcome: OutcomeAnswered, Reply: "external 10.244.0.7"}, "", GotAllowed},
		"a timeout":                          {probeResult{Outcome: OutcomeTimeout}, "ns/b", GotDenied},
		"a reset":                            {probeResult{Outcome: OutcomeRefused}, "ns/b", GotRefused},
		"no route":                           {probeResult{Outcome: OutcomeUnreachable}, "ns/b", GotUnreachable},
	} {
		t.Run(name, func(t *testing.T) {
			got, _ := judge(tc.out, addr, tc.identity)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestReport(t *testing.T) {
	yes, no := true, false
	results := []Result{
		{Flow: Flow{From: "a", To: "b", Port: 80, Protocol: "TCP", Allowed: &yes, Why: "granted"}, Got: GotAllowed},
		{Flow: Flow{From: "a", ToIP: "1.2.3.4", Port: 443, Protocol: "TCP", Allowed: &no, Why: "no binding"}, Got: GotRefused, Detail: "connection refused"},
		{Flow: Flow{From: "a", To: "b", Port: 53, Protocol: "UDP", Allowed: &no, Why: "not DNS"}, Got: GotDenied},
	}
	var out bytes.Buffer
	assert.Equal(t, 2, Report(&out, results))
	assert.Equal(t, `PASS a → b:80/TCP want allowed got allowed  granted
FAIL a → 1.2.3.4:443/TCP want denied got refused (connection refused)  no binding
PASS a → b:53/UDP want denied got denied  not DNS
2/3 flows as expected
`, out.String())
}

// The flows files in the repository parse (the pods they name as
// deployment/NS/NAME or pod/NS/NAME already run, found by the tests that use them).
func TestRepositoryFlowsParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("flows", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		_, _, err = ParseWithExisting(raw)
		assert.NoError(t, err, path)
	}
}
