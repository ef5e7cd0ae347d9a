// Package resolve validates an McpServer's egress bindings and looks up its
// hostname bindings through DNS: the judgement the egress coordinator
// (pkg/controllers/egress) and `hcc-controller render` share. It is pure of
// the controller machinery (no client-go, no kit, no generated clients), so
// render links none of it.
package resolve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/netpol"
)

// Resolver looks up the addresses of a hostname. *net.Resolver satisfies
// it; tests inject fakes.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// Failure classes of a hostname lookup. Status carries the class, never the
// resolver's text, which can hold an ephemeral port or a server address: a
// server in a steady failure then writes its status once.
const (
	FailureNXDomain     = "NXDOMAIN"
	FailureNoAddress    = "no-address"
	FailureTimeout      = "timeout"
	FailureRefused      = "refused"
	FailureServFail     = "SERVFAIL"
	FailurePrivate      = "private-answer"
	FailureUnclassified = "lookup-error"
)

// Answer is the outcome of resolving one server's egress bindings.
type Answer struct {
	// Addrs holds, per hostname binding, the addresses of a good answer.
	Addrs map[string][]netip.Addr
	// Rejected holds bindings that can never be allowed as written (a
	// reserved hostname, a private CIDR), with the reason.
	Rejected map[string]string
	// Failed holds hostname bindings whose lookup failed or answered an
	// address in a deny range, with the failure class; they are retried.
	Failed map[string]string
	// Details holds, per failed binding, what went wrong in full, for logs
	// and render's warnings; never for status.
	Details map[string]string
}

// lookupConcurrency bounds the parallel lookups of one server's bindings, so
// a server with many black-holed names costs about one DNS deadline, not one
// per binding, and cannot hold a worker for minutes.
const lookupConcurrency = 8

// Resolve validates every egress binding of server with rules and looks up
// its hostname bindings in parallel, each within timeout, as absolute names.
// The coordinator and `hcc-controller render` share it, so both judge
// bindings alike.
func Resolve(ctx context.Context, resolver Resolver, timeout time.Duration, rules *netpol.EgressRules, server *clerumv1alpha1.McpServer) Answer {
	answer := Answer{
		Addrs:    map[string][]netip.Addr{},
		Rejected: map[string]string{},
		Failed:   map[string]string{},
		Details:  map[string]string{},
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, lookupConcurrency)
	)
	for i := range server.Spec.EgressBindings {
		b := &server.Spec.EgressBindings[i]
		if err := rules.CheckBinding(b); err != nil {
			answer.Rejected[b.Name] = err.Error()
			continue
		}
		if b.EffectiveMode() != clerumv1alpha1.EgressModeExactHost || b.Host == "" {
			continue // public-web and CIDR bindings need no DNS
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			addrs, err := lookup(ctx, resolver, timeout, b.Host)
			if err == nil {
				if err = rules.CheckAnswer(addrs); err != nil {
					err = &privateAnswer{err}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				answer.Failed[b.Name] = classify(err)
				answer.Details[b.Name] = fmt.Sprintf("looking up %s: %v", b.Host, err)
				return
			}
			answer.Addrs[b.Name] = addrs
		}()
	}
	wg.Wait()
	return answer
}

// privateAnswer is an answer holding an address in a deny range: one such
// address makes the whole name suspect (DNS rebinding).
type privateAnswer struct{ err error }

func (e *privateAnswer) Error() string { return "the answer holds a denied address: " + e.err.Error() }
func (e *privateAnswer) Unwrap() error { return e.err }

var errNoAddress = errors.New("no addresses")

// lookup resolves host within the DNS deadline. The name is rooted, so the
// pod's search domains (cluster-internal) never complete it.
func lookup(ctx context.Context, resolver Resolver, timeout time.Duration, host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addrs, err := resolver.LookupNetIP(ctx, "ip", netpol.RootedName(host))
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, errNoAddress
	}
	return addrs, nil
}

// classify returns the stable failure class of a lookup error.
func classify(err error) string {
	var private *privateAnswer
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &private):
		return FailurePrivate
	case errors.Is(err, errNoAddress):
		return FailureNoAddress
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return FailureTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailureRefused
	case errors.As(err, &dnsErr):
		switch {
		case dnsErr.IsNotFound:
			return FailureNXDomain
		case dnsErr.IsTimeout:
			return FailureTimeout
		case strings.Contains(dnsErr.Err, "connection refused"):
			return FailureRefused
		}
		// "server misbehaving" and every other answer the server gave.
		return FailureServFail
	}
	return FailureUnclassified
}
