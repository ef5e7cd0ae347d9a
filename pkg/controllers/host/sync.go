package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controlapi"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
	"github.com/clerum/hcc/pkg/secretdigest"
	"github.com/rs/zerolog"
)

// syncHost brings one Host's children and status up to date
// (docs/host.md):
//
//  1. a Host that is going (deletionTimestamp) has its children deleted in
//     both namespaces, then its finalizer removed; one that is gone and
//     was seen deleted has its leftovers deleted;
//  2. otherwise the finalizer is added, its Context resolved (it must hold
//     its contextId: the oldest Context with it wins) and spec.secretRef
//     validated; a Host that fails either is not deployed, and a Context
//     failure also stops its pods (they would carry a contextId another
//     tenant may hold);
//  3. the identity (ServiceAccount, Role, RoleBinding), workspace claim and
//     runtime-token Secret are written, the credential obtained from the
//     Control API when it is missing, not marked by HCC, older than the
//     one this process wrote last, issued for another UID or due;
//  4. the Deployment is written only once all of those, and the desktop
//     policy when the desktop is on, are HCC's; the Service regardless; in
//     the channels namespace the reader's egress policy first, the reader
//     only once that policy is HCC's;
//  5. status is applied when it changed, and the Host is looked at again
//     when its credential is next due.
func (c *Controller) syncHost(ctx context.Context, key cache.ObjectName) (kit.Result, error) {
	h, err := c.hosts.Hosts(key.Namespace).Get(key.Name)
	switch {
	case apierrors.IsNotFound(err):
		return kit.Result{}, c.gone(ctx, key.Name)
	case err != nil:
		return kit.Result{}, err
	case h.DeletionTimestamp != nil:
		return kit.Result{}, c.finalize(ctx, h)
	}
	if err := c.addFinalizer(ctx, h); err != nil {
		return kit.Result{}, err
	}

	st := newStatus(h)
	a := c.admit(h, st)
	block := a.Block
	c.reportBlock(h, block, st)
	var errs []error
	var result kit.Result
	if block != "" {
		switch block {
		case reasons.ContextMissing, reasons.ContextConflict:
			// Fail closed: no pod may carry a contextId its Context does
			// not hold.
			errs = append(errs, c.stopPods(ctx, h))
		default:
			// A Secret block: running pods keep running, lose the grant
			// of a Secret they may no longer read, and keep a fresh
			// credential.
			errs = append(errs, c.revokeSecretRef(ctx, h))
			if c.deploymentOf(h) != nil {
				owner := kit.Owner{Object: h, GVK: gvk, IdentityLabel: names.LabelHost}
				cred, err := c.ensureCredential(ctx, h, owner, st)
				errs = append(errs, err)
				if cred.refreshIn > 0 {
					result.RequeueAfter = cred.refreshIn
				}
				if cred.retryAfter > 0 {
					result.RequeueAfter = cred.retryAfter
				}
			}
		}
		st.blocked(block, c.deploymentOf(h))
	} else {
		result, errs = c.ensure(ctx, h, a, st)
	}
	c.state.setState(h.Name, st.stateOf())
	c.state.setExpiry(h.Name, st.expiresAt)
	c.metrics.refresh(c.state, c.clock.Now())
	errs = append(errs, c.applyStatus(ctx, h, st))
	return result, errors.Join(errs...)
}

// syncStop is the stop fast path (docs/host.md): when h's running pods
// carry a contextId its Context no longer holds — the Context is gone, an
// older Context holds its contextId, or the contextId changed — they are
// scaled to zero at once, from the listers alone, before the NetworkPolicy
// operator can grant that contextId's allows to another tenant's Context.
// A Host being deleted has its pods scaled to zero regardless: its
// children are deleted by the main sync, which may wait behind Control API
// calls, while its Context may be deleted or repointed and its contextId
// taken by another tenant's — and no pod of a Host on its way out needs to
// run. Everything else, restarting the pods included, is the main sync's.
func (c *Controller) syncStop(ctx context.Context, key cache.ObjectName) (kit.Result, error) {
	h, err := c.hosts.Hosts(key.Namespace).Get(key.Name)
	if err != nil {
		return kit.Result{}, nil // gone: the main sync deletes its leftovers
	}
	live := c.deploymentOf(h)
	if live == nil || ptr.Deref(live.Spec.Replicas, 1) == 0 {
		return kit.Result{}, nil
	}
	log := c.base.LogFor(key)
	if h.DeletionTimestamp != nil {
		log.Info().Msg("stopping the pods of a Host being deleted")
		return kit.Result{}, c.stopPods(ctx, h)
	}
	running := live.Spec.Template.Labels[names.LabelContext]
	a := c.admit(h, newStatus(h))
	if a.ContextID != "" && a.ContextID == running {
		return kit.Result{}, nil // still vouched for (a Secret block leaves pods running)
	}
	log.Info().Str("running", running).Str("holds", a.ContextID).Str("reason", a.Block).
		Msg("stopping the Host's pods: its Context no longer holds the contextId they carry")
	return kit.Result{}, c.stopPods(ctx, h)
}

