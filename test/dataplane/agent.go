package dataplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// The agent plays the CNI plugin of the fake node: every pod kwok runs
// there that has an address gets a network namespace with that address,
// joined to the node by a veth pair and a /32 route, and a process that
// answers on the pod's container ports. A deleted pod loses its namespace.
//
// As a CNI that enforces policy does, it lets no packet reach or leave a
// pod before the policy engine has programmed it: the node's end of the
// veth pair comes up only once a kube-router sync that started after the
// pod (with its address) was in the API has finished, and kube-router's
// rules name the pod. Both are needed. Without any wait, a new pod is open
// to every peer until kube-router's next sync. Waiting only for the rules
// to name the pod is not enough either: a kube-router sync reads the
// policies' target pods and the node's pods from its cache at two
// different moments, so the sync during which a pod's address arrives can
// give the pod its own chain but no policy — open both ways — until the
// next sync (seen here: a server pod open for 1.2 s). A sync that starts
// after the pod is in kube-router's cache reads it both times.

// agentWorkers is how many pods are wired at once.
const agentWorkers = 4

// wiredPod is a pod whose namespace is up.
type wiredPod struct {
	uid    types.UID
	ip     netip.Addr
	labels map[string]string
	proc   *nsProcess
}

type agent struct {
	kube  kubernetes.Interface
	pods  cache.Indexer
	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]
	// syncRouter makes kube-router sync (kubeRouter.sync).
	syncRouter func(context.Context) error
	stateDir   string // control sockets
	logDir     string // each pod process's output
	logf       func(string, ...any)
	rules      *ruleWatcher

	mu    sync.Mutex
	wired map[types.NamespacedName]*wiredPod
	// failed holds the last error wiring each pod, until it is wired.
	failed map[types.NamespacedName]error
	// changed is closed and replaced whenever wired or failed changes.
	changed chan struct{}
	seq     int
	// hooks are called with every pod as soon as its network is up.
	hooks []func(types.NamespacedName, *wiredPod)
}

// newAgent returns an agent; sync must make kube-router sync and return
// once a sync that started after the call has finished.
func newAgent(kube kubernetes.Interface, stateDir, logDir string, logf func(string, ...any), sync func(context.Context) error) *agent {
	return &agent{
		kube:       kube,
		syncRouter: sync,
		stateDir:   stateDir,
		logDir:     logDir,
		logf:       logf,
		rules:      &ruleWatcher{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](100*time.Millisecond, 5*time.Second),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "dataplane-agent"}),
		wired:   map[types.NamespacedName]*wiredPod{},
		failed:  map[types.NamespacedName]error{},
		changed: make(chan struct{}),
	}
}

// run watches the node's pods until ctx ends, then removes every pod's
// namespace.
func (a *agent) run(ctx context.Context) error {
	// Every pod: those of the node's two Node objects (kwok's and the
	// static one) are told apart below; a field selector cannot say "or".
	factory := informers.NewSharedInformerFactory(a.kube, 0)
	informer := factory.Core().V1().Pods().Informer()
	a.pods = informer.GetIndexer()
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok && onNode(pod) {
			a.queue.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("the agent's pod cache did not sync")
	}
	var wg sync.WaitGroup
	for range agentWorkers {
		wg.Go(func() {
			for a.processNext(ctx) {
			}
		})
	}
	go func() {
		<-ctx.Done()
		a.queue.ShutDown()
	}()
	wg.Wait()
	factory.Shutdown()
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, w := range a.wired {
		w.proc.stop()
		delete(a.wired, key)
	}
	return nil
}

func (a *agent) processNext(ctx context.Context) bool {
	key, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(key)
	if err := a.sync(ctx, key); err != nil {
		a.logf("dataplane agent: %s: %v", key, err)
		a.setFailed(key, err)
		a.queue.AddRateLimited(key)
		return true
	}
	a.queue.Forget(key)
	return true
}

