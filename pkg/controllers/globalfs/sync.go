package globalfs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// syncGlobalFileSystem brings one GlobalFileSystem's children and status up
// to date (docs/globalfilesystem.md):
//
//  1. one that is gone has its children deleted (they also carry owner
//     references, so the garbage collector would get there too);
//  2. a GFS whose drive changed under a seeded status has rootSeeded reset
//     first, on its own write, so no later failure can leave the new drive
//     recorded as seeded;
//  3. a GFS that does not hold its drive (an older one names it, or
//     another's gfsc still serves it) runs no gfsc and no seed: what it
//     ran is deleted, whatever its configuration says;
//  4. the Postgres Secret and the JWT ConfigMap are validated; a GFS whose
//     configuration is missing or invalid gets nothing created or rolled,
//     and what runs keeps running;
//  5. the egress policy, Service and Deployment are written, and the seed
//     Job until the root is seeded, each on its own: one refused or failed
//     child does not stop the others;
//  6. status is applied when it changed.
func (c *Controller) syncGlobalFileSystem(ctx context.Context, key cache.ObjectName) (kit.Result, error) {
	g, err := c.filesystems.GlobalFileSystems(key.Namespace).Get(key.Name)
	switch {
	case apierrors.IsNotFound(err):
		return kit.Result{}, c.gone(ctx, key)
	case err != nil:
		return kit.Result{}, err
	case g.DeletionTimestamp != nil:
		// Going: the garbage collector deletes the children, whose owner
		// reference names it, and the deletion event brings us to gone.
		return kit.Result{}, nil
	}

	opts := c.cfg.Build
	st := newStatus(g, resources.DriveName(g, opts))
	a := c.admit()
	st.config(a)
	c.reportBlock(g, a)
	live := c.deploymentOf(g)

	var errs []error
	var result kit.Result
	conflict := c.driveConflict(g, st.drive)
	c.reportConflict(g, st.drive, conflict)
	switch deployed := resources.DeployedDrive(live); {
	case (a.Block == "" || conflict != "") && g.Status.RootSeeded && deployed != "" && deployed != st.drive:
		// Before a conflict stops the gfsc that shows the old drive, too.
		st.seedPending(fmt.Sprintf("the drive changed from %s to %s; its root is seeded again", deployed, st.drive))
		st.workload(live)
		if _, err := c.applyStatus(ctx, st); err != nil {
			return kit.Result{}, err
		}
		// The cache has not seen the reset yet; the retry writes the rest.
		return kit.Result{}, fmt.Errorf("globalfilesystem %s: rootSeeded reset for drive %s: %w", g.Name, st.drive, kit.ErrCacheBehind)
	case conflict != "":
		// One writer per drive: this GFS runs no gfsc and no seed, and
		// what it ran stops, before anything else is looked at.
		st.degrade(resources.ReasonDriveConflict, conflict)
		errs = c.stopWriters(ctx, g)
		st.workload(c.deploymentOf(g))
		result.RequeueAfter = refusedRetry
	case a.Block != "":
		// Nothing is written; status shows what still runs.
		st.workload(live)
		if c.serviceOf(g) != nil {
			st.endpoint = resources.Endpoint(g, opts)
		}
	default:
		result, errs = c.ensure(ctx, g, a, st)
	}

	phase, err := c.applyStatus(ctx, st)
	errs = append(errs, err)
	c.state.setPhase(g.Name, phase)
	c.metrics.refresh(c.state)
	return result, errors.Join(errs...)
}

// admit validates the Postgres Secret and the JWT ConfigMap from the caches.
func (c *Controller) admit() resources.Admission {
	ns, opts := c.cfg.Namespace, c.cfg.Build
	secret, err := c.secrets.Secrets(ns).Get(opts.PostgresSecret)
	if err != nil {
		secret = nil
	}
	cm, err := c.configMaps.ConfigMaps(ns).Get(opts.JWTConfigMap)
	if err != nil {
		cm = nil
	}
	return resources.Admit(secret, cm, opts)
}

