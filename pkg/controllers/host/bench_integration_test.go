//go:build integration

package host

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controlapi"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/host/resources/resourcestest"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/reasons"
)

// countingIssuer is a Control API that answers at once and counts calls.
type countingIssuer struct{ calls atomic.Int64 }

func (i *countingIssuer) BootstrapCredential(_ context.Context, req controlapi.BootstrapRequest) (controlapi.Credential, error) {
	n := i.calls.Add(1)
	return controlapi.Credential{Value: fmt.Sprintf("credential-%s-%d", req.HostRef, n), ExpiresAt: time.Now().Add(24 * time.Hour)}, nil
}

// benchHosts is the fleet; HCC_BENCH_HOSTS overrides it for a quick run.
func benchHosts(b *testing.B) int {
	if v := os.Getenv("HCC_BENCH_HOSTS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err)
		return n
	}
	return 500
}

// BenchmarkHostConvergence creates Hosts (500) of one Context and measures,
// against the real API server with a fake Control API, the Host operator
// converging them from cold on a client budget of 50 QPS, beside a plain
// client creating the same objects on the same budget in the same run;
// then a full resync (the periodic reconcile) while no credential is due.
func BenchmarkHostConvergence(b *testing.B) {
	for b.Loop() {
		runHostConvergence(b, benchHosts(b))
	}
}