// sync makes the pod's namespace match the pod: wired while the pod exists
// with an address, gone otherwise.
func (a *agent) sync(ctx context.Context, key types.NamespacedName) error {
	obj, exists, err := a.pods.GetByKey(key.String())
	if err != nil {
		return err
	}
	var pod *corev1.Pod
	if exists && onNode(obj.(*corev1.Pod)) {
		pod = obj.(*corev1.Pod)
	}
	a.mu.Lock()
	current := a.wired[key]
	a.mu.Unlock()

	podIP, _ := netip.ParseAddr(podIPOf(pod))
	if pod != nil && finished(pod) {
		// A pod whose containers have all ended (a Job's) has no network
		// to keep, and kube-router enforces nothing for it.
		pod = nil
	}
	if current != nil && (pod == nil || current.uid != pod.UID || current.ip != podIP) {
		a.unwire(key, current)
		current = nil
	}
	if pod == nil || pod.Spec.HostNetwork || !podIP.IsValid() || current != nil {
		if pod == nil {
			a.setFailed(key, nil)
		}
		return nil
	}
	// kwok hands a deleted pod's address to the next pod at once; the
	// deleted pod's namespace may still hold it if its event is queued
	// behind this one.
	if other, w := a.byIP(podIP); w != nil {
		a.unwire(other, w)
	}
	a.mu.Lock()
	a.seq++
	n := a.seq
	a.mu.Unlock()

	w, err := a.wire(ctx, pod, podIP, n)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.wired[key] = w
	delete(a.failed, key)
	a.signal()
	hooks := a.hooks
	a.mu.Unlock()
	for _, hook := range hooks {
		hook(key, w)
	}
	return nil
}

// onWired registers hook, called (on the agent's worker: it must not
// block) with every pod as soon as its network is up.
func (a *agent) onWired(hook func(types.NamespacedName, *wiredPod)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hooks = append(a.hooks, hook)
}

func (a *agent) wire(ctx context.Context, pod *corev1.Pod, podIP netip.Addr, n int) (*wiredPod, error) {
	identity := pod.Namespace + "/" + pod.Name
	proc, err := startNSProcess(identity, hostLinkName(pod.UID), socketPath(a.stateDir, n),
		filepath.Join(a.logDir, fmt.Sprintf("pod-%s_%s.log", pod.Namespace, pod.Name)))
	if err != nil {
		return nil, err
	}
	if err := proc.listen(containerPorts(pod)); err != nil {
		proc.stop()
		return nil, err
	}
	// The node's end stays down until kube-router has programmed the pod:
	// nothing reaches the pod, nor leaves it, before its policies apply.
	// The pod is in this agent's cache, so it is in kube-router's too by
	// the time the sync syncRouter asks for starts.
	if err := a.syncRouter(ctx); err != nil {
		proc.stop()
		return nil, err
	}
	if err := a.rules.waitPod(ctx, pod.Namespace, pod.Name, time.Minute); err != nil {
		proc.stop()
		return nil, err
	}
	if err := proc.plug(); err != nil {
		proc.stop()
		return nil, err
	}
	if err := proc.addAddrs(podIP); err != nil {
		proc.stop()
		return nil, err
	}
	return &wiredPod{uid: pod.UID, ip: podIP, labels: pod.Labels, proc: proc}, nil
}

func (a *agent) unwire(key types.NamespacedName, w *wiredPod) {
	w.proc.stop()
	a.mu.Lock()
	if a.wired[key] == w {
		delete(a.wired, key)
		a.signal()
	}
	a.mu.Unlock()
}

func (a *agent) setFailed(key types.NamespacedName, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err == nil {
		delete(a.failed, key)
	} else {
		a.failed[key] = err
	}
	a.signal()
}

