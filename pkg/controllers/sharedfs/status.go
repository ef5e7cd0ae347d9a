package sharedfs

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	applyv1alpha1 "github.com/clerum/hcc/pkg/generated/applyconfiguration/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// status is what one sync found, as the status hcc-sharedfilesystem owns:
// the conditions Ready, ConfigResolved, VolumeBound and WorkloadReady, the
// phase, the endpoint and observedGeneration.
type status struct {
	fs       *clerumv1alpha1.SharedFileSystem
	endpoint string
	// wasAvailable: the WFC has been available before, so its being
	// unavailable now is a degradation, not a start.
	wasAvailable bool

	configResolved, volumeBound, workloadReady kit.Condition

	block, blockMessage string // a config block (Admission)
	// claimRefusal is the reason a change to the claim was refused
	// (ShrinkRefused, InvalidSpec); claimMessage says what.
	claimRefusal, claimMessage string
	claimNotOwned              bool
	notOwnedMessage            string
	deployBlocked              bool // the Deployment waits for the claim and the policy
	available                  bool // the WFC Deployment is available
}

func newStatus(fs *clerumv1alpha1.SharedFileSystem, opts resources.Options, wasAvailable bool) *status {
	return &status{
		fs:           fs,
		endpoint:     resources.Endpoint(fs, opts),
		wasAvailable: wasAvailable,
		volumeBound: kit.Condition{Type: clerumv1alpha1.ConditionVolumeBound, Status: metav1.ConditionFalse, Reason: reasons.ClaimPending,
			Message: "the data claim does not exist yet"},
		workloadReady: kit.Condition{Type: clerumv1alpha1.ConditionWorkloadReady, Status: metav1.ConditionFalse, Reason: reasons.Progressing,
			Message: "the WFC Deployment does not exist yet"},
	}
}

// config records the JWT key's validation.
func (st *status) config(a resources.Admission) {
	st.block, st.blockMessage = a.Block, a.Message
	st.configResolved = kit.Condition{Type: clerumv1alpha1.ConditionConfigResolved, Status: metav1.ConditionTrue, Reason: reasons.ConfigFound, Message: a.Message}
	if a.Block != "" {
		st.configResolved.Status, st.configResolved.Reason = metav1.ConditionFalse, a.Block
	}
}

// claimChangeRefused records a claim HCC keeps as it is because the
// builder asks a change claims do not take: a shrink (ShrinkRefused), or a
// storage class or other fixed field changed (InvalidSpec).
func (st *status) claimChangeRefused(r *kit.RefusedError, live *corev1.PersistentVolumeClaim) {
	st.claimRefusal = reasons.InvalidSpec
	if r.Cause == kit.CauseShrink {
		st.claimRefusal = reasons.ShrinkRefused
	}
	st.claimMessage = fmt.Sprintf("%s; the claim is left as it is", r.Error())
	if live != nil {
		size := live.Spec.Resources.Requests[corev1.ResourceStorage]
		st.claimMessage += fmt.Sprintf(" (%s, %s)", size.String(), claimPhase(live))
	}
}

// claimSizeRefused records a spec.size above HCC_SFS_MAX_SIZE: the claim
// is neither created nor grown (InvalidSpec).
func (st *status) claimSizeRefused(err error, live *corev1.PersistentVolumeClaim) {
	st.claimRefusal = reasons.InvalidSpec
	if live == nil {
		st.claimMessage = fmt.Sprintf("%v; the data claim is not created", err)
		return
	}
	size := live.Spec.Resources.Requests[corev1.ResourceStorage]
	st.claimMessage = fmt.Sprintf("%v; the claim is left as it is (%s, %s)", err, size.String(), claimPhase(live))
}

func (st *status) notOwned(message string) { st.notOwnedMessage = message }

// observe records the live claim and Deployment. claimNotOwned and
// deployBlocked must be set before.
func (st *status) observe(claim *corev1.PersistentVolumeClaim, d *appsv1.Deployment) {
	vb := &st.volumeBound
	switch {
	case st.claimRefusal != "":
		vb.Status, vb.Reason, vb.Message = metav1.ConditionFalse, st.claimRefusal, st.claimMessage
	case st.claimNotOwned:
		vb.Status, vb.Reason = metav1.ConditionFalse, reasons.NotOwned
		vb.Message = fmt.Sprintf("PersistentVolumeClaim %s is held by an object HCC does not own", names.WFCData(st.fs.Name))
	case claim == nil:
	case claim.Status.Phase == corev1.ClaimBound:
		vb.Status, vb.Reason = metav1.ConditionTrue, reasons.ClaimBound
		vb.Message = fmt.Sprintf("PersistentVolumeClaim %s is bound to %s", claim.Name, claim.Spec.VolumeName)
	default:
		vb.Message = fmt.Sprintf("PersistentVolumeClaim %s is %s", claim.Name, claimPhase(claim))
	}

	wr := &st.workloadReady
	st.available = d != nil && kit.DeploymentAvailable(d)
	switch {
	case st.available:
		wr.Status, wr.Reason, wr.Message = metav1.ConditionTrue, reasons.Available, "the WFC pod is available"
	case d != nil:
		wr.Message = "waiting for the WFC pod to be available"
	case st.block != "":
		wr.Reason, wr.Message = st.block, "the WFC is not deployed while ConfigResolved is False"
	case st.deployBlocked && claim == nil && st.claimRefusal != "":
		wr.Reason, wr.Message = st.claimRefusal, "the WFC is not deployed: its data claim is not created (VolumeBound)"
	case st.deployBlocked:
		wr.Reason, wr.Message = reasons.NotOwned, "the WFC is not deployed: its data claim or ingress policy is not HCC's"
	}
}