func runHostConvergence(b *testing.B, n int) {
	ctx := context.Background()
	admin := cp.Config()
	kube := kubernetes.NewForConfigOrDie(admin)
	hcc := clientset.NewForConfigOrDie(admin)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	opts := resourcestest.Options
	opts.HostNamespace, opts.ChannelsNamespace = "bench-host-"+suffix, "bench-channels-"+suffix
	ctxNS, plainNS, plainChannels := "bench-ctx-"+suffix, "bench-plain-"+suffix, "bench-plain-ch-"+suffix
	for _, ns := range []string{opts.HostNamespace, opts.ChannelsNamespace, ctxNS, plainNS, plainChannels} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(b, err)
	}
	// The Host pods' configuration, which a Host needs before it starts.
	_, err := kube.CoreV1().ConfigMaps(opts.HostNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: opts.ConfigMapName}}, metav1.CreateOptions{})
	require.NoError(b, err)
	_, err = hcc.ClerumV1alpha1().Contexts(ctxNS).Create(ctx, &clerumv1alpha1.Context{ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		Spec: clerumv1alpha1.ContextSpec{ContextID: "tenant"}}, metav1.CreateOptions{})
	require.NoError(b, err)
	hosts := make([]*clerumv1alpha1.Host, n)
	kittest.Parallel(b, n, func(i int) error {
		h, err := hcc.ClerumV1alpha1().Hosts(opts.HostNamespace).Create(ctx, &clerumv1alpha1.Host{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("h%04d", i)},
			Spec:       clerumv1alpha1.HostSpec{ContextRef: "tenant"},
		}, metav1.CreateOptions{})
		hosts[i] = h
		return err
	})

	limited := rest.CopyConfig(admin)
	limited.QPS, limited.Burst = 50, 100
	limited.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(50, 100)
	counted, writes := kittest.CountWrites(limited)
	opKube, opHCC := kubernetes.NewForConfigOrDie(counted), clientset.NewForConfigOrDie(counted)
	reg := prometheus.NewRegistry()
	d := kit.Deps{Kube: opKube, HCC: opHCC, Informers: kit.NewInformers(opKube, opHCC), Recorder: &record.FakeRecorder{},
		Registry: reg, Queues: kit.NewQueues(reg, clock.RealClock{}), Clock: clock.RealClock{},
		Log: zerolog.New(os.Stderr).Level(zerolog.WarnLevel)}
	issuer := &countingIssuer{}
	c := New(d, issuer, Config{ContextNamespace: ctxNS, TargetNamespace: opts.HostNamespace, Build: opts,
		RefreshBefore: 15 * time.Minute, Caps: kit.Caps{Absolute: 10, Percent: 20}, Workers: 2})
	runCtx, stop := context.WithCancel(ctx)
	start := time.Now()
	d.Informers.Start(runCtx.Done())
	done := make(chan struct{})
	go func() { _ = c.Run(runCtx); close(done) }()
	defer func() { stop(); <-done; d.Informers.Shutdown() }()

	kittest.WaitFor(b, 5*time.Second, 15*time.Minute, "every Host converged", func() bool {
		list, err := hcc.ClerumV1alpha1().Hosts(opts.HostNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		converged := 0
		for _, h := range list.Items {
			// Converged: the credential is stored and the Deployment written
			// (Progressing: no controller-manager makes it available here).
			if cond := meta.FindStatusCondition(h.Status.Conditions, clerumv1alpha1.ConditionReady); cond != nil &&
				cond.Reason == reasons.Progressing && h.Status.Image != "" && h.Status.CredentialExpiresAt != nil {
				converged++
			}
		}
		b.Logf("%s: %d converged, %d writes, %d Control API calls", time.Since(start).Round(time.Second), converged, writes.Count(), issuer.calls.Load())
		return converged == n
	})
	converge := time.Since(start)
	time.Sleep(2 * time.Second)
	total := writes.Count()
	status := writes.CountBy(func(req, _ string) bool { return strings.HasSuffix(req, "/status") })
	calls := issuer.calls.Load()

	// The full resync while no credential is due: every Host again.
	writes.Reset()
	for _, h := range hosts {
		c.queue.Add(cache.ObjectName{Namespace: h.Namespace, Name: h.Name})
	}
	kittest.WaitFor(b, 200*time.Millisecond, 15*time.Minute, "the resync drained", func() bool { return c.queue.Len() == 0 })
	time.Sleep(2 * time.Second)
	resyncWrites, resyncCalls := writes.Count(), issuer.calls.Load()-calls

	// The plain client: the same ten objects per Host, on the same budget.
	plainCfg := rest.CopyConfig(limited)
	plainCfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(50, 100)
	plain := kubernetes.NewForConfigOrDie(plainCfg)
	popts := opts
	popts.HostNamespace, popts.ChannelsNamespace = plainNS, plainChannels
	plainStart := time.Now()
	kittest.Parallel(b, n, func(i int) error {
		h := hosts[i].DeepCopy()
		h.Namespace = plainNS
		dep, err := resources.BuildDeployment(h, "tenant", popts)
		if err != nil {
			return err
		}
		for _, create := range []func() error{
			func() error {
				_, err := plain.CoreV1().ServiceAccounts(plainNS).Create(ctx, resources.BuildServiceAccount(h, popts), metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := plain.RbacV1().Roles(plainNS).Create(ctx, resources.BuildRole(h, popts), metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := plain.RbacV1().RoleBindings(plainNS).Create(ctx, resources.BuildRoleBinding(h, popts), metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := plain.CoreV1().PersistentVolumeClaims(plainNS).Create(ctx, resources.BuildWorkspaceClaim(h, popts), metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := plain.CoreV1().Secrets(plainNS).Create(ctx, resources.BuildRuntimeTokenSecret(h, popts, "c", time.Now().Add(time.Hour)), metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := plain.AppsV1().Deployments(plainNS).Create(ctx, dep, metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := plain.CoreV1().Services(plainNS).Create(ctx, resources.BuildService(h, popts), metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := plain.AppsV1().Deployments(plainChannels).Create(ctx, resources.BuildChannelReaderDeployment(h, popts), metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := plain.CoreV1().Services(plainChannels).Create(ctx, resources.BuildChannelReaderService(h, popts), metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := plain.NetworkingV1().NetworkPolicies(plainChannels).Create(ctx, resources.BuildChannelReaderPolicy(h, popts), metav1.CreateOptions{})
				return err
			},
		} {
			if err := create(); err != nil {
				return err
			}
		}
		return nil
	})
	plainDur := time.Since(plainStart)

	opRate := float64(total) / converge.Seconds()
	plainRate := float64(10*n) / plainDur.Seconds()
	b.ReportMetric(converge.Seconds(), "converge-s")
	b.ReportMetric(float64(total)/float64(n), "writes/host")
	b.ReportMetric(float64(status)/float64(n), "status-writes/host")
	b.ReportMetric(float64(calls)/float64(n), "controlapi-calls/host")
	b.ReportMetric(opRate, "writes/s")
	b.ReportMetric(plainRate, "plain-writes/s")
	b.ReportMetric(opRate/plainRate, "x-plain")
	b.ReportMetric(float64(resyncWrites), "resync-writes")
	b.ReportMetric(float64(resyncCalls), "resync-controlapi-calls")
}