// admit decides h's admission from the listers (Admit) and records it in
// st.
func (c *Controller) admit(h *clerumv1alpha1.Host, st *status) resources.Admission {
	context, err := c.contexts.Contexts(c.cfg.ContextNamespace).Get(h.Spec.ContextRef)
	if err != nil {
		context = nil
	}
	var sameID []*clerumv1alpha1.Context
	if context != nil {
		same, _ := c.contextIdx.ByIndex(contextsByID, context.Spec.ContextID)
		for _, o := range same {
			sameID = append(sameID, o.(*clerumv1alpha1.Context))
		}
	}
	a := resources.Admit(h, context, sameID, func(name string) *corev1.Secret {
		s, err := c.secrets.Secrets(h.Namespace).Get(name)
		if err != nil {
			return nil
		}
		return s
	}, c.cfg.ContextNamespace, c.cfg.Build)
	st.contextMessage = a.ContextMessage
	if a.SecretsChecked {
		st.secrets(a.SecretsOK, a.SecretsMessage)
	}
	return a
}

// revokeSecretRef rewrites h's Role, if it has one of HCC's, without the
// grant of spec.secretRef's Secret.
func (c *Controller) revokeSecretRef(ctx context.Context, h *clerumv1alpha1.Host) error {
	live, err := c.roles.Roles(h.Namespace).Get(names.HostIdentity(h.Name))
	if err != nil {
		return nil
	}
	bare := h.DeepCopy()
	bare.Spec.SecretRef = nil
	owner := kit.Owner{Object: h, GVK: gvk, IdentityLabel: names.LabelHost}
	if _, _, err := kit.Ensure(ctx, c.children, kit.Roles, owner, live, resources.BuildRole(bare, c.cfg.Build)); err != nil && !isRefused(err) {
		return err
	}
	return nil
}

// logFor is the operator's logger for lines about h: they name it under
// kit.LogObject (docs/reconcilers.md#logs).
func (c *Controller) logFor(h *clerumv1alpha1.Host) *zerolog.Logger {
	log := kit.LogObjectOf(c.log, h.Namespace, h.Name)
	return &log
}

// reportBlock posts one event per block and per release.
func (c *Controller) reportBlock(h *clerumv1alpha1.Host, block string, st *status) {
	previous := c.state.blocks.Set(h.Name, block)
	switch {
	case block != "" && block != previous:
		c.logFor(h).Info().Str("reason", block).Msg("host blocked")
		c.recorder.Eventf(h, corev1.EventTypeWarning, reasons.EventBlocked, "%s: %s", block, st.blockMessage(block))
	case block == "" && previous != "":
		c.logFor(h).Info().Str("was", previous).Msg("host released")
		c.recorder.Eventf(h, corev1.EventTypeNormal, reasons.EventReleased, "no longer blocked (was %s)", previous)
	}
}

