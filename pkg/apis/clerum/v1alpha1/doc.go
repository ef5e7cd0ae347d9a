// Package v1alpha1 holds the clerum.io/v1alpha1 API: McpServer, Context,
// Host, SharedFileSystem and GlobalFileSystem. It is the only hand-written API
// code; deepcopy, registration, clients, listers, informers, apply
// configurations and CRD manifests are generated from it (make generate).
//
// +k8s:deepcopy-gen=package
// +groupName=clerum.io
package v1alpha1