// signal wakes the waiters; a.mu is held.
func (a *agent) signal() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// waitWired waits until the pod with uid is wired and returns it.
func (a *agent) waitWired(ctx context.Context, key types.NamespacedName, uid types.UID) (*wiredPod, error) {
	for {
		a.mu.Lock()
		w, failed, changed := a.wired[key], a.failed[key], a.changed
		a.mu.Unlock()
		if w != nil && (uid == "" || w.uid == uid) {
			return w, nil
		}
		select {
		case <-ctx.Done():
			if failed != nil {
				return nil, fmt.Errorf("pod %s is not wired: %w", key, failed)
			}
			return nil, fmt.Errorf("pod %s is not wired: %w", key, ctx.Err())
		case <-changed:
		}
	}
}

// lookup returns the wired pod key, if any.
func (a *agent) lookup(key types.NamespacedName) *wiredPod {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.wired[key]
}

// byIP returns the wired pod holding addr.
func (a *agent) byIP(addr netip.Addr) (types.NamespacedName, *wiredPod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, w := range a.wired {
		if w.ip == addr {
			return key, w
		}
	}
	return types.NamespacedName{}, nil
}

// pending returns the pods of the node that have an address but no
// namespace yet, with the last error of each.
func (a *agent) pending() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, obj := range a.pods.List() {
		pod := obj.(*corev1.Pod)
		key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		if !onNode(pod) || pod.Spec.HostNetwork || podIPOf(pod) == "" || finished(pod) {
			continue
		}
		if w := a.wired[key]; w != nil && w.uid == pod.UID {
			continue
		}
		what := key.String()
		if err := a.failed[key]; err != nil {
			what += " (" + err.Error() + ")"
		}
		out = append(out, what)
	}
	return out
}

// onNode reports whether pod runs on the node: on kwok's fake node, or on
// the static one (pods of a fixed address, see StaticNodeName).
func onNode(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == controlplane.NodeName || pod.Spec.NodeName == StaticNodeName
}

// finished reports whether every container of pod has ended for good.
func finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func podIPOf(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	return pod.Status.PodIP
}

// containerPorts are the ports of the pod's containers, sidecars (init
// containers that keep running) included.
func containerPorts(pod *corev1.Pod) []Port {
	var ports []Port
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			for _, p := range c.Ports {
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				if proto == corev1.ProtocolTCP || proto == corev1.ProtocolUDP {
					ports = append(ports, Port{Port: p.ContainerPort, Protocol: proto})
				}
			}
		}
	}
	add(pod.Spec.Containers)
	var sidecars []corev1.Container
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars = append(sidecars, c)
		}
	}
	add(sidecars)
	return ports
}

// hostLinkName is the node's end of a pod's veth pair: an interface name
// holds at most 15 bytes, so it is a hash of the pod's UID.
func hostLinkName(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return "hcc" + hex.EncodeToString(sum[:])[:11]
}

// ruleWatcher reads the node's filter table for the pods kube-router has
// programmed, once for every waiter that asks within a poll interval.
type ruleWatcher struct {
	mu      sync.Mutex
	rules   string
	readAt  time.Time
	readErr error
}

const rulePollInterval = 100 * time.Millisecond

// waitPod waits until kube-router's FORWARD rules name the pod.
func (r *ruleWatcher) waitPod(ctx context.Context, namespace, name string, timeout time.Duration) error {
	// kube-router's jump to a pod's chain says, in its comment, "... POD
	// name:NAME namespace: NAMESPACE to chain KUBE-POD-FW-...".
	needle := "POD name:" + name + " namespace: " + namespace + " to chain"
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		rules, err := r.read()
		if err == nil && strings.Contains(rules, needle) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("kube-router has not programmed pod %s/%s: %w", namespace, name, err)
			}
			return fmt.Errorf("kube-router has not programmed pod %s/%s after %s", namespace, name, timeout)
		case <-time.After(rulePollInterval):
		}
	}
}

func (r *ruleWatcher) read() (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.readAt) < rulePollInterval {
		return r.rules, r.readErr
	}
	out, err := exec.Command("iptables-save", "-t", "filter").Output()
	r.rules, r.readErr, r.readAt = string(out), err, time.Now()
	return r.rules, r.readErr
}