// ensure writes the children of h, admitted by a, as resources.MakeChildren
// plans them (the plan render prints), and reports what they say in st. It
// goes on past a failed or refused child: one bad object does not stop the
// others, except that the Deployment waits for every object its pods depend
// on.
func (c *Controller) ensure(ctx context.Context, h *clerumv1alpha1.Host, a resources.Admission, st *status) (kit.Result, []error) {
	contextID := a.ContextID
	// deploymentErr is the Deployment's, reported when it would be written.
	want, deploymentErr := resources.MakeChildren(h, a, c.cfg.Build)
	owner := kit.Owner{Object: h, GVK: gvk, IdentityLabel: names.LabelHost}
	var errs []error
	var refused []string
	// write records the outcome of one child; it returns whether the child
	// is HCC's and usable. A change HCC cannot make to a child of its own
	// (a claim that would shrink or change class after a configuration
	// change) leaves the child as it is, reported by the kit, and usable:
	// it stops neither the Deployment nor its pods.
	write := func(err error) bool {
		switch {
		case isOwnership(err):
			var r *kit.RefusedError
			errors.As(err, &r)
			refused = append(refused, r.Error())
			return false
		case isRefused(err):
			return true
		case err != nil:
			errs = append(errs, err)
			return false
		}
		return true
	}

	// The pod's identity and volumes: the Deployment needs them all.
	ready := true
	ready = write(kit.EnsureFrom(ctx, c.children, kit.ServiceAccounts, owner, c.accounts.ServiceAccounts(h.Namespace), want.ServiceAccount)) && ready
	ready = write(kit.EnsureFrom(ctx, c.children, kit.Roles, owner, c.roles.Roles(h.Namespace), want.Role)) && ready
	ready = write(kit.EnsureFrom(ctx, c.children, kit.RoleBindings, owner, c.bindings.RoleBindings(h.Namespace), want.RoleBinding)) && ready
	ready = write(kit.EnsureFrom(ctx, c.children, c.claimKind, owner, c.claims.PersistentVolumeClaims(h.Namespace), want.WorkspaceClaim)) && ready
	// A failed refresh leaves the credential in place (present): the
	// Deployment is still ensured, and AuthReady says the refresh failed.
	cred, err := c.ensureCredential(ctx, h, owner, st)
	write(err)
	ready = cred.present && ready
	// The ConfigMap every mcp-host container loads: a pod must not start
	// without it. A running one is left as it is (not rolled).
	configMissing := c.configMissing()
	ready = configMissing == "" && ready

	// With the desktop on, its policy is written before the pods start: in
	// a host namespace without a default deny it is what confines their
	// ingress, so the Deployment waits for it like for its volumes.
	if want.DesktopPolicy != nil {
		ready = write(kit.EnsureFrom(ctx, c.children, kit.NetworkPolicies, owner, c.policies.NetworkPolicies(h.Namespace), want.DesktopPolicy)) && ready
	}

	var live *appsv1.Deployment
	switch {
	case ready && c.admit(h, newStatus(h)).ContextID != contextID:
		// The Context changed while this sync wrote; the sync it queued
		// decides again. Never a pod with a contextId decided before.
		errs = append(errs, fmt.Errorf("host %s: its Context changed during the sync: %w", h.Name, kit.ErrCacheBehind))
	case ready:
		err := deploymentErr
		if err == nil {
			live, _, err = kit.Ensure(ctx, c.children, kit.Deployments, owner, c.deploymentOf(h), want.Deployment)
		}
		write(err)
	case len(refused) > 0:
		// Something the pods depend on — their account, its Role or
		// binding, their volume, their credential, their desktop policy —
		// is not HCC's: the pods stop rather than run with someone else's.
		errs = append(errs, c.stopPods(ctx, h))
	}
	write(kit.EnsureFrom(ctx, c.children, kit.Services, owner, c.services.Services(h.Namespace), want.Service))
	if want.DesktopPolicy == nil {
		// Deleted after the Deployment has dropped the desktop.
		if p, err := c.policies.NetworkPolicies(h.Namespace).Get(names.HostDesktopPolicy(h.Name)); err == nil {
			_, err := kit.DeleteChild(ctx, c.children, kit.NetworkPolicies, gvk, h.Name, names.LabelHost, p)
			write(err)
		}
	}
	errs = append(errs, c.ensureReader(ctx, h, want, owner.WithoutReference(), write)...)

	var result kit.Result
	if cred.refreshIn > 0 {
		result.RequeueAfter = cred.refreshIn
	}
	if cred.retryAfter > 0 {
		result.RequeueAfter = cred.retryAfter
	}
	switch {
	case len(refused) > 0:
		slices.Sort(refused)
		st.notOwned(strings.Join(refused, "; "))
		if result.RequeueAfter == 0 || result.RequeueAfter > refusedRetry {
			result.RequeueAfter = refusedRetry
		}
	case configMissing != "":
		st.configMissing(configMissing)
	case !cred.present:
		st.waitingForCredential()
	case live == nil:
		// The write failed (retried): status shows what runs meanwhile.
		st.deployed(contextID, c.deploymentOf(h))
	default:
		st.deployed(contextID, live)
	}
	return result, errs
}