// driveConflict returns why g may not run a writer of drive, or "" when it
// may (docs/globalfilesystem.md, "One writer per drive"): an older
// GlobalFileSystem holds the drive (resources.DriveHeld, which render shares), or the
// holder g itself waits while a gfsc Deployment of another GlobalFileSystem
// still serves the drive.
func (c *Controller) driveConflict(g *clerumv1alpha1.GlobalFileSystem, drive string) string {
	all, _ := c.filesystems.GlobalFileSystems(g.Namespace).List(k8slabels.Everything())
	if held := resources.DriveHeld(g, all, c.cfg.Build); held != "" {
		return held
	}
	if resources.DeployedDrive(c.deploymentOf(g)) == drive {
		// g's gfsc already serves the drive (two did before HCC kept one
		// writer per drive): it keeps running, and the others stop.
		return ""
	}
	deployments, _ := c.deployments.Deployments(g.Namespace).List(k8slabels.Everything())
	var serving []string
	for _, d := range deployments {
		if !c.ours(g, d.Labels) && anotherGFSC(d) && resources.DeployedDrive(d) == drive {
			serving = append(serving, d.Name)
		}
	}
	if len(serving) > 0 {
		slices.Sort(serving)
		return fmt.Sprintf("drive %s is still served by the gfsc Deployment %s of another GlobalFileSystem; %s's gfsc starts once it is gone",
			drive, strings.Join(serving, ", "), g.Name)
	}
	return ""
}

// anotherGFSC reports whether d is the gfsc Deployment of a
// GlobalFileSystem: named for the file system its label names and
// controlled by a GlobalFileSystem of that name. Labels and a container
// env are anyone's to write; a Deployment that only looks like a gfsc
// would otherwise keep a drive's holder from starting forever. A copy
// that meets the rule is cleared by someone else's hands: the garbage
// collector deletes it when its owner does not exist, and its owner's
// reconciler stops it when that owner does not hold the drive.
func anotherGFSC(d *appsv1.Deployment) bool {
	owner := metav1.GetControllerOf(d)
	label := d.Labels[names.LabelGlobalFileSystem]
	return label != "" && owner != nil && owner.Kind == gvk.Kind && names.Label(owner.Name) == label &&
		d.Name == names.GFSCWorkload(owner.Name)
}

// stopWriters deletes g's gfsc Deployment and seed Job, where they are
// HCC's: a GlobalFileSystem that does not hold its drive writes nothing to
// it. The Service and the egress policy stay; they write nothing.
func (c *Controller) stopWriters(ctx context.Context, g *clerumv1alpha1.GlobalFileSystem) []error {
	var errs []error
	if d, err := c.deployments.Deployments(g.Namespace).Get(names.GFSCWorkload(g.Name)); err == nil && d.DeletionTimestamp == nil {
		_, err := kit.DeleteChild(ctx, c.children, kit.Deployments, gvk, g.Name, names.LabelGlobalFileSystem, d)
		errs = append(errs, err)
	}
	if j, err := c.jobs.Jobs(g.Namespace).Get(resources.SeedJobName(g.Name)); err == nil && j.DeletionTimestamp == nil {
		_, err := kit.DeleteChild(ctx, c.children, kit.Jobs, gvk, g.Name, names.LabelGlobalFileSystem, j)
		errs = append(errs, err)
	}
	return errs
}

// reportConflict posts one Warning event when g enters a drive conflict
// and one Normal event when it leaves it.
func (c *Controller) reportConflict(g *clerumv1alpha1.GlobalFileSystem, drive, conflict string) {
	previous := c.state.conflict.Set(g.Name, conflict)
	log := kit.LogObjectOf(c.log, g.Namespace, g.Name)
	switch {
	case conflict != "" && conflict != previous:
		log.Info().Str("drive", drive).Msg("globalfilesystem in a drive conflict")
		c.recorder.Event(g, corev1.EventTypeWarning, resources.ReasonDriveConflict, conflict)
	case conflict == "" && previous != "":
		log.Info().Str("drive", drive).Msg("globalfilesystem holds its drive")
		c.recorder.Eventf(g, corev1.EventTypeNormal, reasons.EventReleased, "holds drive %s now; gfsc starts", drive)
	}
}

