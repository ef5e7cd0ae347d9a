// Package reasons holds the reasons of every condition and event HCC's
// reconcilers write, in one place so that two reconcilers never spell one
// reason two ways and an operator's alert or `kubectl get events
// --field-selector reason=...` can rely on them. Condition types and field
// managers are part of the API, in pkg/apis/clerum/v1alpha1. It imports
// nothing, so the pure planning packages and render can use it.
package reasons

// ExternalEgressReady (McpServer, field manager hcc-netpol).
const (
	NoBindings       = "NoBindings"       // True: nothing to program
	Programmed       = "Programmed"       // True: every binding is in the cluster
	Pending          = "Pending"          // False: the current generation is not in the cluster yet
	BindingRejected  = "BindingRejected"  // False: a binding can never be allowed as written
	ResolutionFailed = "ResolutionFailed" // False: a lookup failed; retried
)

// ContextIDConflict (Context, field manager hcc-netpol).
const (
	DuplicateContextID = "DuplicateContextID" // True: an older Context holds the contextId
	UniqueContextID    = "Unique"             // False: the conflict ended
)

// Events.
const (
	// EventEgressBindingRejected: a server's set of rejected egress bindings
	// changed (on the McpServer).
	EventEgressBindingRejected = "EgressBindingRejected"
	// EventRecipeBindingRejected: a recipe binding or a Context allow gets
	// no policy (on the McpServer).
	EventRecipeBindingRejected = "BindingRejected"
	// EventDuplicateContextID: a Context is ignored for a duplicate
	// contextId (on the Context).
	EventDuplicateContextID = "DuplicateContextID"
	// EventGrantsWithheld: new allows of a contextId are withheld while
	// pods of a Host whose Context does not hold it still carry it (on the
	// Context that holds it).
	EventGrantsWithheld = "GrantsWithheld"
	// EventUnmanagedConflict: an object HCC does not own holds a name HCC
	// needs (on that object and on the owner it was for).
	EventUnmanagedConflict = "UnmanagedConflict"
	// EventTakenOver: a managed child's controller reference named an owner
	// that no longer exists, or was missing, and now names the live owner
	// (on the owner).
	EventTakenOver = "TakenOver"
	// EventChangeRefused: a child is HCC's but cannot become what the
	// builder asks — an immutable field changed, a claim would shrink (on
	// the owner and the child).
	EventChangeRefused = "ChangeRefused"
)

// McpServer status (field manager hcc-mcpserver).
const (
	Available        = "Available"         // Ready True: the Deployment has its replicas available
	Progressing      = "Progressing"       // Ready False: the Deployment is rolling out
	Disabled         = "Disabled"          // Ready False: spec.enabled is false; no replicas run
	SecretsMissing   = "SecretsMissing"    // a referenced Secret or key is missing
	SecretsFound     = "SecretsFound"      // SecretsResolved True
	ImageAllowed     = "PrefixMatched"     // ImageAllowed True
	ImageNotAllowed  = "ImageNotAllowed"   // ImageAllowed False, enforce mode: blocked
	AuditOnly        = "AuditOnly"         // ImageAllowed False, audit mode: deployed anyway
	PlatformImage    = "PlatformImage"     // ImageAllowed True: a remote server runs the platform proxy
	EgressPending    = "EgressPending"     // Ready False: the egress gate is closed
	InvalidSpec      = "InvalidSpec"       // Ready False: the spec cannot be built
	NotOwned         = "NotOwned"          // Ready False: an object HCC does not own holds a child's name
	StdioSingleton   = "StdioSingleton"    // ReplicasCapped True
	ReplicasAsked    = "AsRequested"       // ReplicasCapped False
	RemoteCovered    = "BindingCoversHost" // RemoteReachable True
	RemoteNotCovered = "NoBindingForHost"  // RemoteReachable False
	// FieldsIgnored (remote servers only).
	RemoteFieldsIgnored = "RemoteFieldsIgnored" // True: the spec sets fields the egress proxy does not use
	NoFieldsIgnored     = "NoFieldsIgnored"     // False: it sets none
)

// McpServer events.
const (
	// EventBlocked: a server is kept from deploying (the message says why).
	EventBlocked = "Blocked"
	// EventReleased: a blocked server may deploy again.
	EventReleased = "Released"
	// EventRemoteUnreachable: a remote server's bindings do not cover its
	// URL's host, so its proxy cannot reach the upstream.
	EventRemoteUnreachable = "RemoteUnreachable"
	// EventRemoteInsecure: a remote server's URL is plain http.
	EventRemoteInsecure = "RemoteInsecure"
	// EventFieldsIgnored (Normal): a remote server sets fields its pods do
	// not use; once per generation.
	EventFieldsIgnored = "FieldsIgnored"
)

// Host status (field manager hcc-host). Ready also uses Available,
// Progressing, SecretsMissing, InvalidSpec and
// NotOwned; SecretsResolved uses SecretsFound and
// SecretsMissing; Blocked and Released are its events too.
const (
	ContextMissing  = "ContextMissing"  // Ready False: the Host's Context does not exist
	ContextConflict = "ContextConflict" // Ready False: another Context holds the contextId
	// CredentialPending: Ready False, no bootstrap credential yet.
	CredentialPending = "CredentialPending"
	// AuthReady.
	CredentialIssued      = "CredentialIssued"      // True: a credential for this Host, not due
	ControlAPIUnavailable = "ControlAPIUnavailable" // the Control API could not be reached, timed out or failed (5xx, 429)
	CredentialRefused     = "CredentialRefused"     // the Control API refused, answered unusably, or the Secret could not be written
)

// Host events.
const (
	// EventCredentialFailed: obtaining or refreshing a Host's bootstrap
	// credential failed (the message never holds a credential or token).
	EventCredentialFailed = "CredentialFailed"
	// EventCredentialAdopted: an unmarked runtime-token Secret from before
	// HCC_HOST_ADOPT_CREDENTIALS_CREATED_BEFORE was marked and its
	// credential kept instead of re-issued (Normal).
	EventCredentialAdopted = "CredentialAdopted"
)

// SharedFileSystem and GlobalFileSystem status (field managers
// hcc-sharedfilesystem, hcc-globalfilesystem). Ready also uses
// Available, Progressing and NotOwned.
const (
	ConfigFound   = "ConfigFound"   // ConfigResolved True
	ConfigMissing = "ConfigMissing" // ConfigResolved False: a Secret, ConfigMap or key is missing
	ConfigInvalid = "ConfigInvalid" // ConfigResolved False: a value is malformed (a PEM key that does not parse)
	ClaimBound    = "Bound"         // VolumeBound True
	ClaimPending  = "ClaimPending"  // VolumeBound False: the claim is not bound yet
	ShrinkRefused = "ShrinkRefused" // VolumeBound: spec.size is below the claim's; a claim only grows
	Seeded        = "Seeded"        // RootSeeded True
	SeedPending   = "SeedPending"   // RootSeeded False: the seed Job has not completed
	SeedFailed    = "SeedFailed"    // RootSeeded False: the seed Job failed
)
