package controlplane

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"
)

// AuditPolicyWrites records every write at RequestResponse level (the
// response is the state the write left the object in, which the duplicate
// check compares) except the churn of the cluster's own components (pods,
// nodes, leases), so a test can count what HCC writes; Events only at
// Metadata level: they are counted, their bodies do not matter. The
// end-to-end suite runs with it.
const AuditPolicyWrites = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    resources:
      - group: ""
        resources: [pods, pods/status, pods/binding, nodes, nodes/status, endpoints]
      - group: coordination.k8s.io
        resources: [leases]
      - group: discovery.k8s.io
        resources: [endpointslices]
  - level: Metadata
    verbs: [create, update, patch]
    resources:
      - group: ""
        resources: [events]
      - group: events.k8s.io
        resources: [events]
  - level: RequestResponse
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
`

// AuditPolicyRequests records every write at Request level (the body is
// what a plain client replays) and every read at Metadata level, except
// leases and events, which are not the work being measured (leader
// election is off; events are best effort). The benchmarks run with it.
const AuditPolicyRequests = `apiVersion: audit.k8s.io/v1
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

// AuditEvent is the part of a kube-apiserver audit event (audit.k8s.io/v1
// Event) the tests read.
type AuditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	// UserAgent tells replicas of one identity apart: HCC's names the
	// replica.
	UserAgent        string `json:"userAgent"`
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
	// ResponseObject is the object as the write left it (RequestResponse
	// level only).
	ResponseObject json.RawMessage `json:"responseObject"`
	// Received is when the request arrived, Stage when its response
	// completed.
	Received time.Time `json:"requestReceivedTimestamp"`
	Stage    time.Time `json:"stageTimestamp"`
}

// User is the impersonated user of the request, "" if none: every HCC
// binary of the tests talks through an impersonating kubeconfig.
func (a *AuditEvent) User() string {
	if a.ImpersonatedUser == nil {
		return ""
	}
	return a.ImpersonatedUser.Username
}

// Write reports whether the request is a mutating one.
func (a *AuditEvent) Write() bool {
	switch a.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Succeeded reports whether the response status was 2xx.
func (a *AuditEvent) Succeeded() bool {
	return a.ResponseStatus != nil && a.ResponseStatus.Code >= 200 && a.ResponseStatus.Code < 300
}

// Code is the response status, 0 if the event has none.
func (a *AuditEvent) Code() int {
	if a.ResponseStatus == nil {
		return 0
	}
	return a.ResponseStatus.Code
}

// Resource is "resource" or "resource/subresource".
func (a *AuditEvent) Resource() string {
	if a.ObjectRef.Subresource != "" {
		return a.ObjectRef.Resource + "/" + a.ObjectRef.Subresource
	}
	return a.ObjectRef.Resource
}

// Target is "resource[/subresource] namespace/name".
func (a *AuditEvent) Target() string {
	return a.Resource() + " " + a.ObjectRef.Namespace + "/" + a.ObjectRef.Name
}

// FieldManager is the write's fieldManager parameter, "" if none.
func (a *AuditEvent) FieldManager() string {
	u, err := url.Parse(a.RequestURI)
	if err != nil {
		return ""
	}
	return u.Query().Get("fieldManager")
}

// AuditReader reads an audit log as kube-apiserver appends to it. It
// returns complete lines only: a last line without its newline is being
// written and is kept for the next Next.
type AuditReader struct {
	path    string
	offset  int64
	partial []byte // a last line not yet terminated
}

// NewAuditReader reads the audit log at path from offset (0: the start;
// AuditLogSize: only what is appended from now on).
func NewAuditReader(path string, offset int64) *AuditReader {
	return &AuditReader{path: path, offset: offset}
}

// AuditLogSize is the current length of the audit log at path, 0 if it
// does not exist yet.
func AuditLogSize(path string) (int64, error) {
	info, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// Next returns the events of every complete line appended since the
// previous call that have an objectRef (requests for an object or a
// collection, not to /healthz and the like).
func (r *AuditReader) Next() ([]AuditEvent, error) {
	f, err := os.Open(r.path)
	if os.IsNotExist(err) {
		return nil, nil // nothing audited yet
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(r.offset, io.SeekStart); err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	r.offset += int64(len(raw))
	raw = append(r.partial, raw...)
	end := bytes.LastIndexByte(raw, '\n')
	r.partial = bytes.Clone(raw[end+1:])
	var out []AuditEvent
	for line := range bytes.SplitSeq(raw[:end+1], []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var ev AuditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return out, fmt.Errorf("audit log %s: %w in line %q", r.path, err, line)
		}
		if ev.ObjectRef != nil {
			out = append(out, ev)
		}
	}
	return out, nil
}

// ReadAudit returns the events of the complete lines of the audit log at
// path after offset; see AuditReader.Next.
func ReadAudit(path string, offset int64) ([]AuditEvent, error) {
	return NewAuditReader(path, offset).Next()
}