// reportBlock posts one event per block and per release.
func (c *Controller) reportBlock(g *clerumv1alpha1.GlobalFileSystem, a resources.Admission) {
	previous := c.state.block.Set(g.Name, a.Block)
	log := kit.LogObjectOf(c.log, g.Namespace, g.Name)
	switch {
	case a.Block != "" && a.Block != previous:
		log.Info().Str("reason", a.Block).Msg("globalfilesystem blocked")
		c.recorder.Eventf(g, corev1.EventTypeWarning, reasons.EventBlocked, "%s: %s; nothing is created or rolled", a.Block, a.Message)
	case a.Block == "" && previous != "":
		log.Info().Str("was", previous).Msg("globalfilesystem released")
		c.recorder.Eventf(g, corev1.EventTypeNormal, reasons.EventReleased, "no longer blocked (was %s)", previous)
	}
}

// ensure writes g's children and records what they say in st.
func (c *Controller) ensure(ctx context.Context, g *clerumv1alpha1.GlobalFileSystem, a resources.Admission, st *status) (kit.Result, []error) {
	opts, err := c.buildOptions(ctx, a)
	if err != nil {
		// Nothing is written from a guess: the retry reads it again.
		return kit.Result{}, []error{err}
	}
	ns := g.Namespace
	owner := kit.Owner{Object: g, GVK: gvk, IdentityLabel: names.LabelGlobalFileSystem}
	// The one plan, which render prints too (resources.Plan).
	desired := resources.MakeChildren(g, a, opts)
	var errs []error
	var refused []string
	// write records one child's outcome and reports whether it is HCC's
	// as desired.
	write := func(err error) bool {
		var r *kit.RefusedError
		switch {
		case errors.As(err, &r):
			refused = append(refused, r.Error())
			return false
		case err != nil:
			errs = append(errs, err)
			return false
		}
		return true
	}

	// The policy first: gfsc's pods, and the seed's, which hold the
	// connection string, never start or roll unisolated — not while the
	// policy's name is held by an object HCC does not own, nor while its
	// write fails.
	isolated := write(kit.EnsureFrom(ctx, c.children, kit.NetworkPolicies, owner, c.policies.NetworkPolicies(ns), desired.EgressPolicy))
	if write(kit.EnsureFrom(ctx, c.children, kit.Services, owner, c.services.Services(ns), desired.Service)) {
		st.endpoint = resources.Endpoint(g, opts)
	}
	cached, err := c.deployments.Deployments(ns).Get(names.GFSCWorkload(g.Name))
	if err != nil {
		cached = nil
	}
	if isolated {
		live, _, err := kit.Ensure(ctx, c.children, kit.Deployments, owner, cached, desired.Deployment)
		if write(err) {
			st.workload(live)
		} else if err != nil && !errors.Is(err, kit.ErrNotOwned) {
			// The write failed (retried): status shows what runs meanwhile.
			st.workload(c.deploymentOf(g))
		}
		write(c.ensureSeed(ctx, g, desired.SeedJob, owner, a, st))
	} else {
		st.workload(cached)
	}

	var result kit.Result
	if len(refused) > 0 {
		slices.Sort(refused)
		st.degrade(reasons.NotOwned, strings.Join(refused, "; "))
		result.RequeueAfter = refusedRetry
	}
	return result, errs
}

