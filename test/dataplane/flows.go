// Package dataplane sends real packets between pods of the local cluster
// and reports, flow by flow, whether HCC's NetworkPolicies let each one
// through (docs/local-cluster.md#the-dataplane).
//
// The local cluster runs in a network namespace of its own, the node. Each
// pod kwok runs there gets a network namespace with the address kwok gave
// it, joined to the node by a veth pair, and a process that answers on its
// ports with its own name. kube-router's network-policy controller programs
// the node's iptables from the NetworkPolicies in the cluster, so a flow
// that arrives was let through by them and a flow that times out was
// dropped by them.
//
// A flows file (contract section 10) says which pods exist and which flows
// must pass or be dropped:
//
//	pods:
//	  host-a: {namespace: mcp-host, labels: {clerum.io/context: a}}
//	  server: {namespace: mcp-server, labels: {clerum.io/mcpserver: s}, ports: [{port: 8080}]}
//	flows:
//	  - {from: host-a, to: server, port: 8080, allowed: true, why: "a's Context names s"}
//	  - {from: host-a, toIP: 93.184.216.34, port: 443, allowed: false, why: "no egress binding"}
package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// File is a flows file: the pods to create and the flows to run between
// them. Unknown keys are ignored (contract section 10).
type File struct {
	Pods  map[string]Pod `json:"pods"`
	Flows []Flow         `json:"flows"`
}

// Pod is one pod of a flows file, created as a bare Pod with its labels.
type Pod struct {
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels"`
	// IP, when set, is the address the pod must have.
	IP string `json:"ip"`
	// Ports are what the pod listens on; without them it listens on every
	// port and protocol some flow sends to it.
	Ports []Port `json:"ports"`
}

// Port is one port a pod listens on.
type Port struct {
	Port     int32           `json:"port"`
	Protocol corev1.Protocol `json:"protocol"`
}

func (p Port) String() string { return fmt.Sprintf("%d/%s", p.Port, p.Protocol) }

// Flow is one connection attempt and what must become of it.
type Flow struct {
	From     string          `json:"from"`
	To       string          `json:"to"`
	ToIP     string          `json:"toIP"`
	Port     int32           `json:"port"`
	Protocol corev1.Protocol `json:"protocol"`
	// Allowed is a pointer so that a flow that forgets to say is refused
	// rather than read as "denied".
	Allowed *bool  `json:"allowed"`
	Why     string `json:"why"`
}

// Want is the flow's expected outcome.
func (f Flow) Want() bool { return f.Allowed != nil && *f.Allowed }

// Target names the flow's destination: the pod, else the address.
func (f Flow) Target() string {
	if f.To != "" {
		return f.To
	}
	return f.ToIP
}

// LoadFile reads and checks the flows file at path.
func LoadFile(path string) (*File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Parse reads a flows file, fills in the defaults (protocol TCP) and
// checks it: every flow names a pod of the file as its source and exactly
// one destination, a port, and whether it must pass. Pods named by
// existing are pods that already run (not created from the file); flows
// may name them too.
func Parse(raw []byte, existing ...string) (*File, error) {
	var f File
	// Not strict: keys other than the contract's are ignored.
	if err := yaml.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("not a flows file: %w", err)
	}
	if err := f.normalize(existing); err != nil {
		return nil, err
	}
	return &f, nil
}

// normalize fills in defaults and checks the file, returning every problem
// at once.
func (f *File) normalize(existing []string) error {
	var errs []error
	for _, name := range sortedKeys(f.Pods) {
		pod := f.Pods[name]
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("pod %q: the name is not a valid pod name: %s", name, strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsDNS1123Label(pod.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("pod %q: namespace %q: %s", name, pod.Namespace, strings.Join(msgs, "; ")))
		}
		for k, v := range pod.Labels {
			for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
				errs = append(errs, fmt.Errorf("pod %q: label %s=%s: %s", name, k, v, msg))
			}
		}
		if pod.IP != "" {
			addr, err := netip.ParseAddr(pod.IP)
			if err != nil || !addr.Is4() {
				errs = append(errs, fmt.Errorf("pod %q: ip %q is not an IPv4 address", name, pod.IP))
			}
		}
		for i := range pod.Ports {
			if err := normalizePort(&pod.Ports[i].Port, &pod.Ports[i].Protocol); err != nil {
				errs = append(errs, fmt.Errorf("pod %q: ports[%d]: %w", name, i, err))
			}
		}
		f.Pods[name] = pod
	}
	errs = append(errs, f.duplicateIPs()...)
	known := func(name string) bool {
		_, ok := f.Pods[name]
		return ok || slices.Contains(existing, name)
	}
	for i := range f.Flows {
		fl := &f.Flows[i]
		where := fmt.Sprintf("flows[%d] (%s -> %s)", i, fl.From, fl.Target())
		switch {
		case fl.From == "":
			errs = append(errs, fmt.Errorf("%s: no from", where))
		case !known(fl.From):
			errs = append(errs, fmt.Errorf("%s: from %q is not a pod of the file", where, fl.From))
		}
		switch {
		case (fl.To == "") == (fl.ToIP == ""):
			errs = append(errs, fmt.Errorf("%s: exactly one of to and toIP is needed", where))
		case fl.To != "" && !known(fl.To):
			errs = append(errs, fmt.Errorf("%s: to %q is not a pod of the file", where, fl.To))
		case fl.ToIP != "":
			addr, err := netip.ParseAddr(fl.ToIP)
			if err != nil || !addr.Is4() {
				errs = append(errs, fmt.Errorf("%s: toIP %q is not an IPv4 address", where, fl.ToIP))
			} else {
				fl.ToIP = addr.String()
			}
		}
		if err := normalizePort(&fl.Port, &fl.Protocol); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		if fl.Allowed == nil {
			errs = append(errs, fmt.Errorf("%s: allowed must be true or false", where))
		}
	}
	return errors.Join(errs...)
}