// ensureReader writes h's channel-reader objects in the channels namespace,
// which no owner reference reaches. Its egress policy comes first and the
// reader Deployment only once the policy is HCC's: that policy alone
// isolates the reader (the channels namespace has no default deny). A
// policy whose write failed keeps a reader from being created or rolled;
// one held by an object HCC does not own also stops a running reader, its
// confinement being someone else's now.
func (c *Controller) ensureReader(ctx context.Context, h *clerumv1alpha1.Host, want resources.Children, reader kit.Owner, write func(error) bool) []error {
	opts := c.cfg.Build
	var errs []error
	err := kit.EnsureFrom(ctx, c.children, kit.NetworkPolicies, reader, c.readerPolicies.NetworkPolicies(opts.ChannelsNamespace), want.ChannelReaderPolicy)
	switch {
	case write(err):
		write(kit.EnsureFrom(ctx, c.children, kit.Deployments, reader, c.readerDeployments.Deployments(opts.ChannelsNamespace), want.ChannelReaderDeployment))
	case isOwnership(err):
		live, lerr := c.readerDeployments.Deployments(opts.ChannelsNamespace).Get(names.ChannelReader(h.Name))
		if lerr == nil {
			errs = append(errs, c.scaleToZero(ctx, h, reader, live))
		}
	}
	write(kit.EnsureFrom(ctx, c.children, kit.Services, reader, c.readerServices.Services(opts.ChannelsNamespace), want.ChannelReaderService))
	return errs
}

// credential is what ensureCredential found or made.
type credential struct {
	// present: the Secret holds a credential issued for this Host's UID,
	// expired or not — what its pods may mount. A credential of an earlier
	// Host of the same name is never present.
	present   bool
	refreshIn time.Duration // when to look again; 0: no credential to wait for
	// retryAfter is the Control API's own retry delay after a failure.
	retryAfter time.Duration
}