// ensureSeed runs the seed Job desired until the drive's root is seeded,
// and records the outcome in st. Once status says seeded the Job is never
// created again (its TTL removes a finished one). A Job for another drive,
// or one not yet succeeded that read a configuration since rotated, is
// deleted and, once gone, created anew.
func (c *Controller) ensureSeed(ctx context.Context, g *clerumv1alpha1.GlobalFileSystem, desired *batchv1.Job, owner kit.Owner, a resources.Admission, st *status) error {
	if desired == nil {
		// Status says seeded (MakeChildren plans no seed Job then), as
		// newStatus recorded.
		return nil
	}
	if !c.cfg.SeedKey.Usable() {
		st.seedPending("no seed-Job key is configured (INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET)")
		return errNoSeedKey
	}
	live, err := c.jobs.Jobs(g.Namespace).Get(desired.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		live = nil
	}
	if live != nil {
		switch _, _, err := kit.Plan(kit.Jobs, owner, live, desired); {
		case errors.Is(err, kit.ErrNotOwned):
			// Ensure reports the refusal (event, metric) and writes nothing.
			_, _, err = kit.Ensure(ctx, c.children, kit.Jobs, owner, live, desired)
			st.seedPending("the seed Job's name is held by an object HCC does not own")
			return err
		case errors.Is(err, kit.ErrBeingDeleted):
			st.seedPending("waiting for the previous seed Job to be deleted")
			return nil
		}
		complete, failed := resources.SeedJobState(live)
		stale := live.Annotations[resources.AnnotationDrive] != st.drive ||
			(!complete && live.Annotations[resources.AnnotationConfigDigest] != a.Digest)
		switch {
		case !resources.SeedJobMarked(c.cfg.SeedKey, g, live) && live.UID != "" && c.state.seedMarked(g.Name) == live.UID:
			// This process created and marked this very Job; the cache has
			// not seen the mark yet (the create's event can come first).
			st.seedPending(fmt.Sprintf("the seed Job %s has not completed", live.Name))
			return nil
		case !resources.SeedJobMarked(c.cfg.SeedKey, g, live):
			// HCC's labels say the Job may be taken over, not that HCC
			// created it: only the mark says that, and nothing an unmarked
			// Job reports is believed.
			message := fmt.Sprintf("the seed Job %s carries no valid mark of HCC's (it was not created by HCC, or by an HCC before marks); it is replaced", live.Name)
			st.seedPending(message)
			c.recorder.Event(g, corev1.EventTypeWarning, resources.EventSeedJobUnmarked, message)
			_, err := kit.DeleteChild(ctx, c.children, kit.Jobs, gvk, g.Name, names.LabelGlobalFileSystem, live)
			return err
		case stale:
			st.seedPending("the seed Job ran for another drive or configuration; it is replaced")
			_, err := kit.DeleteChild(ctx, c.children, kit.Jobs, gvk, g.Name, names.LabelGlobalFileSystem, live)
			return err
		case complete:
			c.state.setSeedFailed(g.Name, false)
			st.seededRoot()
			return nil
		case failed:
			message := fmt.Sprintf("the seed Job %s failed: %s; it is retried when it expires (%ds after it finished) or the configuration changes",
				live.Name, jobFailure(live), resources.SeedTTL)
			st.seedFailed(message)
			if c.state.setSeedFailed(g.Name, true) {
				c.recorder.Event(g, corev1.EventTypeWarning, reasons.SeedFailed, message)
			}
			return nil
		}
	}
	c.state.setSeedFailed(g.Name, false)
	st.seedPending(fmt.Sprintf("the seed Job %s has not completed", desired.Name))
	created, action, err := kit.Ensure(ctx, c.children, kit.Jobs, owner, live, desired)
	if err != nil || action != kit.ActionCreate {
		return err
	}
	return c.markSeedJob(ctx, g, created)
}

// buildOptions returns the builders' options with the init container's
// wait target: the host and port of the Postgres connection string. The
// Secret cache holds digests, so the Secret is read from the API server,
// once per configuration digest (a changed value changes the digest, which
// rolls the pods anyway); the value itself is dropped at once.
func (c *Controller) buildOptions(ctx context.Context, a resources.Admission) (resources.Options, error) {
	opts := c.cfg.Build
	c.wait.mu.Lock()
	defer c.wait.mu.Unlock()
	if c.wait.digest != a.Digest {
		s, err := c.kube.CoreV1().Secrets(c.cfg.Namespace).Get(ctx, opts.PostgresSecret, metav1.GetOptions{})
		if err != nil {
			return opts, fmt.Errorf("reading the Postgres host from Secret %s: %w", opts.PostgresSecret, err)
		}
		host, port := resources.PostgresWaitTarget(string(s.Data[opts.PostgresSecretKey]))
		c.wait.digest, c.wait.host, c.wait.port = a.Digest, host, port
	}
	opts.WaitHost, opts.WaitPort = c.wait.host, c.wait.port
	return opts, nil
}

