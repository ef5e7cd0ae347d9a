package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// binDirEnv names a directory holding prebuilt etcd and kube-apiserver
// binaries; when unset, hack/controlplane builds (or finds cached) ones.
const binDirEnv = "HCC_CONTROLPLANE_BIN"

// binDir is resolved once per test binary: `go run . ensure` costs about a
// second even when everything is cached.
func binDir(cluster bool) (string, error) {
	if cluster {
		return clusterBinDir()
	}
	return apiServerBinDir()
}

var (
	apiServerBinDir = sync.OnceValues(func() (string, error) { return findBinDir(apiServerBinaries) })
	clusterBinDir   = sync.OnceValues(func() (string, error) { return findBinDir(clusterBinaries) })
)

// The binaries of a control plane, those Options.Cluster adds, and the
// dataplane's NetworkPolicy implementation (test/dataplane).
var (
	apiServerBinaries = []string{"etcd", "kube-apiserver"}
	clusterBinaries   = append(slices.Clone(apiServerBinaries), "kube-controller-manager", "kube-scheduler", "kwok")
	dataplaneBinaries = append(slices.Clone(clusterBinaries), "kube-router")
)

func findBinDir(names []string) (string, error) {
	dir := os.Getenv(binDirEnv)
	if dir == "" {
		var err error
		if dir, err = ensureBinaries(names); err != nil {
			return "", err
		}
	}
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("control-plane binary %s missing (from $%s or hack/controlplane): %w", name, binDirEnv, err)
		}
	}
	return dir, nil
}

// ensureBinaries runs `go run . ensure` in hack/controlplane and returns
// the directory it prints. Its progress goes straight to stderr because a
// cold build takes minutes and should not look like a hang.
func ensureBinaries(names []string) (string, error) {
	return ensureBinariesContext(context.Background(), names)
}

// EnsureBinaries builds (or finds cached) the binaries of a control plane,
// all five of the local cluster with cluster, and returns their directory.
// It ignores HCC_CONTROLPLANE_BIN. Ending ctx stops a build at once — the
// go command and the compilers it runs — which New, taking no context,
// cannot: make run calls this first so that Ctrl-C during a first build
// returns promptly.
func EnsureBinaries(ctx context.Context, cluster bool) (string, error) {
	if cluster {
		return ensureBinariesContext(ctx, clusterBinaries)
	}
	return ensureBinariesContext(ctx, apiServerBinaries)
}

// DataplaneBinaries returns the directory holding the local cluster's
// binaries and kube-router (docs/local-cluster.md#the-dataplane):
// $HCC_CONTROLPLANE_BIN when it holds them all, else what hack/controlplane
// builds or finds cached.
func DataplaneBinaries(ctx context.Context) (string, error) {
	if dir := os.Getenv(binDirEnv); dir != "" {
		return findBinDir(dataplaneBinaries)
	}
	return ensureBinariesContext(ctx, dataplaneBinaries)
}

func ensureBinariesContext(ctx context.Context, names []string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "run", ".", "ensure", "--components", strings.Join(names, ","))
	cmd.Dir = filepath.Join(root, "hack", "controlplane")
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	// Its own process group, so a cancel reaches the build it runs too.
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building control-plane binaries (go run . ensure in %s; or set $%s): %w", cmd.Dir, binDirEnv, err)
	}
	dir := strings.TrimSpace(stdout.String())
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("go run . ensure in %s printed %q, not an absolute directory", cmd.Dir, dir)
	}
	return dir, nil
}

// repoRoot walks up from the working directory (a package directory under
// go test) to the directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod found above the working directory")
		}
		dir = parent
	}
}