func claimPhase(c *corev1.PersistentVolumeClaim) string {
	if c.Status.Phase == "" {
		return string(corev1.ClaimPending)
	}
	return string(c.Status.Phase)
}

// degraded reports whether something is failing: the configuration, a
// refused claim change, a name held by another, or a WFC that was
// available and is no longer.
func (st *status) degraded() bool {
	return st.block != "" || st.claimRefusal != "" || st.notOwnedMessage != "" || (!st.available && st.wasAvailable)
}

// phase is Ready once the claim is bound and the WFC available with
// nothing failing, Degraded while something fails, else Initializing.
func (st *status) phase() clerumv1alpha1.FileSystemPhase {
	switch {
	case st.degraded():
		return clerumv1alpha1.FileSystemDegraded
	case st.available && st.volumeBound.Status == metav1.ConditionTrue:
		return clerumv1alpha1.FileSystemReady
	}
	return clerumv1alpha1.FileSystemInitializing
}

// ready is the Ready condition: True in phase Ready, else the first reason
// in order of what an operator must act on.
func (st *status) ready() kit.Condition {
	r := kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionFalse}
	switch {
	case st.phase() == clerumv1alpha1.FileSystemReady:
		r.Status, r.Reason, r.Message = metav1.ConditionTrue, reasons.Available, "the data claim is bound and the WFC is available at "+st.endpoint
	case st.block != "":
		r.Reason, r.Message = st.block, st.blockMessage+"; nothing is created or rolled"
	case st.notOwnedMessage != "":
		r.Reason, r.Message = reasons.NotOwned, st.notOwnedMessage
	case st.claimRefusal != "":
		r.Reason, r.Message = st.claimRefusal, st.claimMessage
	case !st.available && st.wasAvailable:
		r.Reason, r.Message = reasons.Progressing, "the WFC was available and is no longer: "+st.workloadReady.Message
	case st.volumeBound.Status != metav1.ConditionTrue:
		r.Reason, r.Message = reasons.ClaimPending, st.volumeBound.Message
	default:
		r.Reason, r.Message = reasons.Progressing, st.workloadReady.Message
	}
	return r
}

// build returns the status to apply and whether it differs from fs's.
func (st *status) build(now time.Time) (*applyv1alpha1.SharedFileSystemApplyConfiguration, bool) {
	fs := st.fs
	conds := kit.BuildConditions(fs.Status.Conditions, fs.Generation, now, st.ready(), st.configResolved, st.volumeBound, st.workloadReady)
	phase := st.phase()
	changed := conds.Changed || fs.Status.ObservedGeneration != fs.Generation || fs.Status.Phase != phase || fs.Status.Endpoint != st.endpoint
	s := applyv1alpha1.SharedFileSystemStatus().WithObservedGeneration(fs.Generation).WithConditions(conds.Apply...).
		WithPhase(phase).WithEndpoint(st.endpoint)
	return applyv1alpha1.SharedFileSystem(fs.Name, fs.Namespace).WithStatus(s), changed
}

// applyStatus writes st by server-side apply when it changed.
func (c *Controller) applyStatus(ctx context.Context, fs *clerumv1alpha1.SharedFileSystem, st *status) error {
	apply, changed := st.build(c.clock.Now())
	if !changed {
		return nil
	}
	err := kit.ApplyStatus(c.statusWrites, fs, apply, func() (metav1.Object, error) {
		return c.hcc.ClerumV1alpha1().SharedFileSystems(fs.Namespace).ApplyStatus(ctx, apply,
			metav1.ApplyOptions{FieldManager: clerumv1alpha1.FieldManagerSharedFileSystem, Force: true})
	})
	if err != nil {
		return fmt.Errorf("applying the status of SharedFileSystem %s: %w", fs.Name, err)
	}
	return nil
}
