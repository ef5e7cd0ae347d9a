package dataplane

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// kube-router's network-policy controller is the dataplane's NetworkPolicy
// implementation: only its firewall runs (no routing, no service proxy),
// on the node, programming the node's iptables and ipsets for the pods
// whose hostIP is NodeIP. Built by hack/controlplane; test-only, never
// shipped (docs/local-cluster.md).

// kubeRouter is the running kube-router.
type kubeRouter struct {
	proc    *controlplane.Process
	logPath string
	kube    kubernetes.Interface
}

// syncMarkerNamespace is a namespace whose label the dataplane changes to
// make kube-router sync (see waitSynced).
const syncMarkerNamespace = "hcc-dataplane-sync"

func startKubeRouter(ctx context.Context, binDir, kubeconfig, logPath string, kube kubernetes.Interface) (*kubeRouter, error) {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--hostname-override=" + controlplane.NodeName,
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--service-cluster-ip-range=" + controlplane.ServiceClusterIPRange,
		"--metrics-port=0",
		// Its log tells when a sync starts and ends (waitSynced).
		"--v=1",
	}
	proc, err := controlplane.StartProcess("kube-router", filepath.Join(binDir, "kube-router"), args, nil, logPath)
	if err != nil {
		return nil, err
	}
	kr := &kubeRouter{proc: proc, logPath: logPath, kube: kube}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: syncMarkerNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		_ = proc.Stop()
		return nil, err
	}
	// The first sync programs the top-level chains every pod's rules hang
	// from.
	if _, err := kr.waitSynced(ctx, time.Now().Add(-time.Hour), 2*time.Minute); err != nil {
		_ = proc.Stop()
		return nil, err
	}
	return kr, nil
}

// sync makes kube-router sync now and waits until a sync that started
// after everything the API server held when sync was called has been
// programmed. It returns when that sync started.
//
// kube-router syncs whenever a pod, namespace or NetworkPolicy it watches
// changes, and says in its log when each sync starts (its version is the
// start time in nanoseconds) and ends; syncs run one at a time. The
// change that asks for this sync is a label of a namespace of its own,
// written after every change before it, so a sync that starts after
// kube-router saw it reads caches that hold those changes too — kube-router
// watches pods, namespaces and policies on separate watches, so "after"
// is kept by a margin the watches never lag behind by here.
func (kr *kubeRouter) sync(ctx context.Context, timeout time.Duration) (time.Time, error) {
	const watchMargin = 200 * time.Millisecond
	time.Sleep(watchMargin)
	asked := time.Now()
	patch := fmt.Sprintf(`{"metadata":{"labels":{"hcc.dataplane/sync":"%d"}}}`, asked.UnixNano())
	if _, err := kr.kube.CoreV1().Namespaces().Patch(ctx, syncMarkerNamespace, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return time.Time{}, fmt.Errorf("asking kube-router to sync: %w", err)
	}
	return kr.waitSynced(ctx, asked, timeout)
}

// waitSynced waits until kube-router has finished a sync that started
// after since, and returns its start.
func (kr *kubeRouter) waitSynced(ctx context.Context, since time.Time, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		start, err := kr.syncedSince(since)
		if err != nil || !start.IsZero() {
			return start, err
		}
		select {
		case <-kr.proc.Done():
			return time.Time{}, fmt.Errorf("kube-router exited: %v\n%s", kr.proc.Err(), kr.proc.LogTail(20))
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("kube-router finished no sync started after %s within %s; its log:\n%s",
				since.Format(time.RFC3339Nano), timeout, kr.proc.LogTail(20))
		}
	}
}

// syncedSince reads kube-router's log for the first completed sync that
// started after since. A sync that aborted does not count: the rules it
// was to program are not all there (waitSynced's timeout then shows the
// log).
func (kr *kubeRouter) syncedSince(since time.Time) (time.Time, error) {
	f, err := os.Open(kr.logPath)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	const startMsg = "Starting sync of iptables with version: "
	var started time.Time // of the sync in progress, if it counts
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		if _, version, ok := strings.Cut(line, startMsg); ok {
			started = time.Time{}
			if ns, err := strconv.ParseInt(strings.TrimSpace(version), 10, 64); err == nil && ns > since.UnixNano() {
				started = time.Unix(0, ns)
			}
			continue
		}
		if started.IsZero() {
			continue
		}
		if strings.Contains(line, "Aborting sync") {
			started = time.Time{}
			continue
		}
		if strings.Contains(line, "sync iptables took") {
			return started, nil
		}
	}
	return time.Time{}, scanner.Err()
}

func (kr *kubeRouter) stop() error { return kr.proc.Stop() }
