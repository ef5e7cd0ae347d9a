package controlplane

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	auditCreate = `{"verb":"create","requestURI":"/api/v1/namespaces/a/configmaps?fieldManager=hcc","impersonatedUser":{"username":"hcc"},"objectRef":{"resource":"configmaps","namespace":"a","name":"x"},"responseStatus":{"code":201},"requestObject":{"data":{"k":"v"}}}`
	auditHealth = `{"verb":"get","requestURI":"/healthz","responseStatus":{"code":200}}`
	auditPatch  = `{"verb":"patch","impersonatedUser":{"username":"hcc"},"objectRef":{"resource":"deployments","namespace":"a","name":"y","subresource":"status"},"responseStatus":{"code":409}}`
)

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestAuditReaderKeepsAHalfWrittenLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	r := NewAuditReader(path, 0)
	evs, err := r.Next()
	require.NoError(t, err, "a log not written yet is empty")
	assert.Empty(t, evs)

	// One complete event, a request without an object, and half of the
	// next line, as kube-apiserver may leave the file mid-write.
	appendFile(t, path, auditCreate+"\n"+auditHealth+"\n"+auditPatch[:40])
	evs, err = r.Next()
	require.NoError(t, err, "the half-written line is not parsed")
	require.Len(t, evs, 1)
	ev := evs[0]
	assert.Equal(t, "hcc", ev.User())
	assert.True(t, ev.Write())
	assert.True(t, ev.Succeeded())
	assert.Equal(t, "configmaps a/x", ev.Target())
	assert.Equal(t, "hcc", ev.FieldManager())
	assert.JSONEq(t, `{"data":{"k":"v"}}`, string(ev.RequestObject))

	appendFile(t, path, auditPatch[40:]+"\n")
	evs, err = r.Next()
	require.NoError(t, err)
	require.Len(t, evs, 1, "the rest of the line completes the event")
	assert.Equal(t, "deployments/status a/y", evs[0].Target())
	assert.False(t, evs[0].Succeeded())
	assert.Equal(t, 409, evs[0].Code())

	evs, err = r.Next()
	require.NoError(t, err)
	assert.Empty(t, evs, "nothing new")

	size, err := AuditLogSize(path)
	require.NoError(t, err)
	appendFile(t, path, auditCreate+"\n")
	evs, err = ReadAudit(path, size)
	require.NoError(t, err)
	assert.Len(t, evs, 1, "only what follows the offset")
}

func TestAuditReaderRejectsACorruptCompleteLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	appendFile(t, path, "{not json\n")
	_, err := ReadAudit(path, 0)
	assert.Error(t, err)
}
