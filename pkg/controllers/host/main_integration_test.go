//go:build integration

package host

import (
	"os"
	"testing"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// cp is the one control plane this package's integration tests share.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}
