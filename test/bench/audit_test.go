//go:build integration

package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// auditPolicy is the benchmarks' audit policy: writes at Request level,
// reads at Metadata level (controlplane.AuditPolicyRequests).
const auditPolicy = controlplane.AuditPolicyRequests

// auditEvent is an audit event as the shared reader parses it, with the
// short method names the benchmarks use.
type auditEvent struct{ controlplane.AuditEvent }

func (a *auditEvent) write() bool          { return a.Write() }
func (a *auditEvent) succeeded() bool      { return a.Succeeded() }
func (a *auditEvent) resource() string     { return a.Resource() }
func (a *auditEvent) fieldManager() string { return a.FieldManager() }

// auditTail reads the events of one user from an audit log as it grows,
// through the shared reader (which keeps a half-written last line for the
// next call).
type auditTail struct {
	path   string
	user   string
	reader *controlplane.AuditReader
}

// next returns the complete events of the tail's user written since the
// previous call.
func (t *auditTail) next(b *testing.B) []auditEvent {
	b.Helper()
	if t.reader == nil {
		t.reader = controlplane.NewAuditReader(t.path, 0)
	}
	events, err := t.reader.Next()
	require.NoError(b, err)
	var out []auditEvent
	for _, ev := range events {
		if ev.User() == t.user {
			out = append(out, auditEvent{ev})
		}
	}
	return out
}
