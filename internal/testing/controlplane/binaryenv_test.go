package controlplane

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShippedEnvKeepsOnlyLiteralEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "deployment.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  template:
    spec:
      containers:
        - name: c
          env:
            - {name: A, value: "1"}
            - name: S
              valueFrom: {secretKeyRef: {name: s, key: k}}
            - {name: B, value: ""}
`), 0o644))
	env, err := ShippedEnv(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"A=1", "B="}, env)
}

func TestBinaryEnvDropsWhatHCCReads(t *testing.T) {
	t.Setenv("KUBECONFIG", "/elsewhere")
	t.Setenv("HCC_LEADER_ELECT", "false")
	t.Setenv("CONTEXT_MAPPER_NAMESPACE", "x")
	t.Setenv("HCC_TEST_KEEP_ME_NOT", "y")
	t.Setenv("UNRELATED_SETTING", "z")
	env := BinaryEnv()
	assert.Contains(t, env, "UNRELATED_SETTING=z")
	for _, kv := range env {
		assert.NotRegexp(t, `^(KUBECONFIG|HCC_|CONTEXT_MAPPER_)`, kv)
	}
}
