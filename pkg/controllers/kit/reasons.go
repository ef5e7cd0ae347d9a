package kit

// The reasons of every condition and event HCC's reconcilers write, in one
// place so that two reconcilers never spell one reason two ways and an
// operator's alert or `kubectl get events --field-selector reason=...` can
// rely on them. Condition types and field managers are part of the API, in
// pkg/apis/clerum/v1alpha1.

// ExternalEgressReady (McpServer, field manager hcc-netpol).
const (
	ReasonNoBindings       = "NoBindings"       // True: nothing to program
	ReasonProgrammed       = "Programmed"       // True: every binding is in the cluster
	ReasonPending          = "Pending"          // False: the current generation is not in the cluster yet
	ReasonBindingRejected  = "BindingRejected"  // False: a binding can never be allowed as written
	ReasonResolutionFailed = "ResolutionFailed" // False: a lookup failed; retried
)

// ContextIDConflict (Context, field manager hcc-netpol).
const (
	ReasonDuplicateContextID = "DuplicateContextID" // True: an older Context holds the contextId
	ReasonUniqueContextID    = "Unique"             // False: the conflict ended
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
	ReasonAvailable        = "Available"         // Ready True: the Deployment has its replicas available
	ReasonProgressing      = "Progressing"       // Ready False: the Deployment is rolling out
	ReasonDisabled         = "Disabled"          // Ready False: spec.enabled is false; no replicas run
	ReasonSecretsMissing   = "SecretsMissing"    // a referenced Secret or key is missing
	ReasonSecretsFound     = "SecretsFound"      // SecretsResolved True
	ReasonImageAllowed     = "PrefixMatched"     // ImageAllowed True
	ReasonImageNotAllowed  = "ImageNotAllowed"   // ImageAllowed False, enforce mode: blocked
	ReasonAuditOnly        = "AuditOnly"         // ImageAllowed False, audit mode: deployed anyway
	ReasonPlatformImage    = "PlatformImage"     // ImageAllowed True: a remote server runs the platform proxy
	ReasonEgressPending    = "EgressPending"     // Ready False: the egress gate is closed
	ReasonInvalidSpec      = "InvalidSpec"       // Ready False: the spec cannot be built
	ReasonNotOwned         = "NotOwned"          // Ready False: an object HCC does not own holds a child's name
	ReasonStdioSingleton   = "StdioSingleton"    // ReplicasCapped True
	ReasonReplicasAsked    = "AsRequested"       // ReplicasCapped False
	ReasonRemoteCovered    = "BindingCoversHost" // RemoteReachable True
	ReasonRemoteNotCovered = "NoBindingForHost"  // RemoteReachable False
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
)

// Host status (field manager hcc-host). Ready also uses ReasonAvailable,
// ReasonProgressing, ReasonSecretsMissing, ReasonInvalidSpec and
// ReasonNotOwned; SecretsResolved uses ReasonSecretsFound and
// ReasonSecretsMissing; Blocked and Released are its events too.
const (
	ReasonContextMissing  = "ContextMissing"  // Ready False: the Host's Context does not exist
	ReasonContextConflict = "ContextConflict" // Ready False: another Context holds the contextId
	// ReasonCredentialPending: Ready False, no bootstrap credential yet.
	ReasonCredentialPending = "CredentialPending"
	// AuthReady.
	ReasonCredentialIssued      = "CredentialIssued"      // True: a credential for this Host, not due
	ReasonControlAPIUnavailable = "ControlAPIUnavailable" // the Control API could not be reached, timed out or failed (5xx, 429)
	ReasonCredentialRefused     = "CredentialRefused"     // the Control API refused, answered unusably, or the Secret could not be written
)

// Host events.
const (
	// EventCredentialFailed: obtaining or refreshing a Host's bootstrap
	// credential failed (the message never holds a credential or token).
	EventCredentialFailed = "CredentialFailed"
)

// SharedFileSystem and GlobalFileSystem status (field managers
// hcc-sharedfilesystem, hcc-globalfilesystem). Ready also uses
// ReasonAvailable, ReasonProgressing and ReasonNotOwned.
const (
	ReasonConfigFound   = "ConfigFound"   // ConfigResolved True
	ReasonConfigMissing = "ConfigMissing" // ConfigResolved False: a Secret, ConfigMap or key is missing
	ReasonConfigInvalid = "ConfigInvalid" // ConfigResolved False: a value is malformed (a PEM key that does not parse)
	ReasonClaimBound    = "Bound"         // VolumeBound True
	ReasonClaimPending  = "ClaimPending"  // VolumeBound False: the claim is not bound yet
	ReasonShrinkRefused = "ShrinkRefused" // VolumeBound: spec.size is below the claim's; a claim only grows
	ReasonSeeded        = "Seeded"        // RootSeeded True
	ReasonSeedPending   = "SeedPending"   // RootSeeded False: the seed Job has not completed
	ReasonSeedFailed    = "SeedFailed"    // RootSeeded False: the seed Job failed
)
