package dataplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// Prepare builds, outside the node (where the Go module proxy is still
// reachable), everything the node runs: the local cluster's binaries and
// kube-router (hack/controlplane, cached), and hcc-controller (into a
// temporary directory). It returns the environment variables that name
// them for RunInNode, and a cleanup that removes what it built.
func Prepare(ctx context.Context, logf func(string, ...any)) ([]string, func(), error) {
	binDir, err := controlplane.DataplaneBinaries(ctx)
	if err != nil {
		return nil, nil, err
	}
	root, err := repoRoot()
	if err != nil {
		return nil, nil, err
	}
	hccBin, err := os.MkdirTemp("", "hcc-dataplane-bin-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(hccBin) }
	logf("dataplane: building hcc-controller")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(hccBin, "hcc-controller"), "./cmd/hcc-controller")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("building hcc-controller: %v\n%s", err, out)
	}
	return []string{"HCC_CONTROLPLANE_BIN=" + binDir, hccBinEnv + "=" + hccBin}, cleanup, nil
}
