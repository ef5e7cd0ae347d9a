package dataplane

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// Timing of the flows.
const (
	// AttemptTimeout is how long one attempt waits for a connection or a
	// reply; a flow that times out is tried once more before it counts as
	// denied.
	AttemptTimeout = time.Second
	// flowParallelism is how many flows run at once.
	flowParallelism = 16
	// quietPeriod is how long nothing HCC writes may change before the
	// controller counts as converged.
	quietPeriod = 2 * time.Second
)

// Got is what a flow was seen to do.
type Got string

const (
	GotAllowed Got = "allowed"
	GotDenied  Got = "denied"
	// GotRefused: a reset (TCP) or port-unreachable (UDP) from the
	// destination: a packet passed, but nothing listened.
	GotRefused Got = "refused"
	// GotWrongResponder: something answered, but not the destination.
	GotWrongResponder Got = "wrong-responder"
	GotUnreachable    Got = "unreachable"
	GotError          Got = "error"
)

// Result is the outcome of one flow.
type Result struct {
	Flow Flow
	Got  Got
	// Detail says more: who answered, or the error.
	Detail string
}

// Pass reports whether the flow did what it must.
func (r Result) Pass() bool {
	return (r.Got == GotAllowed && r.Flow.Want()) || (r.Got == GotDenied && !r.Flow.Want())
}

// Line is the flow's report line: "PASS from → to:port/proto want
// allowed|denied got …  why".
func (r Result) Line() string {
	verdict := "FAIL"
	if r.Pass() {
		verdict = "PASS"
	}
	want := "denied"
	if r.Flow.Want() {
		want = "allowed"
	}
	got := string(r.Got)
	if r.Detail != "" {
		got += " (" + r.Detail + ")"
	}
	return fmt.Sprintf("%s %s → %s:%d/%s want %s got %s  %s",
		verdict, r.Flow.From, r.Flow.Target(), r.Flow.Port, r.Flow.Protocol, want, got, r.Flow.Why)
}

// Report writes one line per result and the summary line "N/M flows as
// expected", and returns how many passed.
func Report(w io.Writer, results []Result) int {
	passed := 0
	for _, r := range results {
		if r.Pass() {
			passed++
		}
		fmt.Fprintln(w, r.Line())
	}
	fmt.Fprintf(w, "%d/%d flows as expected\n", passed, len(results))
	return passed
}

// Pods maps the pod names of a flows file to the pods they are in the
// cluster.
type Pods map[string]types.NamespacedName

// CreatePods creates every pod of f as a bare Pod with its labels and its
// listening ports (its own, or those its flows use), in namespaces created
// if missing, and waits until each has its network namespace. The pods
// of existing are not created; they must be running.
func (e *Environment) CreatePods(ctx context.Context, f *File, existing Pods) (Pods, error) {
	pods := Pods{}
	for name, key := range existing {
		pods[name] = key
	}
	var namespaces []string
	for _, pod := range f.Pods {
		if !slices.Contains(namespaces, pod.Namespace) {
			namespaces = append(namespaces, pod.Namespace)
		}
	}
	if err := e.ensureNamespaces(ctx, namespaces); err != nil {
		return nil, err
	}
	uids := map[string]types.UID{}
	for _, name := range sortedKeys(f.Pods) {
		spec := f.Pods[name]
		pod := barePod(spec.Namespace, name, spec.Labels, f.ListenPorts(name))
		var created *corev1.Pod
		var err error
		if spec.IP != "" {
			created, err = e.createStaticPod(ctx, pod, netip.MustParseAddr(spec.IP))
		} else {
			created, err = e.Kube.CoreV1().Pods(spec.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("creating pod %s: %w", name, err)
		}
		pods[name] = types.NamespacedName{Namespace: spec.Namespace, Name: name}
		uids[name] = created.UID
	}
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, name := range sortedKeys(pods) {
		w, err := e.agent.waitWired(waitCtx, pods[name], uids[name])
		if err != nil {
			return nil, err
		}
		// A pod that declares its ports listens on those only; the
		// others, and running pods, on every port a flow sends to them.
		if _, declared := f.Pods[name]; !declared || len(f.Pods[name].Ports) == 0 {
			if err := w.proc.listen(f.FlowPorts(name)); err != nil {
				return nil, fmt.Errorf("pod %s: %w", name, err)
			}
		}
	}
	return pods, nil
}

// DeletePods deletes the pods of f (not those it found running).
func (e *Environment) DeletePods(ctx context.Context, f *File) error {
	for name, pod := range f.Pods {
		if err := e.Kube.CoreV1().Pods(pod.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			return err
		}
	}
	return nil
}

// PrepareDestinations makes every toIP address of f that is neither a pod
// nor the node answer on the ports its flows use, from the namespace
// outside the cluster.
func (e *Environment) PrepareDestinations(f *File) error {
	outside := map[netip.Addr][]Port{}
	for addr, ports := range f.Destinations() {
		if addr == NodeIP {
			continue
		}
		if _, w := e.agent.byIP(addr); w != nil {
			if err := w.proc.listen(ports); err != nil {
				return err
			}
			continue
		}
		outside[addr] = ports
	}
	if len(outside) == 0 {
		return nil
	}
	return e.ensureOutside(outside)
}

// WaitConverged waits until hcc-controller is ready and has judged the
// current generation of every object it reconciles, nothing it writes
// (NetworkPolicies, Deployments) nor any pod has changed for a quiet
// period, every pod with an address has its namespace, and kube-router has
// programmed all of it.
func (e *Environment) WaitConverged(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	var stableSince time.Time
	var lastState string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if !e.controllerReady(ctx) {
			if ctx.Err() == nil {
				last = "hcc-controller /ready"
			}
			return false, nil
		}
		state, pending, err := e.convergenceState(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil // the deadline, reported below with what was last awaited
			}
			return false, err
		}
		if pending != "" {
			last, stableSince = pending, time.Time{}
			return false, nil
		}
		if state != lastState || stableSince.IsZero() {
			lastState, stableSince = state, time.Now()
			last = "a quiet period"
			return false, nil
		}
		return time.Since(stableSince) >= quietPeriod, nil
	})
	if err != nil {
		return fmt.Errorf("hcc-controller did not converge in %s; still waiting for %s", timeout, last)
	}
	_, err = e.Sync(ctx)
	return err
}

