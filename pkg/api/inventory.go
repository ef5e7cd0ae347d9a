package api

import (
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// Response shapes of the inventory routes. Field sets are fixed by
// docs/http-api.md: nothing here may name an auth selector, a Secret or,
// in v2, a Context.

type transportInfo struct {
	Type v1alpha1.TransportType `json:"type"`
	URL  string                 `json:"url"`
}

type serverStatus struct {
	Deployed bool `json:"deployed"`
	Ready    bool `json:"ready"`
	// Authoritative is absent or false, never true: an absent field keeps
	// the legacy fail-closed meaning for old mcp-host versions.
	Authoritative *bool `json:"authoritative,omitempty"`
}

// hostInventoryEntry is one server of GET /api/v2/hosts/self/mcpservers.
type hostInventoryEntry struct {
	Name               string        `json:"name"`
	Transport          transportInfo `json:"transport"`
	Enabled            bool          `json:"enabled"`
	Status             serverStatus  `json:"status"`
	AuthRequired       bool          `json:"authRequired"`
	CredentialRevision string        `json:"credentialRevision,omitempty"`
}

type hostInventory struct {
	Servers   []hostInventoryEntry `json:"servers"`
	Timestamp string               `json:"timestamp"`
}

// The JSON of a hostInventory is assembled from encoded entries, byte for
// byte what json.Marshal would produce, so that the entries can be encoded
// once and reused (entryCache), and everything before the timestamp once
// per Context (InventoryCache): hostInventoryHead is that part, and
// appendHostInventory adds a request's timestamp to it. The timestamp is
// RFC 3339 and needs no escaping.
func hostInventoryHead(entries [][]byte) []byte {
	size := len(`{"servers":[],"timestamp":"`) + len(entries)
	for _, e := range entries {
		size += len(e)
	}
	head := make([]byte, 0, size)
	head = append(head, `{"servers":[`...)
	for i, e := range entries {
		if i > 0 {
			head = append(head, ',')
		}
		head = append(head, e...)
	}
	return append(head, `],"timestamp":"`...)
}

// appendHostInventory appends to dst the inventory of head at now, in
// timestampLayout.
func appendHostInventory(dst, head []byte, now time.Time) []byte {
	dst = append(dst, head...)
	dst = now.UTC().AppendFormat(dst, timestampLayout)
	return append(dst, `"}`...)
}

// systemInventoryEntry is one server of the anonymous, metadata-only
// GET /api/v1/mcpservers kept for the mcp-proxy poller.
type systemInventoryEntry struct {
	Name       string        `json:"name"`
	ContextRef string        `json:"contextRef"`
	Transport  transportInfo `json:"transport"`
	Enabled    bool          `json:"enabled"`
	Status     serverStatus  `json:"status"`
}

type systemInventory struct {
	Servers    []systemInventoryEntry `json:"servers"`
	ContextRef string                 `json:"contextRef"`
	Timestamp  string                 `json:"timestamp"`
}

// serverTransport is where mcp-host reaches s in the cluster: Service s in
// namespace on the transport port. A stdio server is served by its bridge
// sidecar, which speaks streamable-http; a remote server by its egress
// proxy, under its declared type.
func serverTransport(s *v1alpha1.McpServer, namespace, clusterDomain string) transportInfo {
	typ := s.Spec.Transport.Type
	if typ == v1alpha1.TransportStdio {
		typ = v1alpha1.TransportStreamableHTTP
	}
	path := s.Spec.Transport.Path
	if path == "" {
		path = defaultTransportPath(typ)
	}
	port := strconv.Itoa(int(s.Spec.Transport.EffectivePort()))
	return transportInfo{Type: typ, URL: "http://" + s.Name + "." + namespace + ".svc." + clusterDomain + ":" + port + path}
}

func defaultTransportPath(typ v1alpha1.TransportType) string {
	if typ == v1alpha1.TransportSSE {
		return "/sse"
	}
	return "/mcp"
}

// statusOf reports s's status, marked non-authoritative while HCC cannot
// vouch for it: the controller has not reconciled the latest generation,
// or the egress operator reports the server's egress as not (or not yet
// for this generation) programmed. A server without egress bindings has no
// ExternalEgressReady condition and is judged on observedGeneration alone.
//
// A server the allowlist refuses in enforce mode (refused, nil in audit
// mode) is deployed and ready false whatever its status says: the status
// may predate the refusal (written in audit mode, or under an older
// allowlist) until the operator catches up, and the answer must not wait
// for it. So is a server whose status says the controller refused its
// image in enforce mode for the current generation (controllerRefused),
// whatever hcc-api's own mode.
func statusOf(s *v1alpha1.McpServer, refused func(*v1alpha1.McpServer) bool) serverStatus {
	st := serverStatus{Deployed: s.Status.Deployed, Ready: s.Status.Ready}
	if withheld(s, refused) {
		st.Deployed, st.Ready = false, false
	}
	if !authoritative(s) {
		st.Authoritative = new(bool)
	}
	return st
}

func authoritative(s *v1alpha1.McpServer) bool {
	if s.Status.ObservedGeneration < s.Generation {
		return false
	}
	egress := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionExternalEgressReady)
	return egress == nil || (egress.Status == metav1.ConditionTrue && egress.ObservedGeneration >= s.Generation)
}
