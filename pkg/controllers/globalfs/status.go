package globalfs

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	"github.com/clerum/hcc/pkg/controllers/kit"
	applyv1alpha1 "github.com/clerum/hcc/pkg/generated/applyconfiguration/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/reasons"
)

// status is what one sync found, as the status hcc-globalfilesystem owns:
// the conditions Ready, ConfigResolved, WorkloadReady and RootSeeded,
// phase, rootSeeded, endpoint and observedGeneration.
type status struct {
	g *clerumv1alpha1.GlobalFileSystem

	configResolved, workloadReady, rootSeeded kit.Condition
	// block is the Ready reason that keeps the GFS Degraded whatever its
	// workload does (config, not owned, seed failed); blockMessage says why.
	block, blockMessage string
	available           bool
	seeded              bool
	endpoint            string
	drive               string
}

func newStatus(g *clerumv1alpha1.GlobalFileSystem, drive string) *status {
	st := &status{
		g:              g,
		drive:          drive,
		configResolved: cond(clerumv1alpha1.ConditionConfigResolved, metav1.ConditionUnknown, reasons.Progressing, "not checked yet"),
		workloadReady:  cond(clerumv1alpha1.ConditionWorkloadReady, metav1.ConditionUnknown, reasons.Progressing, "no gfsc Deployment yet"),
	}
	if g.Status.RootSeeded {
		st.seededRoot()
	} else {
		st.seedPending("the seed Job has not run yet")
	}
	return st
}

func cond(typ string, s metav1.ConditionStatus, reason, message string) kit.Condition {
	return kit.Condition{Type: typ, Status: s, Reason: reason, Message: message}
}

func (st *status) config(a resources.Admission) {
	if a.Block != "" {
		st.configResolved = cond(clerumv1alpha1.ConditionConfigResolved, metav1.ConditionFalse, a.Block, a.Message)
		st.degrade(a.Block, a.Message+"; nothing is created or rolled until it is fixed")
		return
	}
	st.configResolved = cond(clerumv1alpha1.ConditionConfigResolved, metav1.ConditionTrue, reasons.ConfigFound, a.Message)
}

// degrade records the first reason the GFS is Degraded whatever its
// workload does.
func (st *status) degrade(reason, message string) {
	if st.block == "" {
		st.block, st.blockMessage = reason, message
	}
}

// workload records what the gfsc Deployment (nil: none of HCC's) says.
func (st *status) workload(d *appsv1.Deployment) {
	switch {
	case d == nil:
		st.workloadReady = cond(clerumv1alpha1.ConditionWorkloadReady, metav1.ConditionFalse, reasons.Progressing, "the gfsc Deployment does not exist")
	case kit.DeploymentAvailable(d):
		st.available = true
		st.workloadReady = cond(clerumv1alpha1.ConditionWorkloadReady, metav1.ConditionTrue, reasons.Available, "the gfsc pod is available")
	default:
		st.workloadReady = cond(clerumv1alpha1.ConditionWorkloadReady, metav1.ConditionFalse, reasons.Progressing, "waiting for the gfsc pod to be available")
	}
}

func (st *status) seedPending(message string) {
	st.seeded = false
	st.rootSeeded = cond(clerumv1alpha1.ConditionRootSeeded, metav1.ConditionFalse, reasons.SeedPending, message)
}

func (st *status) seededRoot() {
	st.seeded = true
	st.rootSeeded = cond(clerumv1alpha1.ConditionRootSeeded, metav1.ConditionTrue, reasons.Seeded,
		fmt.Sprintf("the root directory of drive %s exists", st.drive))
}

func (st *status) seedFailed(message string) {
	st.seeded = false
	st.rootSeeded = cond(clerumv1alpha1.ConditionRootSeeded, metav1.ConditionFalse, reasons.SeedFailed, message)
	st.degrade(reasons.SeedFailed, message)
}

// wasAvailable reports whether the status this sync replaces said the
// workload was serving: Ready, or Degraded because it stopped.
func (st *status) wasAvailable() bool {
	s := st.g.Status
	if s.Phase == clerumv1alpha1.FileSystemReady {
		return true
	}
	ready := meta.FindStatusCondition(s.Conditions, clerumv1alpha1.ConditionReady)
	return s.Phase == clerumv1alpha1.FileSystemDegraded && ready != nil && ready.Reason == reasons.Progressing
}

// summary returns the Ready condition and the phase.
func (st *status) summary() (kit.Condition, clerumv1alpha1.FileSystemPhase) {
	ready := func(s metav1.ConditionStatus, reason, message string) kit.Condition {
		return cond(clerumv1alpha1.ConditionReady, s, reason, message)
	}
	switch {
	case st.block != "":
		return ready(metav1.ConditionFalse, st.block, st.blockMessage), clerumv1alpha1.FileSystemDegraded
	case !st.available:
		phase := clerumv1alpha1.FileSystemInitializing
		if st.wasAvailable() {
			phase = clerumv1alpha1.FileSystemDegraded
		}
		return ready(metav1.ConditionFalse, reasons.Progressing, st.workloadReady.Message), phase
	case !st.seeded:
		return ready(metav1.ConditionFalse, reasons.SeedPending, "the gfsc pod is available; waiting for the root-directory seed"),
			clerumv1alpha1.FileSystemInitializing
	}
	return ready(metav1.ConditionTrue, reasons.Available, "the gfsc pod is available and the drive's root is seeded"),
		clerumv1alpha1.FileSystemReady
}

// build returns the status to apply and whether it differs from the GFS's.
func (st *status) build(now time.Time) (*applyv1alpha1.GlobalFileSystemApplyConfiguration, clerumv1alpha1.FileSystemPhase, bool) {
	g := st.g
	ready, phase := st.summary()
	conds := kit.BuildConditions(g.Status.Conditions, g.Generation, now, ready, st.configResolved, st.workloadReady, st.rootSeeded)
	changed := conds.Changed || g.Status.ObservedGeneration != g.Generation || g.Status.Phase != phase ||
		g.Status.RootSeeded != st.seeded || g.Status.Endpoint != st.endpoint
	s := applyv1alpha1.GlobalFileSystemStatus().WithObservedGeneration(g.Generation).WithConditions(conds.Apply...).
		WithPhase(phase).WithRootSeeded(st.seeded)
	if st.endpoint != "" {
		s.WithEndpoint(st.endpoint)
	}
	return applyv1alpha1.GlobalFileSystem(g.Name, g.Namespace).WithStatus(s), phase, changed
}

// applyStatus writes st by server-side apply when it changed, and returns
// the phase it shows.
func (c *Controller) applyStatus(ctx context.Context, st *status) (clerumv1alpha1.FileSystemPhase, error) {
	apply, phase, changed := st.build(c.clock.Now())
	if !changed {
		return phase, nil
	}
	g := st.g
	err := kit.ApplyStatus(c.statusWrites, g, apply, func() (metav1.Object, error) {
		return c.hcc.ClerumV1alpha1().GlobalFileSystems(g.Namespace).ApplyStatus(ctx, apply,
			metav1.ApplyOptions{FieldManager: clerumv1alpha1.FieldManagerGlobalFileSystem, Force: true})
	})
	if err != nil {
		return phase, fmt.Errorf("applying the status of GlobalFileSystem %s: %w", g.Name, err)
	}
	return phase, nil
}
