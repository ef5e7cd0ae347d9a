package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Probing over time: a stream of attempts of one flow, for measuring when
// packets stop (revocation) and for proving that none get through while a
// server starts (the egress gate).

// Sample is one attempt of a Watch.
type Sample struct {
	Start time.Time
	Got   Got
	// Detail says who answered or what failed.
	Detail string
}

// Watch sends one attempt of a flow every interval, each with its own
// deadline (no retry), until stopped, and keeps every sample.
type Watch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	samples []Sample
}

// WatchTarget is where a Watch sends its attempts.
type WatchTarget struct {
	From     types.NamespacedName
	To       netip.AddrPort
	Protocol corev1.Protocol
	// Identity, when set, is the pod that must answer ("namespace/name").
	Identity string
}

// StartWatch starts sending attempts of target every interval, each with
// timeout.
func (e *Environment) StartWatch(target WatchTarget, interval, timeout time.Duration) (*Watch, error) {
	src := e.agent.lookup(target.From)
	if src == nil {
		return nil, fmt.Errorf("pod %s has no network", target.From)
	}
	if target.Protocol == "" {
		target.Protocol = corev1.ProtocolTCP
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watch{cancel: cancel}
	req := probeRequest{Addr: target.To, Protocol: target.Protocol, Timeout: timeout}
	w.wg.Go(func() {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			start := time.Now()
			w.wg.Go(func() {
				out, err := src.proc.probe(ctx, req)
				s := Sample{Start: start}
				if err != nil {
					if ctx.Err() != nil {
						return // stopped mid-attempt: not a sample
					}
					s.Got, s.Detail = GotError, err.Error()
				} else {
					s.Got, s.Detail = judge(out, target.To.Addr(), target.Identity)
				}
				w.mu.Lock()
				w.samples = append(w.samples, s)
				w.mu.Unlock()
			})
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	})
	return w, nil
}

// Stop ends the watch, waits for the attempts in flight, and returns every
// sample in the order the attempts started.
func (w *Watch) Stop() []Sample {
	w.cancel()
	w.wg.Wait()
	return w.Samples()
}

// Samples returns the samples so far, in the order the attempts started.
func (w *Watch) Samples() []Sample {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Sample, len(w.samples))
	copy(out, w.samples)
	sortSamples(out)
	return out
}

func sortSamples(s []Sample) {
	slices.SortFunc(s, func(a, b Sample) int { return a.Start.Compare(b.Start) })
}

// FirstDrop returns the start of the first attempt after since that was
// denied, provided every attempt started after it was denied too; ok is
// false if the flow never stopped, or came back after stopping (then
// comeback is the first attempt that got through again).
func FirstDrop(samples []Sample, since time.Time) (drop time.Time, comeback *Sample, ok bool) {
	for i, s := range samples {
		if s.Start.Before(since) || s.Got != GotDenied {
			continue
		}
		for j := i + 1; j < len(samples); j++ {
			if samples[j].Got != GotDenied {
				return s.Start, &samples[j], false
			}
		}
		return s.Start, nil, true
	}
	return time.Time{}, nil, false
}

// OnPodWired registers hook, called with every pod as soon as its network
// is up, before any other pod has had a chance to reach it through the
// agent's own waits. hook runs on the agent's worker and must not block:
// it starts watches (StartWatch), nothing slower.
func (e *Environment) OnPodWired(hook func(pod types.NamespacedName, ip netip.Addr, labels map[string]string)) {
	e.agent.onWired(func(key types.NamespacedName, w *wiredPod) { hook(key, w.ip, w.labels) })
}