// ensureCredential keeps h's runtime-token Secret holding a bootstrap
// credential issued for h's UID that is not due for refresh. It calls the
// Control API only when one is needed: no Secret, one not believed (no mark
// of HCC's, or an older credential than the one this process wrote last,
// put back), one issued for another UID (the Host was re-created under its
// name), an expiry it cannot read, or one within the refresh window. An
// unmarked Secret from before HCC_HOST_ADOPT_CREDENTIALS_CREATED_BEFORE may
// be adopted instead (adoptCredential). A failed call leaves a still-valid
// credential in place and is retried with backoff; AuthReady says which.
func (c *Controller) ensureCredential(ctx context.Context, h *clerumv1alpha1.Host, owner kit.Owner, st *status) (credential, error) {
	now := c.clock.Now()
	live, err := c.secrets.Secrets(h.Namespace).Get(names.HostRuntimeTokens(h.Name))
	if err != nil && !apierrors.IsNotFound(err) {
		return credential{}, err
	}
	// The pre-check's stand-in carries data as the real write will: an
	// immutable Secret holding nothing refuses it too.
	placeholder := resources.BuildRuntimeTokenSecret(h, c.cfg.Build, "", now)
	// unwritable is why the Secret could not take a new credential: not
	// HCC's (which refuses the Host now), or a change HCC cannot make (it
	// was marked immutable, its type changed), which matters only when a
	// credential is due — found before the Control API is asked, so a
	// credential that cannot be stored is never issued.
	var unwritable error
	refuse := func() (credential, error) {
		_, _, err := kit.Ensure(ctx, c.children, kit.Secrets, owner, live, placeholder) // reports the refusal; writes nothing
		reason := reasons.NotOwned
		if !isOwnership(err) {
			reason = reasons.CredentialRefused
		}
		st.auth(metav1.ConditionFalse, reason, "the runtime-token Secret cannot be written: "+err.Error(), time.Time{})
		return credential{}, err
	}
	if live != nil {
		if _, _, err := kit.Plan(kit.Secrets, owner, live, placeholder); isOwnership(err) {
			return refuse()
		} else if isRefused(err) {
			unwritable = err
		}
	}
	iss := resources.ReadIssuance(live, c.cfg.Build.RuntimeTokenMark)
	ok := believed(iss)
	uid, expiresAt := iss.UID, iss.ExpiresAt
	last, wrote := c.state.issuedFor(h.Name)
	wrote = wrote && last.uid == h.UID
	if !wrote && iss.Trust == resources.Unmarked && unwritable == nil {
		// The opt-in migration: an unmarked Secret from before the cutoff
		// may be adopted instead of re-issued. Never one this process has
		// stored a credential in since: what it holds now was written later.
		if cred, adopted, err := c.adoptCredential(ctx, h, owner, live, now, st); adopted || err != nil {
			return cred, err
		}
	}
	switch {
	case wrote && ok && iss.Digest == last.digest:
		// The cache shows the credential this process wrote last.
	case wrote && last.behind(live) && (live != nil || now.Sub(last.at) < cacheGrace):
		// Written, not yet in the cache. Never call the Control API twice
		// for one credential.
		uid, expiresAt, ok = last.uid, last.expiresAt, true
	case wrote && ok && uid == h.UID && !expiresAt.After(last.expiresAt):
		// The cache is at or past the write and shows another, older
		// credential of this Host's, under a mark that verifies: one HCC
		// replaced, put back. It is not the credential HCC issued last.
		// (A later one is another HCC's, written since: believed.)
		ok, iss.Trust = false, resources.Replayed
		c.reportForged(h, live, iss)
	case !ok && iss.Trust != resources.NoCredential:
		c.reportForged(h, live, iss)
	}
	valid := ok && uid == h.UID && now.Before(expiresAt)
	refreshAt := expiresAt.Add(-c.cfg.RefreshBefore)
	if valid && now.Before(refreshAt) {
		st.auth(metav1.ConditionTrue, reasons.CredentialIssued, fmt.Sprintf("bootstrap credential valid until %s", expiresAt.UTC().Format(time.RFC3339)), expiresAt)
		return credential{present: true, refreshIn: refreshAt.Sub(now)}, nil
	}

	why := "no credential yet"
	switch {
	case live != nil && iss.Trust == resources.Replayed:
		why = "the runtime-token Secret holds an older credential than the one HCC wrote last (put back): what it holds is not believed"
	case live != nil && !ok && iss.Trust == resources.Unmarked:
		why = "the runtime-token Secret carries no mark of HCC's: what it holds is not believed"
	case live != nil && !ok && iss.Trust == resources.Mismatch:
		why = "the runtime-token Secret's mark does not verify: what it holds is not believed"
	case live != nil && ok && uid != h.UID:
		why = "the credential was issued for an earlier Host of this name"
	case live != nil && !ok:
		why = "the runtime-token Secret does not say when its credential expires"
	case valid:
		why = "the credential is due for refresh"
	case ok:
		why = "the credential has expired"
	}
	present := ok && uid == h.UID
	if unwritable != nil {
		cred, err := refuse()
		cred.present = present
		return cred, err
	}
	issued, held := c.state.unstoredFor(h.Name, h.UID, now.Add(c.cfg.RefreshBefore))
	err = nil // the lister's NotFound above is no failure of this call
	if !held {
		issued, err = c.obtain(ctx, h)
	}
	if err != nil {
		reason := reasons.ControlAPIUnavailable
		if !errors.Is(err, controlapi.ErrUnavailable) {
			reason = reasons.CredentialRefused
		}
		c.recorder.Eventf(h, corev1.EventTypeWarning, reasons.EventCredentialFailed, "obtaining a bootstrap credential (%s) failed: %v", why, err)
		// Never later than the refresh window, whatever the Control API
		// says (its client caps it too).
		result := credential{present: present, retryAfter: min(retryAfter(err), c.cfg.RefreshBefore)}
		if valid {
			// Degraded, not down: the pod keeps a working credential.
			st.auth(metav1.ConditionTrue, reason, fmt.Sprintf("bootstrap credential valid until %s; refreshing it failed: %v",
				expiresAt.UTC().Format(time.RFC3339), err), expiresAt)
		} else {
			// An expired credential of this Host's is still what its pods
			// mount: its expiry stays in the status and in the expiry
			// gauge, which goes negative, so an outage that outlasts a
			// credential shows instead of the Host dropping out of it.
			var mounted time.Time
			if present {
				mounted = expiresAt
			}
			st.auth(metav1.ConditionFalse, reason, fmt.Sprintf("%s; obtaining one failed: %v", why, err), mounted)
		}
		if result.retryAfter > 0 {
			return result, nil // the Control API said when; the queue comes back then
		}
		return result, fmt.Errorf("obtaining a bootstrap credential for Host %s: %w", h.Name, err)
	}
	desired := resources.BuildRuntimeTokenSecret(h, c.cfg.Build, issued.Value, issued.ExpiresAt)
	written, _, err := kit.Ensure(ctx, c.children, kit.Secrets, owner, live, desired)
	if err != nil {
		// Kept in memory, never logged: the retry stores it without asking
		// the Control API again.
		c.state.holdUnstored(h.Name, h.UID, issued)
		st.auth(metav1.ConditionFalse, reasons.CredentialRefused, "the credential could not be stored: "+err.Error(), time.Time{})
		return credential{present: present}, err
	}
	// The expiry as the Secret records it (whole seconds, rounded down).
	stored := issued.ExpiresAt.UTC().Truncate(time.Second)
	// Remembered by digest, never by value: what the cache will show of it.
	last = issuance{uid: h.UID, expiresAt: stored, at: now, digest: string(secretdigest.ValueDigest([]byte(issued.Value)))}
	if live != nil {
		last.basis = live.ResourceVersion
	}
	if written != nil {
		last.written = written.ResourceVersion
	}
	c.state.issued(h.Name, last)
	c.logFor(h).Info().Str("why", why).Time("expiresAt", stored).Msg("bootstrap credential stored")
	st.auth(metav1.ConditionTrue, reasons.CredentialIssued, fmt.Sprintf("bootstrap credential valid until %s", stored.UTC().Format(time.RFC3339)), stored)
	return credential{present: true, refreshIn: max(stored.Add(-c.cfg.RefreshBefore).Sub(now), minRefreshIn)}, nil
}

