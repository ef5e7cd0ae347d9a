package egress

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	applyv1alpha1 "github.com/clerum/hcc/pkg/generated/applyconfiguration/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/reasons"
)

// condition computes ExternalEgressReady and resolvedEgressIPs.
func condition(server *clerumv1alpha1.McpServer, st serverState, ready bool) (metav1.ConditionStatus, string, string, []string) {
	var ips []string
	for _, seen := range st.seen {
		for a := range seen {
			ips = append(ips, a.String())
		}
	}
	sort.Strings(ips)
	ips = slices.Compact(ips)

	switch {
	case len(server.Spec.EgressBindings) == 0 && ready:
		return metav1.ConditionTrue, reasons.NoBindings, "the server declares no egress bindings", nil
	case len(server.Spec.EgressBindings) == 0:
		return metav1.ConditionFalse, reasons.Pending, "the allows of removed egress bindings are being revoked", nil
	case len(st.rejected) > 0 || len(st.planRejected) > 0:
		return metav1.ConditionFalse, reasons.BindingRejected, describe(rejections(st)), ips
	case len(st.failed) > 0:
		return metav1.ConditionFalse, reasons.ResolutionFailed, describeFailures(st), ips
	case !ready:
		return metav1.ConditionFalse, reasons.Pending, "egress policies are being programmed", ips
	}
	return metav1.ConditionTrue, reasons.Programmed, fmt.Sprintf("%d egress binding(s) programmed", len(server.Spec.EgressBindings)), ips
}

// rejections merges the coordinator's and the planner's rejections; the
// coordinator's reason wins for a binding both reject.
func rejections(st serverState) map[string]string {
	out := maps.Clone(st.planRejected)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, st.rejected)
	return out
}

// describeFailures names each failing binding with its host and class.
func describeFailures(st serverState) string {
	m := make(map[string]string, len(st.failed))
	for b, class := range st.failed {
		m[b] = fmt.Sprintf("looking up %s failed: %s", st.dest[b].host, class)
	}
	return describe(m)
}

// describe renders binding → reason pairs in binding order.
func describe(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("binding %s: %s", k, m[k])
	}
	return strings.Join(parts, "; ")
}

// writeStatus applies ExternalEgressReady and resolvedEgressIPs — every
// status field hcc-netpol owns on an McpServer, so server-side apply keeps
// them all — when they differ from what the server shows.
func (c *Coordinator) writeStatus(ctx context.Context, server *clerumv1alpha1.McpServer, st serverState, ready bool) error {
	status, reason, message, ips := condition(server, st, ready)
	conds := kit.BuildConditions(server.Status.Conditions, server.Generation, c.clock.Now(), kit.Condition{
		Type: clerumv1alpha1.ConditionExternalEgressReady, Status: status, Reason: reason, Message: message})
	if !conds.Changed && slices.Equal(server.Status.ResolvedEgressIPs, ips) {
		return nil
	}
	apply := applyv1alpha1.McpServer(server.Name, server.Namespace).WithStatus(applyv1alpha1.McpServerStatus().
		WithResolvedEgressIPs(ips...).WithConditions(conds.Apply...))
	return kit.ApplyStatus(c.statusWrites, server, apply, func() (metav1.Object, error) {
		return c.hcc.ClerumV1alpha1().McpServers(server.Namespace).ApplyStatus(ctx, apply,
			metav1.ApplyOptions{FieldManager: clerumv1alpha1.FieldManagerNetPol, Force: true})
	})
}

// emitRejections posts one Warning event per new set of rejected bindings.
func (c *Coordinator) emitRejections(server *clerumv1alpha1.McpServer, st serverState) {
	key := describe(rejections(st))
	if key == st.eventKey {
		return
	}
	c.mu.Lock()
	if cur, ok := c.states[server.Name]; ok {
		cur.eventKey = key
	}
	c.mu.Unlock()
	if key != "" {
		c.recorder.Event(server, corev1.EventTypeWarning, reasons.EventEgressBindingRejected, key)
	}
}
