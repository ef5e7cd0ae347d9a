package mcpserver

import (
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
	applyv1alpha1 "github.com/clerum/hcc/pkg/generated/applyconfiguration/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/reasons"
)

// status collects, during one sync, every status field the field manager
// hcc-mcpserver owns: deployed, ready, observedGeneration and the
// conditions Ready, SecretsResolved, ImageAllowed, ReplicasCapped and (for
// remote servers) RemoteReachable and FieldsIgnored. Under server-side apply
// a field the manager stops sending is removed, so all of them are sent on
// every write.
type status struct {
	server          *clerumv1alpha1.McpServer
	deployedNow     bool
	readyNow        bool
	ready           kit.Condition
	secretsResolved kit.Condition
	imageAllowed    kit.Condition
	replicasCapped  kit.Condition
	remoteReachable *kit.Condition
	fieldsIgnored   *kit.Condition
	secretsMessage  string
	imageMessage    string
	invalidMessage  string
}

func newStatus(s *clerumv1alpha1.McpServer) *status {
	st := &status{server: s}
	replicas, capped := resources.Replicas(s)
	st.replicasCapped = kit.Condition{Type: clerumv1alpha1.ConditionReplicasCapped, Status: metav1.ConditionFalse,
		Reason: reasons.ReplicasAsked, Message: fmt.Sprintf("runs %d replica(s) as asked", replicas)}
	if capped {
		st.replicasCapped = kit.Condition{Type: clerumv1alpha1.ConditionReplicasCapped, Status: metav1.ConditionTrue,
			Reason: reasons.StdioSingleton, Message: fmt.Sprintf("a stdio server runs %d replica, not %d", resources.MaxStdioReplicas, ptr.Deref(s.Spec.Replicas, 1))}
	}
	if s.Spec.Remote != nil {
		st.fieldsIgnored = fieldsIgnored(s)
	}
	return st
}

// fieldsIgnored is a remote server's FieldsIgnored condition: True, naming
// the fields its egress proxy does not use (resources.IgnoredFields), or
// False when it sets none. A server that is not remote has none: all of
// its fields are used.
func fieldsIgnored(s *clerumv1alpha1.McpServer) *kit.Condition {
	if msg := resources.IgnoredMessage(s); msg != "" {
		return &kit.Condition{Type: clerumv1alpha1.ConditionFieldsIgnored, Status: metav1.ConditionTrue,
			Reason: reasons.RemoteFieldsIgnored, Message: msg}
	}
	return &kit.Condition{Type: clerumv1alpha1.ConditionFieldsIgnored, Status: metav1.ConditionFalse, Reason: reasons.NoFieldsIgnored,
		Message: "remote server: it sets none of spec.image, command, args, env and envSecret, which its egress proxy would ignore"}
}

func (st *status) secrets(sc resources.SecretCheck) {
	st.secretsMessage = sc.Message()
	if len(sc.Missing) == 0 {
		st.secretsResolved = kit.Condition{Type: clerumv1alpha1.ConditionSecretsResolved, Status: metav1.ConditionTrue,
			Reason: reasons.SecretsFound, Message: st.secretsMessage}
		return
	}
	st.secretsResolved = kit.Condition{Type: clerumv1alpha1.ConditionSecretsResolved, Status: metav1.ConditionFalse,
		Reason: reasons.SecretsMissing, Message: st.secretsMessage}
}

func (st *status) image(v resources.ImageVerdict, enforce bool) {
	st.imageMessage = v.Message
	switch {
	case v.Allowed:
		st.imageAllowed = kit.Condition{Type: clerumv1alpha1.ConditionImageAllowed, Status: metav1.ConditionTrue, Reason: v.Reason, Message: v.Message}
	case enforce:
		st.imageAllowed = kit.Condition{Type: clerumv1alpha1.ConditionImageAllowed, Status: metav1.ConditionFalse, Reason: reasons.ImageNotAllowed, Message: v.Message}
	default:
		st.imageAllowed = kit.Condition{Type: clerumv1alpha1.ConditionImageAllowed, Status: metav1.ConditionFalse, Reason: reasons.AuditOnly,
			Message: v.Message + "; audit mode: deployed anyway"}
	}
}

func (st *status) invalid(err error) { st.invalidMessage = err.Error() }

func (st *status) remote(covered bool, host string, port int32) {
	c := kit.Condition{Type: clerumv1alpha1.ConditionRemoteReachable, Status: metav1.ConditionTrue, Reason: reasons.RemoteCovered,
		Message: fmt.Sprintf("an egress binding covers %s:%d", host, port)}
	if !covered {
		c.Status, c.Reason = metav1.ConditionFalse, reasons.RemoteNotCovered
		c.Message = fmt.Sprintf("no egress binding of this server covers %s:%d: its proxy cannot reach the upstream", host, port)
	}
	st.remoteReachable = &c
}

func (st *status) blockMessage(reason string) string {
	switch reason {
	case reasons.SecretsMissing:
		return st.secretsMessage
	case reasons.ImageNotAllowed:
		return st.imageMessage
	case reasons.InvalidSpec:
		return st.invalidMessage
	case reasons.EgressPending:
		return "the egress policies of this generation are not in the cluster yet (see ExternalEgressReady)"
	}
	return reason
}