// believed is the one rule for which runtime-token Secrets HCC takes at
// their word: only those whose mark verifies (docs/host.md, "HCC's mark").
// An unmarked Secret — written by someone else, or by a controller from
// before marks — holds nothing HCC believes and is re-issued, unless the
// opt-in migration adopts it first (adoptCredential), which marks it.
func believed(iss resources.Issuance) bool {
	return iss.Trust == resources.Marked
}

// EventForgedCredential is the Warning event of a runtime-token Secret
// whose credential HCC does not believe: it carries no mark, one that does
// not verify, or an older credential than the one HCC wrote last. A new
// credential is issued and written over it.
const EventForgedCredential = "ForgedCredential"

// reportForged reports, once per version of the Secret, a runtime-token
// Secret that claims a credential HCC does not believe: a Warning event and
// clerum_hcc_host_forged_credentials_total. Nothing of its content is
// quoted.
func (c *Controller) reportForged(h *clerumv1alpha1.Host, s *corev1.Secret, iss resources.Issuance) {
	if !c.state.forgedOnce(h.Name, string(s.UID)+"/"+s.ResourceVersion) {
		return
	}
	why := "carries no mark of HCC's (written by someone else, or by an HCC from before marks)"
	switch iss.Trust {
	case resources.Mismatch:
		why = "carries a mark that does not verify (written or edited by someone else, or marked under an earlier INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET)"
	case resources.Replayed:
		why = "holds an older credential of HCC's than the one HCC wrote last (put back by someone else)"
	}
	c.logFor(h).Warn().Str("secret", s.Name).Str("trust", iss.Trust.String()).Msg("runtime-token Secret not believed; re-issuing its credential")
	c.metrics.Forged.WithLabelValues(iss.Trust.String()).Inc()
	c.recorder.Eventf(h, corev1.EventTypeWarning, EventForgedCredential,
		"the runtime-token Secret %s %s: its credential is not used, and a new one is issued and written over it", s.Name, why)
}

// minRefreshIn is the soonest a stored credential is looked at again.
const minRefreshIn = time.Minute

// MinCredentialMargin is how much longer than the refresh window a
// credential from the Control API must live; a shorter one is an error, not
// a refresh loop (the Control API client's MinLifetime).
const MinCredentialMargin = 5 * time.Minute

// obtain asks the Control API for h's credential, unless the breaker is
// open: after consecutive failures to reach it, calls stop for a while and
// fail at once, so an outage does not hold every worker for the client's
// whole retry budget while Context changes wait behind them.
func (c *Controller) obtain(ctx context.Context, h *clerumv1alpha1.Host) (controlapi.Credential, error) {
	if err := c.breaker.allow(c.clock.Now()); err != nil {
		return controlapi.Credential{}, err
	}
	cred, err := c.issuer.BootstrapCredential(ctx, controlapi.BootstrapRequest{
		Namespace: c.cfg.TargetNamespace, HostRef: h.Name, HostUID: string(h.UID)})
	c.breaker.record(c.clock.Now(), err)
	return cred, err
}

// retryAfter is the Control API's Retry-After in err, or 0.
func retryAfter(err error) time.Duration {
	var se *controlapi.StatusError
	if errors.As(err, &se) {
		return se.RetryAfter
	}
	return 0
}

