//go:build integration

package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// auditPolicy records every write at Request level (the body is what the
// plain client replays) and every read at Metadata level, except leases
// and events, which are not the work being measured (leader election is
// off; events are best effort).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    resources:
      - group: coordination.k8s.io
        resources: [leases]
      - group: ""
        resources: [events]
      - group: events.k8s.io
        resources: [events]
  - level: Request
    verbs: [create, update, patch, delete, deletecollection]
  - level: Metadata
    verbs: [get, list]
  - level: None
`

// auditEvent is the part of a kube-apiserver audit event the benchmark
// reads.
type auditEvent struct {
	Verb             string `json:"verb"`
	RequestURI       string `json:"requestURI"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject json.RawMessage `json:"requestObject"`
	// Stage is when the response completed.
	Stage time.Time `json:"stageTimestamp"`
}

func (a *auditEvent) write() bool {
	switch a.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

func (a *auditEvent) succeeded() bool {
	return a.ResponseStatus != nil && a.ResponseStatus.Code >= 200 && a.ResponseStatus.Code < 300
}

// resource is "resource" or "resource/subresource".
func (a *auditEvent) resource() string {
	if a.ObjectRef.Subresource != "" {
		return a.ObjectRef.Resource + "/" + a.ObjectRef.Subresource
	}
	return a.ObjectRef.Resource
}

// fieldManager is the write's fieldManager parameter, "" if none.
func (a *auditEvent) fieldManager() string {
	u, err := url.Parse(a.RequestURI)
	if err != nil {
		return ""
	}
	return u.Query().Get("fieldManager")
}

// auditTail reads the events of one user from an audit log as it grows.
type auditTail struct {
	path    string
	user    string
	offset  int64
	partial []byte // a last line not yet terminated
}

// next returns the complete events of the tail's user written since the
// previous call.
func (t *auditTail) next(b *testing.B) []auditEvent {
	b.Helper()
	f, err := os.Open(t.path)
	if os.IsNotExist(err) {
		return nil // nothing audited yet
	}
	require.NoError(b, err)
	defer f.Close()
	_, err = f.Seek(t.offset, io.SeekStart)
	require.NoError(b, err)
	raw, err := io.ReadAll(f)
	require.NoError(b, err)
	t.offset += int64(len(raw))
	raw = append(t.partial, raw...)
	end := bytes.LastIndexByte(raw, '\n')
	t.partial = bytes.Clone(raw[end+1:])
	var out []auditEvent
	for line := range bytes.SplitSeq(raw[:end+1], []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var ev auditEvent
		require.NoError(b, json.Unmarshal(line, &ev))
		if ev.ImpersonatedUser != nil && ev.ImpersonatedUser.Username == t.user && ev.ObjectRef != nil {
			out = append(out, ev)
		}
	}
	return out
}