// markSeedJob writes the mark onto the Job this sync created, now that the
// API server has given it its UID (kit.MarkCreated: the update names that
// UID, so it never marks another Job that took the name since, and a
// Conflict re-reads the Job). If it fails the Job stays unmarked, and the
// next sync replaces it: a seed runs again, which is idempotent.
func (c *Controller) markSeedJob(ctx context.Context, g *clerumv1alpha1.GlobalFileSystem, created *batchv1.Job) error {
	if !c.cfg.SeedKey.Usable() {
		return errNoSeedKey
	}
	sign := func(j *batchv1.Job) string { return resources.SeedJobMark(c.cfg.SeedKey, g, j) }
	if _, err := kit.MarkCreated(ctx, c.children, kit.Jobs, created, sign); err != nil {
		return err
	}
	c.state.setSeedMarked(g.Name, created.UID)
	return nil
}

// errNoSeedKey: without INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET no seed Job
// could ever be believed, and every one would be replaced forever.
var errNoSeedKey = errors.New("globalfilesystem: no seed-Job key (INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET is empty); the seed Job is not created")

// jobFailure is the reason of a failed Job's Failed condition.
func jobFailure(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Reason != "" {
			return c.Reason
		}
	}
	return "no reason given"
}

// gone deletes the children of a GlobalFileSystem no longer in the cache:
// every one the caches show under its names that is its by the ownership
// rule (kit.DeleteChild); anything else is left alone.
func (c *Controller) gone(ctx context.Context, key cache.ObjectName) error {
	c.state.forget(key.Name)
	c.metrics.refresh(c.state)
	ns, name := key.Namespace, key.Name
	var errs []error
	del := func(_ bool, err error) { errs = append(errs, err) }
	if d, err := c.deployments.Deployments(ns).Get(names.GFSCWorkload(name)); err == nil {
		del(kit.DeleteChild(ctx, c.children, kit.Deployments, gvk, name, names.LabelGlobalFileSystem, d))
	}
	if s, err := c.services.Services(ns).Get(names.GFSCWorkload(name)); err == nil {
		del(kit.DeleteChild(ctx, c.children, kit.Services, gvk, name, names.LabelGlobalFileSystem, s))
	}
	if p, err := c.policies.NetworkPolicies(ns).Get(names.GFSCEgressPolicy(name)); err == nil {
		del(kit.DeleteChild(ctx, c.children, kit.NetworkPolicies, gvk, name, names.LabelGlobalFileSystem, p))
	}
	if j, err := c.jobs.Jobs(ns).Get(resources.SeedJobName(name)); err == nil {
		del(kit.DeleteChild(ctx, c.children, kit.Jobs, gvk, name, names.LabelGlobalFileSystem, j))
	}
	return errors.Join(errs...)
}

func (c *Controller) deploymentOf(g *clerumv1alpha1.GlobalFileSystem) *appsv1.Deployment {
	d, err := c.deployments.Deployments(g.Namespace).Get(names.GFSCWorkload(g.Name))
	if err != nil || !c.ours(g, d.Labels) {
		return nil
	}
	return d
}

func (c *Controller) serviceOf(g *clerumv1alpha1.GlobalFileSystem) *corev1.Service {
	s, err := c.services.Services(g.Namespace).Get(names.GFSCWorkload(g.Name))
	if err != nil || !c.ours(g, s.Labels) {
		return nil
	}
	return s
}

// ours reports whether a managed object's identity label names g.
func (c *Controller) ours(g *clerumv1alpha1.GlobalFileSystem, l map[string]string) bool {
	return l[names.LabelGlobalFileSystem] == names.Label(g.Name)
}