// isRefused reports whether err is a kit refusal of any cause.
func isRefused(err error) bool {
	var r *kit.RefusedError
	return errors.As(err, &r)
}

// cacheGrace is how long a credential this process stored is trusted over
// a cache that does not show it yet.
const cacheGrace = time.Minute

// isOwnership reports whether err refuses a child for who owns it (not for
// a change it cannot make).
func isOwnership(err error) bool {
	var r *kit.RefusedError
	return errors.As(err, &r) && errors.Is(err, kit.ErrNotOwned)
}

// stopPods scales h's Deployment to zero, keeping its template: the Host's
// Context no longer vouches for the contextId its pods carry.
func (c *Controller) stopPods(ctx context.Context, h *clerumv1alpha1.Host) error {
	return c.scaleToZero(ctx, h, kit.Owner{Object: h, GVK: gvk, IdentityLabel: names.LabelHost}, c.deploymentOf(h))
}

// scaleToZero scales live, a Deployment of h's, to zero, keeping its
// template.
func (c *Controller) scaleToZero(ctx context.Context, h *clerumv1alpha1.Host, owner kit.Owner, live *appsv1.Deployment) error {
	if live == nil || ptr.Deref(live.Spec.Replicas, 1) == 0 ||
		live.Labels[names.LabelManagedBy] != names.ManagedByValue || live.Labels[names.LabelHost] != names.Label(h.Name) {
		return nil // none, stopped, or not this Host's to stop
	}
	desired := live.DeepCopy()
	desired.Spec.Replicas = ptr.To[int32](0)
	_, _, err := kit.Ensure(ctx, c.children, kit.Deployments, owner, live, desired)
	if errors.Is(err, kit.ErrNotOwned) {
		return nil // reported by Ensure; never written
	}
	return err
}

// deploymentOf returns h's live Deployment, or nil.
func (c *Controller) deploymentOf(h *clerumv1alpha1.Host) *appsv1.Deployment {
	d, err := c.deployments.Deployments(h.Namespace).Get(names.HostWorkload(h.Name))
	if err != nil {
		return nil
	}
	return d
}

// addFinalizer makes sure h cannot go before HCC has deleted its children
// in the channels namespace, which no owner reference reaches. The patch
// carries h's resourceVersion, so it never overwrites a change it did not
// see.
func (c *Controller) addFinalizer(ctx context.Context, h *clerumv1alpha1.Host) error {
	if slices.Contains(h.Finalizers, clerumv1alpha1.FinalizerHostCleanup) {
		return nil
	}
	return c.patchFinalizers(ctx, h, append(slices.Clone(h.Finalizers), clerumv1alpha1.FinalizerHostCleanup))
}

func (c *Controller) patchFinalizers(ctx context.Context, h *clerumv1alpha1.Host, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": finalizers, "resourceVersion": h.ResourceVersion}})
	if err != nil {
		return err
	}
	_, err = c.hcc.ClerumV1alpha1().Hosts(h.Namespace).Patch(ctx, h.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: clerumv1alpha1.FieldManagerHost})
	return err
}

