// Package kube finds the cluster the binaries talk to and checks that it
// answers before they start work.
package kube

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
)

// RESTConfig returns the client configuration, looked up in the documented
// order: the --kubeconfig flag, else $KUBECONFIG, else the in-cluster
// service account. userAgent names the binary in the API server's audit log.
func RESTConfig(kubeconfigFlag, userAgent string, qps float32, burst int) (*rest.Config, error) {
	var (
		cfg    *rest.Config
		err    error
		source string
	)
	switch {
	case kubeconfigFlag != "":
		source = "--kubeconfig " + kubeconfigFlag
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfigFlag)
	case os.Getenv("KUBECONFIG") != "":
		source = "KUBECONFIG"
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	default:
		source = "in-cluster configuration"
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("cannot load the cluster configuration from %s: %w", source, err)
	}
	return withBudget(cfg, userAgent, qps, burst), nil
}

// KubectlRESTConfig returns the client configuration of the cluster kubectl
// would talk to, for the kubectl plugin (docs/kubectl-plugin.md): the
// kubeconfig named by kubeconfigFlag, else the files of $KUBECONFIG merged,
// else ~/.kube/config; in it the context named by contextFlag, else the
// current-context. Unlike RESTConfig it prefers a kubeconfig to the
// in-cluster service account, which it falls back to, as kubectl does, only
// when there is no kubeconfig at all.
func KubectlRESTConfig(kubeconfigFlag, contextFlag, userAgent string, qps float32, burst int) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfigFlag
	overrides := &clientcmd.ConfigOverrides{CurrentContext: contextFlag}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		source := clientcmd.RecommendedHomeFile
		switch {
		case kubeconfigFlag != "":
			source = "--kubeconfig " + kubeconfigFlag
		case os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "":
			source = clientcmd.RecommendedConfigPathEnvVar
		}
		if contextFlag != "" {
			source += fmt.Sprintf(" (--context %s)", contextFlag)
		}
		return nil, fmt.Errorf("cannot load the cluster configuration from %s: %w", source, err)
	}
	return withBudget(cfg, userAgent, qps, burst), nil
}

// withBudget names the binary in cfg and gives it its request budget.
func withBudget(cfg *rest.Config, userAgent string, qps float32, burst int) *rest.Config {
	cfg.UserAgent = userAgent
	cfg.QPS = qps
	cfg.Burst = burst
	// One budget for the process: every client built from cfg (the
	// Kubernetes and the clerum.io clientsets) draws on this limiter, so
	// HCC_KUBE_API_QPS bounds the binary, not each clientset. A client that
	// must not queue behind reconciliation (leader election) sets its own.
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	return cfg
}

// CheckReachable asks the API server for its version and fails with a
// message naming the server when it does not answer within timeout.
func CheckReachable(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	probe := rest.CopyConfig(cfg)
	probe.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return fmt.Errorf("cannot build a client for %s: %w", cfg.Host, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := dc.RESTClient().Get().AbsPath("/version").Do(ctx).Raw(); err != nil {
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %w", cfg.Host, err)
	}
	return nil
}
