package main

import (
	"testing"

	"github.com/clerum/hcc/internal/testing/roots"
)

// TestTrustsPublicRootsWithoutSystemCertificates: the image holds the
// binary alone, with no certificate bundle (docs/deploy.md, "The images"),
// so the binary brings its own roots: with none on the system, a public
// site's chain still verifies.
func TestTrustsPublicRootsWithoutSystemCertificates(t *testing.T) {
	roots.RequirePublicChainTrusted(t)
}