// duplicateIPs reports two pods that ask for one address.
func (f *File) duplicateIPs() []error {
	owner := map[string]string{}
	var errs []error
	for _, name := range sortedKeys(f.Pods) {
		ip := f.Pods[name].IP
		if ip == "" {
			continue
		}
		if other, taken := owner[ip]; taken {
			errs = append(errs, fmt.Errorf("pods %q and %q both ask for ip %s", other, name, ip))
		}
		owner[ip] = name
	}
	return errs
}

// normalizePort checks a port number and defaults the protocol to TCP;
// the protocol is matched without regard to case.
func normalizePort(port *int32, protocol *corev1.Protocol) error {
	if *port < 1 || *port > 65535 {
		return fmt.Errorf("port %d is not in 1-65535", *port)
	}
	switch p := corev1.Protocol(strings.ToUpper(string(*protocol))); p {
	case "":
		*protocol = corev1.ProtocolTCP
	case corev1.ProtocolTCP, corev1.ProtocolUDP:
		*protocol = p
	default:
		return fmt.Errorf("protocol %q is not TCP or UDP", *protocol)
	}
	return nil
}

// ListenPorts returns, for the pod named name, what it listens on: its
// declared ports, or else every port and protocol some flow sends to it.
func (f *File) ListenPorts(name string) []Port {
	if pod, ok := f.Pods[name]; ok && len(pod.Ports) > 0 {
		return pod.Ports
	}
	return f.FlowPorts(name)
}

// FlowPorts returns every port and protocol some flow sends to the pod
// named name, sorted.
func (f *File) FlowPorts(name string) []Port {
	var ports []Port
	for _, fl := range f.Flows {
		p := Port{Port: fl.Port, Protocol: fl.Protocol}
		if fl.To == name && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	sortPorts(ports)
	return ports
}

// Destinations returns, for every toIP address, the ports and protocols
// flows send to it: the addresses a run must make answer (outside the
// pods, whose addresses kwok hands out).
func (f *File) Destinations() map[netip.Addr][]Port {
	out := map[netip.Addr][]Port{}
	for _, fl := range f.Flows {
		if fl.ToIP == "" {
			continue
		}
		addr := netip.MustParseAddr(fl.ToIP) // checked by normalize
		p := Port{Port: fl.Port, Protocol: fl.Protocol}
		if !slices.Contains(out[addr], p) {
			out[addr] = append(out[addr], p)
			sortPorts(out[addr])
		}
	}
	return out
}

func sortPorts(ports []Port) {
	sort.Slice(ports, func(i, j int) bool {
		if ports[i].Port != ports[j].Port {
			return ports[i].Port < ports[j].Port
		}
		return ports[i].Protocol < ports[j].Protocol
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Prefixes that name, in the flows files of this repository's tests, pods
// that already run: "deployment/NAMESPACE/NAME" is the pod one of HCC's
// Deployments runs, "pod/NAMESPACE/NAME" a pod by its name (the DNS
// server is pod/kube-system/hcc-dataplane-dns). Only the Go tests resolve
// such names (Environment.ExistingPods); hcc-dataplane runs the pods of its
// file.
const (
	DeploymentPrefix = "deployment/"
	PodPrefix        = "pod/"
)

// ParseWithExisting is Parse that also accepts the running pods its flows
// name with DeploymentPrefix or PodPrefix, and returns those names.
func ParseWithExisting(raw []byte) (*File, []string, error) {
	var probe File
	if err := yaml.Unmarshal(raw, &probe); err != nil {
		return nil, nil, fmt.Errorf("not a flows file: %w", err)
	}
	var existing []string
	for _, fl := range probe.Flows {
		for _, name := range []string{fl.From, fl.To} {
			if (strings.HasPrefix(name, DeploymentPrefix) || strings.HasPrefix(name, PodPrefix)) && !slices.Contains(existing, name) {
				existing = append(existing, name)
			}
		}
	}
	slices.Sort(existing)
	f, err := Parse(raw, existing...)
	return f, existing, err
}