// convergenceState returns a fingerprint of what convergence watches (the
// resource versions of the policies, Deployments and pods) and, if
// something is not there yet, what.
func (e *Environment) convergenceState(ctx context.Context) (string, string, error) {
	var b strings.Builder
	servers, err := e.HCC.ClerumV1alpha1().McpServers(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", "", err
	}
	for _, s := range servers.Items {
		if s.Status.ObservedGeneration != s.Generation {
			return "", "McpServer " + s.Namespace + "/" + s.Name, nil
		}
		if c := meta.FindStatusCondition(s.Status.Conditions, clerumv1alpha1.ConditionExternalEgressReady); c != nil && c.Reason == reasons.Pending {
			return "", "the egress of McpServer " + s.Namespace + "/" + s.Name, nil
		}
	}
	hosts, err := e.HCC.ClerumV1alpha1().Hosts(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", "", err
	}
	for _, h := range hosts.Items {
		if h.Status.ObservedGeneration != h.Generation {
			return "", "Host " + h.Namespace + "/" + h.Name, nil
		}
	}
	policies, err := e.Kube.NetworkingV1().NetworkPolicies(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", "", err
	}
	for _, p := range policies.Items {
		fmt.Fprintf(&b, "np %s/%s %s\n", p.Namespace, p.Name, p.ResourceVersion)
	}
	deps, err := e.Kube.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: names.LabelManagedBy + "=" + names.ManagedByValue})
	if err != nil {
		return "", "", err
	}
	for _, d := range deps.Items {
		if !available(&d) {
			return "", "Deployment " + d.Namespace + "/" + d.Name, nil
		}
		fmt.Fprintf(&b, "deploy %s/%s %s\n", d.Namespace, d.Name, d.ResourceVersion)
	}
	pods, err := e.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", "", err
	}
	for _, p := range pods.Items {
		if finished(&p) {
			continue
		}
		if !onNode(&p) || p.Status.PodIP == "" {
			return "", "pod " + p.Namespace + "/" + p.Name + " to run", nil
		}
		fmt.Fprintf(&b, "pod %s/%s %s %s\n", p.Namespace, p.Name, p.Status.PodIP, strings.Join(labelList(p.Labels), ","))
	}
	if pending := e.agent.pending(); len(pending) > 0 {
		return "", "the network of pod " + pending[0], nil
	}
	return b.String(), "", nil
}

func available(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= want && d.Status.UpdatedReplicas >= want
}

func labelList(labels map[string]string) []string {
	var out []string
	for k, v := range labels {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// RunFlows runs every flow of f from its source pod and returns the
// results in the file's order. pods names the cluster pod of each pod
// name (CreatePods).
func (e *Environment) RunFlows(ctx context.Context, f *File, pods Pods) []Result {
	results := make([]Result, len(f.Flows))
	sem := make(chan struct{}, flowParallelism)
	var wg sync.WaitGroup
	for i, fl := range f.Flows {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = e.RunFlow(ctx, fl, pods)
		})
	}
	wg.Wait()
	return results
}