// blocked records a server kept from deploying. Its Deployment, if one
// exists from before, is left running and reported as it is.
func (st *status) blocked(reason string) {
	st.ready = kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: st.blockMessage(reason)}
	// Pods left running are not offered: hcc-api reads ready, and a
	// blocked server (a refused image, a missing Secret) is not one to use.
	st.deployedNow, st.readyNow = false, false
}

// disabled records a disabled server that could not be rebuilt (it is
// blocked too) and was scaled to zero as it was.
func (st *status) disabled() {
	st.ready = kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reasons.Disabled,
		Message: "spec.enabled is false: the Deployment is scaled to zero"}
	st.deployedNow, st.readyNow = false, false
}

func (st *status) notOwned(err error) {
	st.ready = kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reasons.NotOwned, Message: err.Error()}
}

// deployed records the children written for the current generation.
func (st *status) deployed(s *clerumv1alpha1.McpServer, live *appsv1.Deployment) {
	st.deployedNow = live != nil && s.Spec.IsEnabled()
	st.readyNow = live != nil && kit.DeploymentAvailable(live)
	switch {
	case !s.Spec.IsEnabled():
		st.ready = kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reasons.Disabled,
			Message: "spec.enabled is false: the Deployment is scaled to zero"}
	case st.readyNow:
		st.ready = kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: reasons.Available,
			Message: fmt.Sprintf("%d replica(s) available", live.Status.AvailableReplicas)}
	default:
		st.ready = kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reasons.Progressing,
			Message: "waiting for the Deployment's replicas to be available"}
	}
}

// build returns the status to apply and whether it differs from the
// server's.
func (st *status) build(now time.Time) (*applyv1alpha1.McpServerApplyConfiguration, bool) {
	s := st.server
	want := []kit.Condition{st.ready, st.secretsResolved, st.imageAllowed, st.replicasCapped}
	for _, c := range []*kit.Condition{st.remoteReachable, st.fieldsIgnored} {
		if c != nil {
			want = append(want, *c)
		}
	}
	conds := kit.BuildOwnedConditions(s.Status.Conditions, ownedConditions, s.Generation, now, want...)
	changed := conds.Changed || s.Status.Deployed != st.deployedNow || s.Status.Ready != st.readyNow ||
		s.Status.ObservedGeneration != s.Generation
	apply := applyv1alpha1.McpServer(s.Name, s.Namespace).WithStatus(applyv1alpha1.McpServerStatus().
		WithObservedGeneration(s.Generation).
		WithDeployed(st.deployedNow).
		WithReady(st.readyNow).
		WithConditions(conds.Apply...))
	return apply, changed
}

// ownedConditions are every condition type hcc-mcpserver writes.
var ownedConditions = []string{clerumv1alpha1.ConditionReady, clerumv1alpha1.ConditionSecretsResolved,
	clerumv1alpha1.ConditionImageAllowed, clerumv1alpha1.ConditionReplicasCapped, clerumv1alpha1.ConditionRemoteReachable,
	clerumv1alpha1.ConditionFieldsIgnored}

// Server states, the values of clerum_hcc_mcpserver_servers{state}.
var serverStates = []string{"ready", "deployed", "blocked", "disabled", "not-owned"}

// blockReasons are every reason a server can be blocked for, so each
// gauge series exists (at zero) from the start.
var blockReasons = []string{reasons.EgressPending, reasons.ImageNotAllowed, reasons.InvalidSpec, reasons.SecretsMissing}

// remoteWarnings remembers, per server, the generation a remote server's
// warning (or, in another instance, its FieldsIgnored event) was last given
// for.
type remoteWarnings struct {
	mu         sync.Mutex
	generation map[string]int64
}

func newRemoteWarnings() *remoteWarnings {
	return &remoteWarnings{generation: map[string]int64{}}
}

// due reports whether the remote warning for generation is due (once per
// generation), and records it given.
func (w *remoteWarnings) due(server string, generation int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.generation[server] == generation {
		return false
	}
	w.generation[server] = generation
	return true
}

func (w *remoteWarnings) forget(server string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.generation, server)
}

// forget drops what the operator remembers of a server that is gone.
func (c *Controller) forget(server string) {
	c.blocked.Forget(server)
	c.states.Forget(server)
	c.warned.forget(server)
	c.noted.forget(server)
}

// refreshGauges sets the gauges from the counts. Refreshes are one at a
// time, so the one that follows the last change leaves the gauges right.
func (c *Controller) refreshGauges() {
	c.gauges.Lock()
	defer c.gauges.Unlock()
	for _, r := range blockReasons {
		c.metrics.Blocked.WithLabelValues(r).Set(float64(c.blocked.Count(r)))
	}
	for _, st := range serverStates {
		c.metrics.Servers.WithLabelValues(st).Set(float64(c.states.Count(st)))
	}
}

// stateOf is the state st describes.
func (st *status) stateOf() string {
	switch {
	case st.ready.Reason == reasons.Disabled:
		return "disabled"
	case st.ready.Reason == reasons.NotOwned:
		return "not-owned"
	case st.readyNow && st.deployedNow:
		return "ready"
	case st.deployedNow:
		return "deployed"
	}
	return "blocked"
}
