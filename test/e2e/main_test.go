//go:build integration

// Package e2e runs hcc-controller and hcc-api as real processes against the
// local cluster of make run (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok; docs/local-cluster.md), each through a
// kubeconfig that impersonates its shipped ServiceAccount, so the RBAC of
// deploy/base is proven sufficient. One cluster serves every scenario; each
// scenario removes what it created before the next starts.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/internal/testing/controlplane"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
)

// Service accounts of deploy/base.
const (
	controllerUser = "system:serviceaccount:control-plane:hcc-controller"
	apiUser        = "system:serviceaccount:control-plane:hcc-api"
)

// The platform's namespaces, as the shipped configuration names them.
var namespaces = []string{"control-plane", "mcp-server", "mcp-host", "rpc-proxy", "sandbox-recipes", "sandbox-ui", "channels", "gfs"}

var (
	cluster *controlplane.ControlPlane
	kube    kubernetes.Interface
	hcc     clientset.Interface
	// controllerKubeconfig and apiKubeconfig impersonate the shipped
	// service accounts.
	controllerKubeconfig, apiKubeconfig string
)

func TestMain(m *testing.M) {
	code := controlplane.RunMain(m, controlplane.Options{Cluster: true, AuditPolicy: controlplane.AuditPolicyWrites}, func(c *controlplane.ControlPlane) {
		cluster = c
		kube = kubernetes.NewForConfigOrDie(c.Config())
		hcc = clientset.NewForConfigOrDie(c.Config())
		if err := setUp(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			os.Exit(1)
		}
	})
	// The race-enabled binaries are ~120 MiB each run; left in TMPDIR they
	// fill a CI runner's disk.
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// setUp creates the namespaces, the shipped service accounts and RBAC, and
// the impersonating kubeconfigs.
func setUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := createNamespaces(ctx, namespaces); err != nil {
		return err
	}
	base := filepath.Join(repoRoot, "deploy", "base")
	for _, f := range []string{"controller/serviceaccount.yaml", "controller/rbac.yaml", "api/serviceaccount.yaml", "api/rbac.yaml"} {
		if err := applyFile(ctx, filepath.Join(base, f)); err != nil {
			return err
		}
	}
	var err error
	if controllerKubeconfig, err = cluster.WriteImpersonatingKubeconfig(controllerUser, "system:serviceaccounts", "system:serviceaccounts:control-plane"); err != nil {
		return err
	}
	apiKubeconfig, err = cluster.WriteImpersonatingKubeconfig(apiUser, "system:serviceaccounts", "system:serviceaccounts:control-plane")
	return err
}

// repoRoot is the repository, two levels above this package.
var repoRoot = filepath.Join("..", "..")

// binDir holds the binaries built by binaries; TestMain removes it.
var binDir string

// binaries builds hcc-controller and hcc-api once per test binary, with
// the race detector.
var binaries = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "hcc-e2e-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	for _, name := range []string{"hcc-controller", "hcc-api"} {
		cmd := exec.Command("go", "build", "-race", "-o", filepath.Join(dir, name), "github.com/clerum/hcc/cmd/"+name)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("building %s: %v\n%s", name, err, out)
		}
	}
	return dir, nil
})
