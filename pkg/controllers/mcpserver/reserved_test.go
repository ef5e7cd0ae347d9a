package mcpserver

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clerum/hcc/pkg/names"
)

// The CRD's CEL rule on metadata.name lists exactly the names the operator
// and render refuse (names.ReservedMcpServerNames): the list is written
// twice, once as a kubebuilder marker, and must not drift.
func TestTheCRDRefusesExactlyTheReservedNames(t *testing.T) {
	crd, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "crds", "clerum.io_mcpservers.yaml"))
	require.NoError(t, err)
	flat := strings.Join(strings.Fields(string(crd)), " ")
	m := regexp.MustCompile(`rule: oldSelf\.hasValue\(\) \|\| !\(self\.metadata\.name in \[([^\]]*)\]\)`).FindStringSubmatch(flat)
	require.NotNil(t, m, "the CRD has the reserved-name rule")
	var listed []string
	for _, item := range strings.Split(m[1], ",") {
		listed = append(listed, strings.Trim(strings.TrimSpace(item), "'"))
	}
	assert.ElementsMatch(t, names.ReservedMcpServerNames, listed)
}