// finalize deletes the children of h, which is being deleted, in both
// namespaces — its workspace claim included: the deletion was observed —
// and removes HCC's finalizer once none is left but those on their way out.
func (c *Controller) finalize(ctx context.Context, h *clerumv1alpha1.Host) error {
	c.state.deleted.Observe(h.Name, h.UID)
	remaining, err := c.deleteChildren(ctx, h.Name, func(metav1.Object) bool { return true })
	if err != nil {
		return err
	}
	if remaining == 0 {
		// The caches may not show a child created an instant before the
		// deletion: ask the API server for each name before letting go.
		if remaining, err = c.deleteUncached(ctx, h); err != nil {
			return err
		}
	}
	if remaining > 0 {
		return fmt.Errorf("host %s: %d child(ren) still being deleted: %w", h.Name, remaining, kit.ErrBeingDeleted)
	}
	c.state.forget(h.Name)
	c.metrics.refresh(c.state, c.clock.Now())
	if !slices.Contains(h.Finalizers, clerumv1alpha1.FinalizerHostCleanup) {
		return nil
	}
	kept := slices.DeleteFunc(slices.Clone(h.Finalizers), func(f string) bool { return f == clerumv1alpha1.FinalizerHostCleanup })
	err = c.patchFinalizers(ctx, h, kept)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// gone handles a Host no longer in the cache. If this process saw it
// deleted, its leftovers (children the finalizer's pass could not see yet)
// are deleted, workspace claim included; otherwise nothing is: children of
// a Host no one saw go are the sweep's, under its caps, and a workspace
// claim is never deleted that way.
func (c *Controller) gone(ctx context.Context, host string) error {
	c.state.forget(host)
	c.metrics.refresh(c.state, c.clock.Now())
	if !c.state.deleted.Seen(host) {
		return nil
	}
	remaining, err := c.deleteChildren(ctx, host, func(o metav1.Object) bool { return c.state.deleted.Leftover(host, o) })
	if err != nil {
		return err
	}
	if remaining == 0 {
		c.state.deleted.Settle(host)
	}
	return nil
}

// deleteChildren deletes every child of the Host named host the caches
// show, in both namespaces, and returns how many are still on their way out
// (deleted, with a finalizer of their own to run). A claim held only by
// kubernetes.io/pvc-protection counts as gone: it goes when its pod does.
func (c *Controller) deleteChildren(ctx context.Context, host string, leftover func(metav1.Object) bool) (remaining int, err error) {
	var errs []error
	for _, child := range c.childrenOf(host) {
		if !leftover(child.live) {
			continue // a later Host's of the same name
		}
		if child.live.GetDeletionTimestamp() != nil {
			if !pvcProtectedOnly(child.live) {
				remaining++
			}
			continue
		}
		if _, err := child.delete(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return remaining, errors.Join(errs...)
}

// deleteUncached reads every per-Host name of h from the API server and
// deletes what is still there and h's; it returns how many are still on
// their way out.
func (c *Controller) deleteUncached(ctx context.Context, h *clerumv1alpha1.Host) (int, error) {
	hostNS, readerNS := c.cfg.Build.HostNamespace, c.cfg.Build.ChannelsNamespace
	checks := []func() (bool, error){
		liveChild(ctx, c, kit.Deployments, hostNS, names.HostWorkload(h.Name), h.Name),
		liveChild(ctx, c, kit.Services, hostNS, names.HostWorkload(h.Name), h.Name),
		liveChild(ctx, c, kit.PersistentVolumeClaims, hostNS, names.HostWorkspace(h.Name), h.Name),
		liveChild(ctx, c, kit.Secrets, hostNS, names.HostRuntimeTokens(h.Name), h.Name),
		liveChild(ctx, c, kit.ServiceAccounts, hostNS, names.HostIdentity(h.Name), h.Name),
		liveChild(ctx, c, kit.Roles, hostNS, names.HostIdentity(h.Name), h.Name),
		liveChild(ctx, c, kit.RoleBindings, hostNS, names.HostIdentity(h.Name), h.Name),
		liveChild(ctx, c, kit.NetworkPolicies, hostNS, names.HostDesktopPolicy(h.Name), h.Name),
		liveChild(ctx, c, kit.Deployments, readerNS, names.ChannelReader(h.Name), h.Name),
		liveChild(ctx, c, kit.Services, readerNS, names.ChannelReader(h.Name), h.Name),
		liveChild(ctx, c, kit.NetworkPolicies, readerNS, names.ChannelReaderEgressPolicy(h.Name), h.Name),
	}
	remaining := 0
	var errs []error
	for _, check := range checks {
		going, err := check()
		if err != nil {
			errs = append(errs, err)
		} else if going {
			remaining++
		}
	}
	return remaining, errors.Join(errs...)
}

// liveChild returns a check that reads name from the API server and, when
// it is the Host's, deletes it; it reports whether the object is still on
// its way out.
func liveChild[T kit.Child](ctx context.Context, c *Controller, kind kit.Kind[T], ns, name, host string) func() (bool, error) {
	return func() (bool, error) {
		live, err := kind.Client(c.kube, ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, err
		case live.GetDeletionTimestamp() != nil:
			return !pvcProtectedOnly(live), nil
		}
		_, err = kit.DeleteChild(ctx, c.children, kind, gvk, host, names.LabelHost, live)
		return false, err
	}
}

// pvcProtectedOnly reports whether o is a claim on its way out that only
// the claim-protection finalizer holds.
func pvcProtectedOnly(o metav1.Object) bool {
	_, claim := o.(*corev1.PersistentVolumeClaim)
	return claim && slices.Equal(o.GetFinalizers(), []string{"kubernetes.io/pvc-protection"})
}
