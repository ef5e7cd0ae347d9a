// Command run is `make run` (docs/make-run.md): a local cluster, the CRDs
// and shipped RBAC, the development Control API, hcc-controller and
// hcc-api, and the example objects of deploy/examples. It waits until HCC
// has converged, prints where everything is, a table of what HCC created
// and a curl line for the v2 inventory, and runs until SIGINT or SIGTERM,
// when it stops everything it started.
//
// With HCC_KUBECONFIG set it runs the development Control API and both
// binaries against that cluster instead, and applies nothing to it.
//
// It reads no standard input. Progress goes to stderr; the summary to
// stdout.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/clerum/hcc/hack/devcontrolapi"
	"github.com/clerum/hcc/internal/testing/controlplane"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
)

// Service accounts of deploy/base, which the binaries act as on the local
// cluster so that make run exercises the shipped RBAC.
const (
	controllerServiceAccount = "system:serviceaccount:control-plane:hcc-controller"
	apiServiceAccount        = "system:serviceaccount:control-plane:hcc-api"
)

// namespaces are the platform's namespaces the shipped configuration names
// (the minikube overlay creates the same ones).
var namespaces = []string{"control-plane", "mcp-server", "mcp-host", "rpc-proxy", "sandbox-recipes", "sandbox-ui", "channels", "gfs"}

func main() {
	dieWithParent()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &runner{root: "."}
	err := r.run(ctx)
	failed := err != nil && ctx.Err() == nil
	r.shutdown(failed)
	if failed {
		progress("error: %v", err)
		os.Exit(1)
	}
	progress("stopped; nothing is left running")
}

// progress prints one progress line on stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "make run: "+format+"\n", args...)
}

// runner holds everything make run started, so shutdown can stop it.
type runner struct {
	root string // the repository
	dir  string // temporary: logs and kubeconfigs of this run

	cluster    *controlplane.ControlPlane
	devServer  *http.Server
	processes  []*controlplane.Process
	controlAPI *devcontrolapi.Server
}

func (r *runner) run(ctx context.Context) error {
	var err error
	if r.dir, err = os.MkdirTemp("", "hcc-run-"); err != nil {
		return err
	}
	external := os.Getenv("HCC_KUBECONFIG")

	// The binaries build while the cluster starts (or builds, the first
	// time: about ten minutes).
	binaries := make(chan error, 1)
	go func() { binaries <- buildBinaries(ctx, r.root) }()

	var admin *rest.Config
	var controllerKubeconfig, apiKubeconfig string
	if external != "" {
		progress("using the cluster of HCC_KUBECONFIG=%s; applying nothing to it", external)
		if admin, err = clientcmd.BuildConfigFromFlags("", external); err != nil {
			return fmt.Errorf("HCC_KUBECONFIG: %w", err)
		}
		controllerKubeconfig, apiKubeconfig = external, external
	} else {
		progress("building or reusing the local cluster's binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok); the first run builds them, about ten minutes")
		if _, err := controlplane.EnsureBinaries(ctx, true); err != nil {
			return fmt.Errorf("local cluster binaries: %w", err)
		}
		progress("starting the local cluster")
		r.cluster, err = controlplane.New(controlplane.Options{
			CRDDir:  filepath.Join(r.root, "deploy", "crds"),
			Cluster: true,
			Logf:    progress,
		})
		if err != nil {
			return fmt.Errorf("local cluster: %w", err)
		}
		admin = r.cluster.Config()
		if controllerKubeconfig, err = r.cluster.WriteImpersonatingKubeconfig(controllerServiceAccount, "system:serviceaccounts", "system:serviceaccounts:control-plane"); err != nil {
			return err
		}
		if apiKubeconfig, err = r.cluster.WriteImpersonatingKubeconfig(apiServiceAccount, "system:serviceaccounts", "system:serviceaccounts:control-plane"); err != nil {
			return err
		}
		if err := r.setUpCluster(ctx, admin); err != nil {
			return err
		}
	}
	if err := waitFor(ctx, binaries); err != nil {
		return fmt.Errorf("building hcc-controller and hcc-api: %w", err)
	}

	devURL, err := r.startControlAPI()
	if err != nil {
		return err
	}
	ep, err := r.startBinaries(ctx, external == "", devURL, controllerKubeconfig, apiKubeconfig)
	if err != nil {
		return err
	}
	apiURL := ep.api

	kube := kubernetes.NewForConfigOrDie(admin)
	hcc := clientset.NewForConfigOrDie(admin)
	if external == "" {
		progress("applying deploy/examples")
		if err := controlplane.ApplyFiles(ctx, admin, filepath.Join(r.root, "deploy", "examples")); err != nil {
			return fmt.Errorf("deploy/examples: %w", err)
		}
	}
	// On a cluster of HCC_KUBECONFIG nothing was applied: what exists is
	// waited for, and nothing need exist.
	w := &watcher{kube: kube, hcc: hcc, needServers: external == ""}
	pending := w.waitConverged(ctx)
	if ctx.Err() != nil {
		return nil
	}

	kubeconfig := external
	if r.cluster != nil {
		kubeconfig = r.cluster.Kubeconfig()
	}
	sum := summary{
		kubeconfig:   kubeconfig,
		api:          apiURL,
		desktopToken: ep.desktopToken,
		controller:   ep.controller,
		controlAPI:   devURL,
		logs:         r.dir,
		pending:      pending,
	}
	if err := w.printReport(ctx, os.Stdout, sum); err != nil {
		return err
	}
	return r.printInventoryCommand(ctx, w, devURL, apiURL)
}

// setUpCluster creates the namespaces and applies the shipped RBAC.
func (r *runner) setUpCluster(ctx context.Context, admin *rest.Config) error {
	progress("creating the namespaces and applying the shipped RBAC")
	if err := controlplane.CreateNamespaces(ctx, admin, namespaces); err != nil {
		return err
	}
	base := filepath.Join(r.root, "deploy", "base")
	return controlplane.ApplyFiles(ctx, admin,
		filepath.Join(base, "controller", "serviceaccount.yaml"),
		filepath.Join(base, "controller", "rbac.yaml"),
		filepath.Join(base, "api", "serviceaccount.yaml"),
		filepath.Join(base, "api", "rbac.yaml"),
	)
}

// startControlAPI serves the development Control API on a loopback port.
func (r *runner) startControlAPI() (string, error) {
	var err error
	r.controlAPI, err = devcontrolapi.New(devcontrolapi.Options{
		HMACSecret:        []byte(randomHex()),
		MigrationAudience: devcontrolapi.DefaultMigrationAudience,
	})
	if err != nil {
		return "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	r.devServer = &http.Server{Handler: r.controlAPI.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.devServer.Serve(l) }()
	url := "http://" + l.Addr().String()
	progress("development Control API on %s", url)
	return url, nil
}

// shutdown stops what run started, the binaries first and the cluster
// last. After a failure the binaries' logs stay, since the error names
// them.
func (r *runner) shutdown(failed bool) {
	for i := len(r.processes) - 1; i >= 0; i-- {
		if err := r.processes[i].Stop(); err != nil {
			progress("%v", err)
		}
	}
	if r.devServer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = r.devServer.Shutdown(ctx)
		cancel()
	}
	if r.cluster != nil {
		progress("stopping the local cluster")
		if err := r.cluster.Close(); err != nil {
			progress("%v", err)
		}
	}
	switch {
	case r.dir == "":
	case failed:
		progress("the binaries' logs stay in %s", r.dir)
	default:
		_ = os.RemoveAll(r.dir)
	}
}

func waitFor(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return errors.New("interrupted")
	}
}