// RunFlow runs one flow: a connection (TCP) or a datagram (UDP) from the
// source pod's namespace, tried once more if it times out.
func (e *Environment) RunFlow(ctx context.Context, fl Flow, pods Pods) Result {
	res := Result{Flow: fl}
	var to netip.Addr
	var wantIdentity string
	if fl.To != "" {
		key := pods[fl.To]
		dst := e.agent.lookup(key)
		if dst == nil {
			res.Got, res.Detail = GotError, "destination pod "+fl.To+" has no network"
			return res
		}
		to, wantIdentity = dst.ip, key.String()
	} else {
		to = netip.MustParseAddr(fl.ToIP)
	}
	r := e.runAttempts(ctx, pods[fl.From], netip.AddrPortFrom(to, uint16(fl.Port)), fl.Protocol, wantIdentity)
	res.Got, res.Detail = r.got, r.detail
	return res
}

type attemptResult struct {
	got    Got
	detail string
}

// runAttempts tries one flow from the pod from, once more if it times
// out, and judges the outcome; identity, when set, is the pod that must
// answer.
func (e *Environment) runAttempts(ctx context.Context, from types.NamespacedName, to netip.AddrPort, protocol corev1.Protocol, identity string) attemptResult {
	src := e.agent.lookup(from)
	if src == nil {
		return attemptResult{GotError, "source pod " + from.String() + " has no network"}
	}
	req := probeRequest{Addr: to, Protocol: protocol, Timeout: AttemptTimeout}
	var out probeResult
	for range 2 {
		var err error
		out, err = src.proc.probe(ctx, req)
		if err != nil {
			return attemptResult{GotError, err.Error()}
		}
		if out.Outcome != OutcomeTimeout {
			break
		}
	}
	got, detail := judge(out, to.Addr(), identity)
	return attemptResult{got, detail}
}

// judge reads one attempt's outcome. An answer counts as allowed only from
// the destination: its greeting names the pod flowed to (for a pod) and
// the address it reached. A destination that says nothing (the API server
// waits for its client) is allowed on the completed connection alone.
func judge(out probeResult, addr netip.Addr, wantIdentity string) (Got, string) {
	switch out.Outcome {
	case OutcomeAnswered:
		if out.Reply == "" {
			if wantIdentity != "" {
				return GotWrongResponder, "connected, but the pod said nothing"
			}
			return GotAllowed, "connected"
		}
		identity, at, _ := strings.Cut(out.Reply, " ")
		if at != addr.String() || (wantIdentity != "" && identity != wantIdentity) {
			return GotWrongResponder, out.Reply
		}
		return GotAllowed, ""
	case OutcomeTimeout:
		return GotDenied, ""
	case OutcomeRefused:
		return GotRefused, out.Error
	case OutcomeUnreachable:
		return GotUnreachable, out.Error
	default:
		return GotError, out.Error
	}
}

// PodIP returns the address of a pod the agent wired.
func (e *Environment) PodIP(key types.NamespacedName) (netip.Addr, bool) {
	w := e.agent.lookup(key)
	if w == nil {
		return netip.Addr{}, false
	}
	return w.ip, true
}

// FindPod returns the one running pod of namespace matching selector: a
// pod HCC's Deployments run, to name in flows.
func (e *Environment) FindPod(ctx context.Context, namespace, selector string) (types.NamespacedName, error) {
	pods, err := e.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return types.NamespacedName{}, err
	}
	var found []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		return types.NamespacedName{}, fmt.Errorf("%d pods in %s match %s, want 1", len(found), namespace, selector)
	}
	return types.NamespacedName{Namespace: namespace, Name: found[0].Name}, nil
}

// ExistingPods finds the pod of each name of ParseWithExisting: for
// "deployment/NAMESPACE/NAME" the one running pod of that Deployment, for
// "pod/NAMESPACE/NAME" that pod.
func (e *Environment) ExistingPods(ctx context.Context, refs []string) (Pods, error) {
	pods := Pods{}
	for _, ref := range refs {
		if rest, ok := strings.CutPrefix(ref, PodPrefix); ok {
			ns, name, ok := strings.Cut(rest, "/")
			if !ok {
				return nil, fmt.Errorf("%s: want %sNAMESPACE/NAME", ref, PodPrefix)
			}
			pods[ref] = types.NamespacedName{Namespace: ns, Name: name}
			continue
		}
		ns, name, ok := strings.Cut(strings.TrimPrefix(ref, DeploymentPrefix), "/")
		if !ok {
			return nil, fmt.Errorf("%s: want %sNAMESPACE/NAME", ref, DeploymentPrefix)
		}
		d, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		key, err := e.FindPod(ctx, ns, selector.String())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		pods[ref] = key
	}
	return pods, nil
}
